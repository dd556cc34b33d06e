// Package controlplane runs a real, local Kubernetes control plane for e2e tests,
// benchmarks and `make run`: etcd, kube-apiserver and, on request, kube-scheduler and
// the KWOK fake kubelet with fake nodes, each a child process on free loopback ports,
// with all state in one directory.
//
// What it gives:
//   - an admin kubeconfig and *rest.Config (client certificate, group system:masters),
//     and AddUser for more client-certificate identities, so every mini-kcm replica can
//     have its own user in RBAC decisions and in the audit log;
//   - an audit log at Metadata level: user, user agent, verb, resource and timestamps
//     of every request, and the bodies of Lease writes (ReadAuditLog parses it);
//   - pods that behave as on a real cluster without containers: kube-scheduler binds
//     them to untainted fake nodes and KWOK marks them Running and Ready with a pod IP,
//     and finishes their deletion as a kubelet would;
//   - StopAPIServer, StartAPIServer and RestartAPIServer on the same port and etcd, for
//     reliability tests.
//
// No controller manager runs: that is the job of the code under test. There is no
// service account controller either, so the ServiceAccount admission plugin is off;
// the token signer is configured, so TokenRequest works.
//
// Node mode (Options.Node) is the exception, for the suites that run deploy/ as users
// do: one real node (kubelet, containerd, CNI bridge, kube-proxy) in a network
// namespace of its own instead of KWOK, kube-controller-manager with mini-kcm's
// controllers off, the ServiceAccount admission plugin on, and a kubernetes Service
// that pods reach; node_linux.go says where each component listens. It needs root and
// a few packages (NodeSupported says which).
//
// Binaries come from `make control-plane` (hack/build-control-plane.sh), which builds
// them from source into a cache outside the checkout; see BinDir.
//
// Processes are never left behind: each child runs in its own process group, which
// Stop terminates (SIGTERM, then SIGKILL); on Linux the kernel kills every child when
// the parent dies, whatever the cause (panic, test timeout, SIGKILL); and StartForTest
// stops the control plane on test cleanup and on SIGINT/SIGTERM.
//
// We run the processes ourselves rather than through controller-runtime's envtest:
// envtest starts only etcd and kube-apiserver, cannot restart the apiserver on the same
// port, does not tie its children's lives to the parent's, and would add
// controller-runtime to the module for a few hundred lines of work.
package controlplane
