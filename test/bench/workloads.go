package bench

import "context"

// workload is one benchmark scenario.
type workload struct {
	name string
	// description says what the workload does at the given sizes.
	description func(Sizes) string
	// lifted runs the controller manager with Config.LiftedSettings, raised with
	// Config.RaisedSettings.
	lifted, raised bool
	// prepare, when set, runs on the fresh control plane before the controller manager
	// starts.
	prepare func(ctx context.Context, e *env) error
	// run runs the measured phases.
	run func(ctx context.Context, e *env) error
	// controllers is the --controllers value of both controller managers; empty means
	// benchedControllers, or every controller of the registry if everyController.
	controllers     string
	everyController bool
	// optIn workloads run only when named (Config.Workloads), never by default: the
	// scale workload takes an hour or more.
	optIn bool
}

// allWorkloads lists the workloads in the order they run (the optIn ones only when
// named).
func allWorkloads() []workload {
	return []workload{
		oneReplicaSetWorkload(),
		manyReplicaSetsWorkload(),
		deploymentWorkload(),
		endpointsWorkload(),
		endpointsRaisedWorkload(),
		endpointSlicesWorkload(),
		endpointSlicesOneServiceWorkload(),
		ceilingWorkload(),
		scaleWorkload(),
	}
}
