package bench

import (
	"fmt"
	"math"
)

// Sizes are the sizes of the workloads. The defaults let a whole run of both controller
// managers finish in about twelve minutes on an idle 2-core machine: at the default
// --kube-api-qps of 20 the ReplicaSet and Deployment workloads take as long as their
// requests need at that rate, whichever controller manager runs them.
type Sizes struct {
	// OneReplicaSetPods is the size of the one-replicaset workload's ReplicaSet.
	OneReplicaSetPods int `json:"oneReplicaSetPods"`
	// ManyReplicaSets of ManyReplicaSetPods pods make the many-replicasets workload.
	ManyReplicaSets    int `json:"manyReplicaSets"`
	ManyReplicaSetPods int `json:"manyReplicaSetPods"`
	// Deployments of DeploymentReplicas replicas make the deployments workload.
	Deployments        int `json:"deployments"`
	DeploymentReplicas int `json:"deploymentReplicas"`
	// Services over PodsPerService pods each make the endpoints workload.
	Services       int `json:"services"`
	PodsPerService int `json:"podsPerService"`
	// CeilingPods is the number of pods of the ceiling workload.
	CeilingPods int `json:"ceilingPods"`
	// SliceServicePods is the number of pods of the endpointslices-one-service
	// workload's one Service.
	SliceServicePods int `json:"sliceServicePods"`
	// ScaleDeployments of ScaleReplicas replicas make the scale workload (make
	// bench-scale), which runs only when named.
	ScaleDeployments int `json:"scaleDeployments,omitempty"`
	ScaleReplicas    int `json:"scaleReplicas,omitempty"`
}

// DefaultSizes returns the sizes of `make bench`.
func DefaultSizes() Sizes {
	return Sizes{
		OneReplicaSetPods:  1000,
		ManyReplicaSets:    200,
		ManyReplicaSetPods: 5,
		Deployments:        15,
		DeploymentReplicas: 10,
		Services:           100,
		PodsPerService:     20,
		CeilingPods:        1000,
		SliceServicePods:   5000,
		ScaleDeployments:   100,
		ScaleReplicas:      300,
	}
}

// Scaled multiplies the number of objects of every workload by scale (the pods of the
// one ReplicaSet, the ReplicaSets, Deployments and Services, the ceiling's pods, the
// pods of the one big Service, the scale workload's Deployments); the
// size of each object stays, so that a larger scale means a larger cluster, not larger
// applications.
func (s Sizes) Scaled(scale float64) Sizes {
	times := func(n int) int { return max(1, int(math.Round(float64(n)*scale))) }
	s.OneReplicaSetPods = times(s.OneReplicaSetPods)
	s.ManyReplicaSets = times(s.ManyReplicaSets)
	s.Deployments = times(s.Deployments)
	s.Services = times(s.Services)
	s.CeilingPods = times(s.CeilingPods)
	s.SliceServicePods = times(s.SliceServicePods)
	s.ScaleDeployments = times(s.ScaleDeployments)
	return s
}

// ParseCount parses "N" or "NxM" (a count and, optionally, a size), as the runner's
// flags take sizes.
func ParseCount(s string) (count, size int, err error) {
	if _, err := fmt.Sscanf(s, "%dx%d", &count, &size); err == nil && count > 0 && size > 0 {
		return count, size, nil
	}
	if _, err := fmt.Sscanf(s, "%d", &count); err == nil && count > 0 && fmt.Sprint(count) == s {
		return count, 0, nil
	}
	return 0, 0, fmt.Errorf("size %q: want a positive N or NxM", s)
}
