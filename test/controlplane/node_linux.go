package controlplane

// One real node: kubelet, containerd, CNI and kube-proxy in a network namespace the
// harness creates, so that deploy/ runs as on a cluster while nothing is configured in
// the machine's root network namespace but loopback listeners.
//
// Where everything listens:
//
//	root network namespace (the host)
//	  127.0.0.1:<port>        etcd, kube-apiserver, kube-scheduler (as without a node)
//	  kube-controller-manager serves nothing (--secure-port=0)
//	  <dir>/node/containerd/containerd.sock   containerd's API (a unix socket crosses
//	                          namespaces: ctr and the harness use it from the host)
//	node network namespace mini-kcm-node-<pid>-<n>
//	  10.255.0.1/32 on lo     the node's address (InternalIP) and the kubernetes
//	                          Service's endpoint: the harness listens on
//	                          10.255.0.1:<apiserver port> and forwards each connection
//	                          to 127.0.0.1:<apiserver port> on the host
//	  127.0.0.1:10250         kubelet API (webhook authentication and authorization
//	                          through the apiserver, no anonymous requests)
//	  127.0.0.1:10248         kubelet healthz
//	  127.0.0.1:10249/10256   kube-proxy metrics and healthz
//	  cni0 10.244.0.1/24      the CNI bridge; pods get 10.244.0.2-254 from host-local
//	  10.96.0.1:443           the kubernetes Service, DNATed by kube-proxy's iptables
//	                          rules (in this namespace only) to 10.255.0.1:<port>
//
// State lives under <dir>/node: containerd's root, state and socket (pod network
// namespaces too, netns_mounts_under_state_dir), the kubelet's root dir (volume
// mounts), pod logs, the static pod manifests and the CNI configuration and IP
// allocations. Pods' cgroups live under /<netns name> in every cgroup v1 hierarchy.
// stopNode and cleanupAbandonedNodes undo all of it: processes, mounts, cgroups, the
// namespace (and with it its iptables rules). cleanupAbandonedNodes learns what a
// killed run made from the record startNode wrote in /run/mini-kcm-e2e;
// noderecord_linux.go says which records it trusts.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node component names, also the names of their log files.
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
	KubeProxy  = "kube-proxy"
)

// NodeName is the name of the real node.
const NodeName = "mini-kcm-node"

// nodeNetnsPrefix names the network namespaces, cgroups and records of node runs; the
// pid of the test process follows, so leftovers of a dead run can be told from a live
// one.
const nodeNetnsPrefix = "mini-kcm-node-"

var (
	nodePodSubnet = "10.244.0.0/24"
	nodeRuns      atomic.Int32
)

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// nodePackages maps each program the node needs to the Debian package providing it.
var nodePackages = []struct{ path, pkg string }{
	{"/usr/bin/containerd", "containerd"},
	{"/usr/bin/containerd-shim-runc-v2", "containerd"},
	{"/usr/bin/ctr", "containerd"},
	{"/usr/sbin/runc", "runc"},
	{cniBinDir + "/bridge", "containernetworking-plugins"},
	{cniBinDir + "/host-local", "containernetworking-plugins"},
	{cniBinDir + "/loopback", "containernetworking-plugins"},
	{"/usr/sbin/iptables", "iptables"},
	{"/usr/sbin/conntrack", "conntrack"},
	{"/usr/bin/nsenter", "util-linux"},
	{"/usr/sbin/ip", "iproute2"},
	// Not the node's: the runbooks' reads of a replica's status use it
	// (test/e2e/node/prometheus_test.go runs them as documented).
	{"/usr/bin/curl", "curl"},
}

// NodeInstallCommand installs what the node needs on Debian or Ubuntu.
const NodeInstallCommand = "apt-get install -y containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux curl"

