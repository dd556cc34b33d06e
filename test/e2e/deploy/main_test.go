// Package deploy proves the manifests of deploy/ against a real apiserver: every object
// of the kustomization applies with server-side apply and strict field validation;
// mini-kcm, run with nothing but a token of the ServiceAccount kube-system/mini-kcm and
// the flags of the StatefulSet, leads and rolls out the sample app of deploy/sample/;
// and that token may make every call the controllers need and none of the calls they
// never make, as the apiserver's own RBAC authorizer decides.
//
// No kubectl binary is used: install reads the kustomization's file list and applies
// each file itself. The StatefulSet never gets pods here, because no StatefulSet
// controller runs on the local control plane; its replicas are processes started with
// the StatefulSet's container arguments instead.
package deploy

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane whose pods run (scheduler and KWOK on three fake
// nodes), so that the sample Deployment's pods become Ready and get addresses.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{Scheduler: true, KWOK: true, Nodes: 3}))
}
