package replicaset

import (
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// The gates of Kubernetes' pkg/features that only this controller reads, with the
// history Kubernetes v1.37.2 declares for them (pkg/features/kube_features.go): beta and
// on at 1.37, none locked, so each can be turned off. It also reads
// controllers.DeploymentReplicaSetTerminatingReplicas, which it shares with the
// Deployment controller.
var (
	// PodDeletionCost ranks pods by their pod-deletion-cost annotation on scale-down.
	// Off, the annotation is ignored.
	PodDeletionCost = controllers.FeatureGate{
		Name: "PodDeletionCost",
		Specs: featuregate.VersionedSpecs{
			{Version: version.MustParse("1.21"), Default: false, PreRelease: featuregate.Alpha},
			{Version: version.MustParse("1.22"), Default: true, PreRelease: featuregate.Beta},
		},
	}
	// StaleControllerConsistencyReplicaSet holds a sync back until the informers have
	// seen the pods and status the controller wrote for that ReplicaSet. Off, only
	// expectations guard it against its own stale cache.
	StaleControllerConsistencyReplicaSet = controllers.FeatureGate{
		Name: "StaleControllerConsistencyReplicaSet",
		Specs: featuregate.VersionedSpecs{
			{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
		},
	}
)