// NodeSupported returns nil when this machine can run the node (Options.Node), else an
// error naming what is missing and how to install it.
func NodeSupported() error {
	var problems, pkgs []string
	if os.Geteuid() != 0 {
		problems = append(problems, "root (the node creates network namespaces, cgroups and mounts)")
	}
	for _, p := range nodePackages {
		if _, err := os.Stat(p.path); err != nil {
			problems = append(problems, p.path)
			if !containsString(pkgs, p.pkg) {
				pkgs = append(pkgs, p.pkg)
			}
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		problems = append(problems, "cgroup v1 controllers at /sys/fs/cgroup/<controller> (the node's kubelet is set up for this kernel's cgroup v1)")
	}
	if len(problems) == 0 {
		return nil
	}
	msg := "the local node needs " + strings.Join(problems, ", ")
	if len(pkgs) > 0 {
		msg += "; install with: apt-get update && apt-get install -y " + strings.Join(pkgs, " ")
	}
	return errors.New(msg)
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// node is the running node of a control plane.
type node struct {
	record nodeRecord
	// recordPath is the record's file in nodeRecordsDir, or "" when none was written:
	// as before, a directory the caller chose or kept (MINI_KCM_KEEP_DIR=1) is not
	// cleaned up after a killed run, but its namespace and cgroups are (by name).
	recordPath string
	forwarder  *forwarder
	// egress is the apiserver's way into the namespace (startNodeEgress).
	egress *forwarder
}

// NodeDir returns the node's state directory, or "" without a node.
func (cp *ControlPlane) NodeDir() string {
	if cp.node == nil {
		return ""
	}
	return cp.node.record.Dir
}

// StaticPodDir returns the kubelet's staticPodPath: manifests written there run as
// static pods.
func (cp *ControlPlane) StaticPodDir() string { return filepath.Join(cp.NodeDir(), "manifests") }

// NodeKubeconfig issues a client certificate for user name in groups and writes a
// kubeconfig for it that reaches the apiserver from inside the node (a static pod's
// or a hostNetwork pod's), returning its path.
func (cp *ControlPlane) NodeKubeconfig(name string, groups ...string) (string, error) {
	if cp.node == nil || cp.node.forwarder == nil {
		return "", errors.New("no node: start the control plane with Options.Node")
	}
	return cp.addUserAt(name, "https://"+cp.node.forwarder.address, groups...)
}

// ContainerdAddress returns the socket of the node's containerd, or "" without a node:
// for tools that run ctr themselves (test/e2e/node's signal hook).
func (cp *ControlPlane) ContainerdAddress() string {
	if cp.node == nil {
		return ""
	}
	return cp.node.record.containerdSocket()
}

// Ctr runs containerd's ctr against the node's containerd in the kubelet's namespace
// (k8s.io), e.g. Ctr(ctx, "images", "import", tarball).
func (cp *ControlPlane) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	if cp.node == nil {
		return nil, errors.New("no node: start the control plane with Options.Node")
	}
	args = append([]string{"--address", cp.node.record.containerdSocket(), "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// ContainerPID returns the host pid of a running container's main process; id is the
// container ID of a pod's status, with or without its "containerd://" prefix.
func (cp *ControlPlane) ContainerPID(ctx context.Context, id string) (int, error) {
	id = strings.TrimPrefix(id, "containerd://")
	out, err := cp.Ctr(ctx, "tasks", "ls")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 3 && fields[0] == id {
			return strconv.Atoi(fields[1])
		}
	}
	return 0, fmt.Errorf("container %s has no task in containerd:\n%s", id, out)
}

// startNode starts the node and returns once the kubelet registered it Ready.
func (cp *ControlPlane) startNode(ctx context.Context) error {
	if err := NodeSupported(); err != nil {
		return err
	}
	record := nodeRecord{
		Netns: fmt.Sprintf("%s%d-%d", nodeNetnsPrefix, os.Getpid(), nodeRuns.Add(1)),
		Dir:   filepath.Join(cp.dir, "node"),
	}
	cp.node = &node{record: record}
	for _, sub := range []string{"containerd/root", "containerd/state", "opt", "cni/net.d", "cni/ipam",
		"kubelet", "manifests", "pod-logs", "kube-proxy"} {
		if err := os.MkdirAll(filepath.Join(record.Dir, sub), 0o755); err != nil {
			return fmt.Errorf("creating node directory: %w", err)
		}
	}
	// Written before anything is created on the machine, so that the next run can
	// clean up after a killed one.
	if cp.removeDir {
		path, err := writeNodeRecord(nodeRecordsDir, record, os.TempDir())
		if err != nil {
			return fmt.Errorf("recording the node for cleanup: %w", err)
		}
		cp.node.recordPath = path
	}

	begin := time.Now()
	if err := createNodeNetwork(record.Netns); err != nil {
		return err
	}
	if err := createCgroupRoot(record.cgroupRoot()); err != nil {
		return err
	}
	fw, err := startForwarder(record.Netns, net.JoinHostPort(nodeAPIServerIP.String(), strconv.Itoa(cp.ports.apiServer)),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(cp.ports.apiServer)))
	if err != nil {
		return err
	}
	cp.node.forwarder = fw
	if cp.node.egress, err = startNodeEgress(record.Netns, cp.nodeEgressPath()); err != nil {
		return err
	}
	kubeconfig, err := cp.addUserAt("system:node:"+NodeName, "https://"+fw.address, "system:masters", "system:nodes")
	if err != nil {
		return err
	}
	if err := cp.writeNodeConfigs(record, kubeconfig); err != nil {
		return err
	}
	if err := cp.startContainerd(ctx, record); err != nil {
		return err
	}
	if err := cp.startInNetns(record, Kubelet, filepath.Join(cp.opts.BinDir, Kubelet),
		"--config="+filepath.Join(record.Dir, "kubelet.yaml"),
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(record.Dir, "kubelet"),
		"--hostname-override="+NodeName,
		"--node-ip="+nodeAPIServerIP.String(),
		"--v=2"); err != nil {
		return err
	}
	if err := cp.startInNetns(record, KubeProxy, filepath.Join(cp.opts.BinDir, KubeProxy),
		"--config="+filepath.Join(record.Dir, "kube-proxy.yaml"), "--v=2"); err != nil {
		return err
	}
	cp.mu.Lock()
	kubelet := cp.processes[Kubelet]
	cp.mu.Unlock()
	if err := cp.waitReady(ctx, kubelet, func(ctx context.Context) error {
		n, err := cp.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready yet", NodeName)
	}); err != nil {
		return err
	}
	cp.opts.Logf("node %s ready in %v (network namespace %s)", NodeName, time.Since(begin).Round(10*time.Millisecond), record.Netns)
	return nil
}

// startInNetns runs a node component inside the node's network namespace. nsenter
// rather than `ip netns exec`: the latter also remounts /sys, which hides the cgroup
// mounts from the kubelet ("failed to find cgroup mounts").
func (cp *ControlPlane) startInNetns(record nodeRecord, name, path string, args ...string) error {
	p, err := StartProcess(ProcessSpec{
		Name:    name,
		Path:    "/usr/bin/nsenter",
		Args:    append([]string{"--net=/run/netns/" + record.Netns, "--", path}, args...),
		LogPath: cp.LogPath(name),
	})
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.processes[name] = p
	cp.mu.Unlock()
	return nil
}

func (cp *ControlPlane) startContainerd(ctx context.Context, record nodeRecord) error {
	if err := cp.startInNetns(record, Containerd, "/usr/bin/containerd",
		"--config="+filepath.Join(record.Dir, "containerd.toml")); err != nil {
		return err
	}
	cp.mu.Lock()
	p := cp.processes[Containerd]
	cp.mu.Unlock()
	return cp.waitReady(ctx, p, func(ctx context.Context) error {
		_, err := cp.Ctr(ctx, "version")
		return err
	})
}

// writeNodeConfigs writes the configuration of containerd, CNI, the kubelet and
// kube-proxy.
func (cp *ControlPlane) writeNodeConfigs(record nodeRecord, kubeconfig string) error {
	dir := record.Dir
	containerd := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # Root here lacks CAP_SYS_RESOURCE: runc fails a sandbox whose oom_score_adj is
  # below ours ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  # Pod network namespaces under our state dir, not /run/netns, so cleanup finds them.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`, filepath.Join(dir, "containerd/root"), filepath.Join(dir, "containerd/state"), record.containerdSocket(),
		filepath.Join(dir, "opt"), PauseImage, cniBinDir, filepath.Join(dir, "cni/net.d"))

	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "mini-kcm-node",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
`, filepath.Join(dir, "cni/ipam"), nodePodSubnet)

	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This kernel mounts cgroup v1 controllers (cgroup2 only at /sys/fs/cgroup/unified);
# kubelet v1.35+ refuses cgroup v1 unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
# The run's own cgroup subtree, so that cleanup removes exactly ours.
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
staticPodPath: %[3]q
podLogsDir: %[4]q
# The kubelet API only on the namespace's loopback: no pod but a hostNetwork one
# reaches it, and nothing outside the namespace. Every request is authenticated (client
# certificates of the cluster CA, tokens by TokenReview) and authorized by the apiserver
# (SubjectAccessReview: nodes/proxy, nodes/log, ...), as a kubeadm node does: a pod
# cannot exec into another one and read its token.
address: 127.0.0.1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[5]q
authorization:
  mode: Webhook
# A serving certificate of the cluster CA, for the node's addresses, so that its clients
# verify the kubelet (it would make a self-signed one).
tlsCertFile: %[6]q
tlsPrivateKeyFile: %[7]q
clusterDomain: cluster.local
failSwapOn: false
# A shared CI disk may be fuller than the defaults allow.
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Quicker reaction to a pod's changes than the defaults, at a node's cost only.
syncFrequency: 10s
fileCheckFrequency: 2s
`, record.cgroupRoot(), record.containerdSocket(), filepath.Join(dir, "manifests"), filepath.Join(dir, "pod-logs"), cp.pkiPath("ca.crt"),
		filepath.Join(dir, "kubelet-serving.crt"), filepath.Join(dir, "kubelet-serving.key"))
	serving, err := cp.ca.issue(pkix.Name{CommonName: "system:node:" + NodeName}, x509.ExtKeyUsageServerAuth, nodeAPIServerIP)
	if err != nil {
		return err
	}

	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
clusterCIDR: %q
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the kernel's global conntrack settings alone: not ours to change.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`, kubeconfig, NodeName, podCIDR)

	return writeFiles(map[string][]byte{
		filepath.Join(dir, "containerd.toml"):                []byte(containerd),
		filepath.Join(dir, "cni/net.d/10-mini-kcm.conflist"): []byte(cni),
		filepath.Join(dir, "kubelet.yaml"):                   []byte(kubelet),
		filepath.Join(dir, "kube-proxy.yaml"):                []byte(proxy),
		filepath.Join(dir, "kubelet-serving.crt"):            serving.certPEM,
		filepath.Join(dir, "kubelet-serving.key"):            serving.keyPEM,
	})
}

