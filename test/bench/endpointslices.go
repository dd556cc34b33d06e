package bench

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// endpointSlicesController is the --controllers value of the EndpointSlice workloads:
// that controller alone, so that CPU and memory are its own.
const endpointSlicesController = "endpointslice-controller"

// endpointSlicesWorkload measures the EndpointSlice controller over many Services, with
// the endpoints workload's objects and phases: the pods exist and are Ready before the
// controller manager starts; Services are created until every Service's slices list
// all its pods as ready, then every pod's readiness is flipped off and back on.
func endpointSlicesWorkload() workload {
	return sliceWorkload("endpointslices",
		func(s Sizes) (int, int) { return s.Services, s.PodsPerService })
}

// endpointSlicesOneServiceWorkload is the same over one Service with many pods, whose
// endpoints span many slices (100 each, upstream's default): how a controller copes
// with one big Service whose pods change one after another.
func endpointSlicesOneServiceWorkload() workload {
	return sliceWorkload("endpointslices-one-service",
		func(s Sizes) (int, int) { return 1, s.SliceServicePods })
}

// sliceWorkload builds an EndpointSlice workload over the sizes returns (Services, pods
// per Service). The readiness phases count writes per pod changed, the Service phase
// per Service.
func sliceWorkload(name string, sizes func(Sizes) (int, int)) workload {
	return workload{
		name:        name,
		controllers: endpointSlicesController,
		description: func(sz Sizes) string {
			s, p := sizes(sz)
			return fmt.Sprintf("EndpointSlice controller only: %d Services over %d Ready pods each: create until every "+
				"Service's slices list all its pods, then mark every pod NotReady, then Ready again "+
				"(pods/status patches); writes per pod in the readiness phases", s, p)
		},
		prepare: func(ctx context.Context, e *env) error {
			s, p := sizes(e.cfg.Sizes)
			return createServicePods(ctx, e, s, p)
		},
		run: func(ctx context.Context, e *env) error {
			s, p := sizes(e.cfg.Sizes)
			if err := e.phase(ctx, Phase{Name: "create Services", Objects: s},
				func(ctx context.Context) error { return createServices(ctx, e, s) },
				func() error { return slicesComplete(e, s, p, true) }); err != nil {
				return err
			}
			if err := e.phase(ctx, Phase{Name: "all pods NotReady", Objects: s * p, FromLastChange: true},
				func(ctx context.Context) error { return setPodsReady(ctx, e, s, p, false) },
				func() error { return slicesComplete(e, s, p, false) }); err != nil {
				return err
			}
			return e.phase(ctx, Phase{Name: "all pods Ready again", Objects: s * p, FromLastChange: true},
				func(ctx context.Context) error { return setPodsReady(ctx, e, s, p, true) },
				func() error { return slicesComplete(e, s, p, true) })
		},
	}
}

// slicesComplete checks that the slices of each of s Services list its p pods, all
// ready (ready) or all not ready (!ready).
func slicesComplete(e *env, s, p int, ready bool) error {
	complete := 0
	for i := range s {
		list, err := e.endpointSlices.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: serviceName(i)}))
		if err != nil {
			return err
		}
		endpoints, matching := 0, 0
		for _, slice := range list {
			for _, ep := range slice.Endpoints {
				endpoints++
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready == ready {
					matching++
				}
			}
		}
		if endpoints == p && matching == p {
			complete++
		}
	}
	return progressOrNil("EndpointSlices complete", complete, s)
}
