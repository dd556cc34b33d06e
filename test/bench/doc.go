// Package bench measures mini-kcm side by side with the upstream kube-controller-manager
// (the v1.37.2 binary that `make control-plane` builds) on the same workloads, each run
// on a fresh local control plane (test/controlplane: etcd, kube-apiserver,
// kube-scheduler and KWOK with fake nodes):
//
//   - replicaset-1x1000: one ReplicaSet of 1000 pods until all are Ready;
//   - replicaset-200x5: 200 ReplicaSets of 5 pods until all are Ready;
//   - deployments: D Deployments of R replicas until Available, then a scale up, a
//     scale down and a rolling update of all of them;
//   - endpoints: S Services over P pods each until every Endpoints object is complete,
//     then a readiness flip of every pod (NotReady, then Ready again);
//   - endpoints-raised: the same with a raised rate limit (200/400 in `make bench`),
//     where a readiness flip waits on the controller rather than on the rate limit;
//   - ceiling: a plain client-go program with no rate limit creating pods, against
//     the controller manager's ReplicaSet controller with its rate limit lifted.
//
// For every phase of a workload it records the time to converge, the CPU the
// controller manager spent (utime+stime from /proc/<pid>/stat), its peak resident
// memory (VmHWM from /proc/<pid>/status) and the requests it made, counted from the
// apiserver's audit log by the controller manager's own user and split into reads and
// writes. Both controller managers get the same rate limits and worker counts, and
// neither runs leader election.
//
// The runner is the command test/bench/cmd/kcmbench (`make bench`); results go to
// test/bench/results as Markdown and JSON.
package bench