// Image names of the node, spelled out in full: the CRI normalises a short name such as
// pause:dev to docker.io/library/pause:dev before looking it up.
const (
	PauseImage = "registry.local/pause:dev"
)

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// createNodeNetwork creates the network namespace with loopback up and the node's
// address on it. Nothing changes in the root namespace.
func createNodeNetwork(netns string) error {
	for _, args := range [][]string{
		{"netns", "add", netns},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "addr", "add", nodeAPIServerIP.String() + "/32", "dev", "lo"},
	} {
		if err := run("ip", args...); err != nil {
			return fmt.Errorf("creating the node's network namespace: %w", err)
		}
	}
	return nil
}

// cgroupHierarchies returns the mount points of the cgroup hierarchies: the v1
// controllers and, on a hybrid system like this one, the unified (v2) one, where runc
// creates the containers' cgroups too.
func cgroupHierarchies() []string {
	mounts, err := readMounts()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, m := range mounts {
		if m.fsType == "cgroup" || m.fsType == "cgroup2" {
			dirs = append(dirs, m.mountPoint)
		}
	}
	return dirs
}

// createCgroupRoot creates the kubelet's cgroupRoot in every hierarchy (the kubelet
// checks it exists); cpuset needs its cpus and mems copied from the parent before a
// task may join.
func createCgroupRoot(root string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("initialising %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// stopNode stops the node's processes and removes everything the node created.
func (cp *ControlPlane) stopNode() {
	if cp.node == nil {
		return
	}
	// The kubelet first, or it restarts the containers killed below.
	for _, name := range []string{Kubelet, KubeProxy} {
		cp.stopComponent(name, 5*time.Second)
	}
	record := cp.node.record
	killNodeWorkloads(record)
	cp.stopComponent(Containerd, 5*time.Second)
	if cp.node.egress != nil {
		cp.node.egress.stop()
	}
	if cp.node.forwarder != nil {
		cp.node.forwarder.stop()
	}
	if err := removeNodeState(record); err != nil {
		// The record stays, so that the next run tries again once we are gone.
		cp.opts.Logf("cleaning up the node: %v", err)
		return
	}
	if cp.node.recordPath != "" {
		if err := os.Remove(cp.node.recordPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			cp.opts.Logf("removing the node's record: %v", err)
		}
	}
}

// killNodeWorkloads kills every container process (by the run's cgroups) and every
// containerd shim serving the run's containerd. Shims daemonize, so they are not in our
// process group, and containers are their children.
func killNodeWorkloads(record nodeRecord) {
	var sockets []string
	root, socket := record.cgroupRoot(), record.containerdSocket()
	for range 20 {
		pids := cgroupPids(root)
		shims, shimSockets := findShims(socket)
		sockets = append(sockets, shimSockets...)
		if len(pids)+len(shims) == 0 {
			break
		}
		for _, pid := range pids {
			killNodeProcess(pid, func(pid int) bool { return inCgroup(pid, root) })
		}
		for _, pid := range shims {
			killNodeProcess(pid, func(pid int) bool { return isShimOf(pid, socket) })
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A killed shim leaves its socket in containerd's fixed directory.
	for _, s := range sockets {
		_ = os.Remove(s)
	}
}

// cgroupPids lists the processes in root's subtree of every hierarchy.
func cgroupPids(root string) []int {
	var pids []int
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !containsInt(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// killNodeProcess kills the process pid if it is still one of the node's, as ours
// says (its cgroup, its command line), and never init or the harness itself. A pid
// read a moment ago may belong to another process by now, if the one read exited and
// the pid was reused: so the process is pinned first (a pidfd, which refers to one
// process whatever happens to its pid), checked second, and signalled through the
// pin, so that a reused pid is never killed.
func killNodeProcess(pid int, ours func(pid int) bool) {
	if pid <= 1 || pid == os.Getpid() {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	// While the pinned process lives its pid is its own, so what /proc says of the
	// pid now is of that process; if it died meanwhile, the signal below fails.
	if !ours(pid) {
		return
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

// inCgroup reports whether the process pid is in root's subtree of some hierarchy.
func inCgroup(pid int, root string) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		// hierarchy-ID:controllers:path
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && (parts[2] == root || strings.HasPrefix(parts[2], root+"/")) {
			return true
		}
	}
	return false
}

// isShimOf reports whether the process pid is a containerd shim serving socket.
func isShimOf(pid int, socket string) bool {
	shims, _ := shimsOf(socket, []int{pid})
	return len(shims) == 1
}

func containsInt(list []int, n int) bool {
	for _, e := range list {
		if e == n {
			return true
		}
	}
	return false
}

// findShims lists the containerd shims whose -address is socket, and their sockets:
// containerd 1.6 puts them in /run/containerd/s, named by the sha256 of
// <containerd address>/<namespace>/<id> (runtime/v2/shim.SocketAddress).
func findShims(socket string) (pids []int, sockets []string) {
	entries, _ := os.ReadDir("/proc")
	var all []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			all = append(all, pid)
		}
	}
	return shimsOf(socket, all)
}

// shimsOf returns those of pids that are containerd shims serving socket, and the
// sockets they leave behind.
func shimsOf(socket string, candidates []int) (pids []int, sockets []string) {
	for _, pid := range candidates {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		flags := map[string]string{}
		for i := range len(args) - 1 {
			if strings.HasPrefix(args[i], "-") {
				flags[args[i]] = args[i+1]
			}
		}
		if flags["-address"] == socket {
			pids = append(pids, pid)
			sum := sha256.Sum256([]byte(filepath.Join(socket, flags["-namespace"], flags["-id"])))
			sockets = append(sockets, fmt.Sprintf("/run/containerd/s/%x", sum))
		}
	}
	return pids, sockets
}

// removeNodeState unmounts everything under the node's directory (overlay root
// filesystems, shm, pod network namespaces, volumes), removes its cgroups, the
// kubelet's symlinks in /var/log/containers and the network namespace. The directory
// itself goes with the control plane's.
func removeNodeState(record nodeRecord) error {
	var errs []error
	if err := unmountUnder(record.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(record.cgroupRoot()); err != nil {
		errs = append(errs, err)
	}
	if links, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, l := range links {
			path := filepath.Join("/var/log/containers", l.Name())
			if target, err := os.Readlink(path); err == nil && strings.HasPrefix(target, record.Dir+"/") {
				_ = os.Remove(path)
			}
		}
	}
	if _, err := os.Stat("/run/netns/" + record.Netns); err == nil {
		if err := run("ip", "netns", "delete", record.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := releaseNetnsDir(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// releaseNetnsDir undoes what the first `ip netns add` does besides adding a namespace:
// it bind-mounts /run/netns on itself, so that the namespaces mounted there propagate,
// and `ip netns delete` leaves that mount. Once /run/netns holds no namespace the mount
// serves nothing, and the next `ip netns add` (of a node, a user, podman) makes it
// again; while it holds one (another node, somebody's `ip netns`), it stays.
func releaseNetnsDir() error {
	if entries, err := os.ReadDir("/run/netns"); err != nil || len(entries) > 0 {
		return nil
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m.mountPoint != "/run/netns" {
			continue
		}
		// EBUSY: a namespace was added since the directory was read; EINVAL: already
		// unmounted (by a concurrent cleanup).
		if err := syscall.Unmount("/run/netns", 0); err != nil && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("unmounting the empty /run/netns that ip netns add mounted: %w", err)
		}
	}
	return nil
}

type mountInfo struct{ mountPoint, fsType string }

// readMounts reads the mounts of this process's mount namespace.
func readMounts() ([]mountInfo, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountInfo(data), nil
}

// MountPoints returns the mount points of this process's mount namespace, one entry
// per mount (a point mounted over twice is listed twice): the node suite checks that
// a run leaves none behind.
func MountPoints() ([]string, error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	points := make([]string, len(mounts))
	for i, m := range mounts {
		points[i] = m.mountPoint
	}
	return points, nil
}

// parseMountInfo reads /proc/<pid>/mountinfo: field 5 is the mount point (octal
// escapes for spaces), the field after " - " the filesystem type.
func parseMountInfo(data []byte) []mountInfo {
	var mounts []mountInfo
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		before, after, ok := strings.Cut(scanner.Text(), " - ")
		fields, tail := strings.Fields(before), strings.Fields(after)
		if !ok || len(fields) < 5 || len(tail) < 1 {
			continue
		}
		mp, err := strconv.Unquote(`"` + strings.ReplaceAll(fields[4], `"`, `\"`) + `"`)
		if err != nil {
			mp = fields[4]
		}
		mounts = append(mounts, mountInfo{mountPoint: mp, fsType: tail[0]})
	}
	return mounts
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	var points []string
	for _, m := range mounts {
		if strings.HasPrefix(m.mountPoint, dir+"/") {
			points = append(points, m.mountPoint)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes root's subtree in every hierarchy, children first.
func removeCgroups(root string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 20 { // a killed task may take a moment to leave its cgroup
				if err = os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// cleanupAbandonedNodes removes what node runs of dead test processes left behind:
// a test binary killed by SIGKILL or `go test -timeout` takes its children with it,
// but not the containerd shims, the containers, the mounts, cgroups or the namespace.
// It runs before the abandoned control plane directories are removed, because those
// hold the mounts. It acts only on records that pass every check of
// noderecord_linux.go, and reports the others on stderr.
func cleanupAbandonedNodes() {
	cleanupAbandonedRecords(nodeRecordsDir, os.TempDir(), processAlive, func(record nodeRecord) error {
		killNodeWorkloads(record)
		return removeNodeState(record)
	}, os.Stderr)
	// Namespaces and cgroups without a record (a run that chose its directory, or
	// whose record was lost). Only root creates entries in /run/netns and in a
	// hierarchy's root, and nodeOwner accepts only names a node run makes.
	netns, _ := os.ReadDir("/run/netns")
	for _, e := range netns {
		if pid, ok := nodeOwner(e.Name()); ok && !processAlive(pid) {
			_ = run("ip", "netns", "delete", e.Name())
		}
	}
	for _, h := range cgroupHierarchies() {
		groups, _ := os.ReadDir(h)
		for _, g := range groups {
			if pid, ok := nodeOwner(g.Name()); ok && g.IsDir() && !processAlive(pid) {
				root := "/" + g.Name()
				for _, p := range cgroupPids(root) {
					killNodeProcess(p, func(pid int) bool { return inCgroup(pid, root) })
				}
				_ = removeCgroups("/" + g.Name())
			}
		}
	}
}

// nodeOwner returns the pid in a name made by startNode (mini-kcm-node-<pid>-<n>).
func nodeOwner(name string) (int, bool) {
	pid, err := parseNodeNetns(name)
	return pid, err == nil
}

func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// forwarder accepts connections on an address inside the node's network namespace
// and relays each to the apiserver on the host's loopback: a listening socket stays in
// the namespace it was opened in, whatever thread later accepts on it.
type forwarder struct {
	address  string
	listener net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startForwarder(netns, listen, target string) (*forwarder, error) {
	listener, err := listenInNetns(netns, listen)
	if err != nil {
		return nil, err
	}
	return serveForwarder(listen, listener, func(in net.Conn) (net.Conn, net.Conn, error) {
		out, err := net.DialTimeout("tcp", target, 5*time.Second)
		return in, out, err
	}), nil
}

// startNodeEgress serves, on the unix socket path in the host, an HTTP CONNECT proxy
// that dials inside the node's network namespace: kube-apiserver's egress selector
// sends what it dials in the cluster there (the kubelet for logs, exec and
// port-forward, pods for their proxy), since the host has no route into the
// namespace. The kubelet is asked for by the node's name or address and listens on the
// namespace's loopback.
func startNodeEgress(netns, path string) (*forwarder, error) {
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	return serveForwarder(path, listener, func(in net.Conn) (net.Conn, net.Conn, error) {
		_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
		reader := bufio.NewReader(in)
		req, err := http.ReadRequest(reader)
		if err != nil {
			return in, nil, err
		}
		_ = in.SetReadDeadline(time.Time{})
		host, port, err := net.SplitHostPort(req.Host)
		if req.Method != http.MethodConnect || err != nil {
			_, _ = io.WriteString(in, "HTTP/1.1 400 Bad Request\r\n\r\n")
			return in, nil, fmt.Errorf("not a CONNECT to host:port: %s %s", req.Method, req.Host)
		}
		if host == NodeName || host == nodeAPIServerIP.String() {
			host = "127.0.0.1"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := dialInNetns(ctx, netns, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			_, _ = io.WriteString(in, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
			return in, nil, err
		}
		if _, err := io.WriteString(in, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			out.Close()
			return in, nil, err
		}
		// What the client sent after its CONNECT is in the reader's buffer.
		return bufferedConn{Conn: in, reader: reader}, out, nil
	}), nil
}

// bufferedConn reads through a bufio.Reader that may hold bytes already read from Conn.
type bufferedConn struct {
	net.Conn
	reader *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.reader.Read(p) }

// CloseWrite half-closes Conn where it can, as relay does to its other ends.
func (c bufferedConn) CloseWrite() error {
	if half, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return half.CloseWrite()
	}
	return nil
}

// serveForwarder relays each connection accepted on listener to the connection dial
// opens for it (dial may read from the accepted one first and returns what to relay).
func serveForwarder(address string, listener net.Listener, dial func(in net.Conn) (net.Conn, net.Conn, error)) *forwarder {
	f := &forwarder{address: address, listener: listener, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			in, err := listener.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.relay(dial(in))
			}()
		}
	}()
	return f
}

func (f *forwarder) relay(in, out net.Conn, err error) {
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		return
	}
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if half, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = half.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(out, in)
	go copyHalf(in, out)
	<-done
	<-done
	f.untrack(in, out)
}

// track records a relayed pair so that stop can close it; it refuses (and closes the
// pair) once stop has begun.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *forwarder) stop() {
	f.listener.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// KubeletAPI returns an HTTPS client of the node's kubelet API, which listens on the
// node namespace's loopback, and its address: the client dials there, from inside the
// namespace, as cert (nil: none) with the cluster CA trusted.
func (cp *ControlPlane) KubeletAPI(cert *tls.Certificate) (*http.Client, string) {
	client := cp.HTTPSClient(cert)
	transport := client.Transport.(*http.Transport)
	netns := cp.node.record.Netns
	transport.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		return dialInNetns(ctx, netns, network, address)
	}
	return client, "https://127.0.0.1:10250"
}

// PodNetworkClient returns an HTTP client that dials from inside the node's network
// namespace, where the pods' addresses (cni0, 10.244.0.0/24) are reachable: a test
// reads a pod's port through it (Prometheus' API) as a client on the node would.
func (cp *ControlPlane) PodNetworkClient() *http.Client {
	netns := cp.node.record.Netns
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			return dialInNetns(ctx, netns, network, address)
		},
	}}
}

// dialInNetns opens a connection from inside a network namespace, as listenInNetns
// listens in one: the socket stays in the namespace it was made in.
func dialInNetns(ctx context.Context, netns, network, address string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	results := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := os.Open("/run/netns/" + netns)
		if err != nil {
			results <- result{err: err}
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			results <- result{err: fmt.Errorf("entering network namespace %s: %w", netns, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, address)
		results <- result{c: c, err: err}
	}()
	r := <-results
	return r.c, r.err
}

// listenInNetns opens a TCP listener inside a network namespace. The goroutine locks
// its thread and never unlocks it, so the Go runtime retires that thread, namespace
// and all, instead of reusing it for other goroutines.
func listenInNetns(netns, address string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	results := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := os.Open("/run/netns/" + netns)
		if err != nil {
			results <- result{err: err}
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			results <- result{err: fmt.Errorf("entering network namespace %s: %w", netns, err)}
			return
		}
		l, err := net.Listen("tcp", address)
		results <- result{l: l, err: err}
	}()
	r := <-results
	if r.err != nil {
		return nil, fmt.Errorf("listening on %s in the node's network namespace: %w", address, r.err)
	}
	return r.l, nil
}
