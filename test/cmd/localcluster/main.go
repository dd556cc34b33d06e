// Command localcluster is `make run`: a local control plane (etcd, kube-apiserver,
// kube-scheduler, KWOK with fake nodes), three mini-kcm replicas each with its own
// identity, a sample Deployment and Service, and a one-line live status. Ctrl-C stops
// everything and leaves no process behind.
//
// Try, in another terminal, with the printed KUBECONFIG:
//
//	kubectl scale deployment sample --replicas=5
//	kubectl get endpoints sample
//	kill <pid of the leader>        # a standby takes over within ~5s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// leaseName is mini-kcm's default Lease, kube-system/mini-kube-controller-manager.
const leaseName = "mini-kube-controller-manager"

func main() {
	var (
		binary   = flag.String("mini-kcm", "bin/mini-kcm", "path of the mini-kcm binary")
		replicas = flag.Int("replicas", 3, "number of mini-kcm replicas")
		nodes    = flag.Int("nodes", 3, "number of fake nodes")
		dir      = flag.String("dir", "", "directory for the control plane state and logs (default: a new temporary directory, kept until exit)")
		shards   = flag.Int("shards", 1, "mini-kcm's --shards; above 1 the apiserver runs with the ShardedListAndWatch gate and the sample is applied to tenant namespaces too")
	)
	flag.Parse()
	if err := run(*binary, *replicas, *nodes, *dir, *shards); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// replica is one running mini-kcm.
type replica struct {
	name string
	// port serves HTTPS on 127.0.0.1.
	port int
	// scraper reads /metrics as a user in system:masters.
	scraper *http.Client
	process *controlplane.Process
}

func run(binary string, replicaCount, nodes int, dir string, shards int) error {
	binary, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("mini-kcm binary: %w; run `make build` first", err)
	}
	// The first Ctrl-C stops everything in order; the processes die with us anyway.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println(">> starting the local control plane (etcd, kube-apiserver, kube-scheduler, kwok)")
	var apiserverArgs []string
	if shards > 1 {
		// Sharded replicas need the apiserver to filter by shardSelector (alpha).
		apiserverArgs = []string{"--feature-gates=ShardedListAndWatch=true"}
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ExtraAPIServerArgs: apiserverArgs,
		Dir:                dir,
		Scheduler:          true,
		KWOK:               true,
		Nodes:              nodes,
		Logf:               func(format string, args ...any) { fmt.Printf("   "+format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	var running []*replica
	defer func() {
		fmt.Println("\n>> stopping mini-kcm replicas and the control plane")
		// All at once: stopping the leader first would only hand the Lease to a
		// standby that is about to be stopped too.
		var wg sync.WaitGroup
		for _, r := range running {
			wg.Go(func() { r.process.Stop(15 * time.Second) })
		}
		wg.Wait()
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
		fmt.Println(">> stopped; no process left running")
	}()

	// The policy binds one Lease, the single leader's; sharded, its own binds each shard's.
	if err := installFence(ctx, cp, replicaCount, shards); err != nil {
		return err
	}
	for i := 1; i <= replicaCount; i++ {
		r, err := startReplica(cp, binary, i, shards)
		if err != nil {
			return err
		}
		running = append(running, r)
	}
	client := cp.Client()
	namespaces := []string{metav1.NamespaceDefault}
	if shards > 1 {
		// Enough namespaces for every shard to have some, named like tenants.
		for i := range 2 * shards {
			namespaces = append(namespaces, fmt.Sprintf("tenant-%02d", i))
		}
	}
	for _, ns := range namespaces {
		if err := applySample(ctx, client, ns); err != nil {
			return err
		}
	}

	fmt.Printf("\n>> ready. In another terminal:\n\n   export KUBECONFIG=%s\n   kubectl get deployments,pods,endpoints -o wide\n\n", cp.KubeconfigPath())
	for _, r := range running {
		fmt.Printf("   %s  pid %-7d  https://127.0.0.1:%d/metrics  log %s\n", r.name, r.process.Pid(), r.port, r.process.LogPath())
	}
	fmt.Printf("   control plane logs and audit log: %s\n\n", filepath.Join(cp.Dir(), "logs"))

	interactive := isTerminal(os.Stdout)
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		line := status(ctx, client, running, shards)
		if interactive {
			// Rewrite one line in place; pad to clear the rest of a longer previous line.
			fmt.Printf("\r%-150s", line)
		} else {
			fmt.Println(line)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// replicaName is the name of replica i, and of its user.
func replicaName(i int) string { return fmt.Sprintf("mini-kcm-replica-%d", i) }

// installFence installs deploy/fence's policy and binding, with the local replicas'
// users in place of deploy/'s ServiceAccounts: the apiserver refuses a replica's writes
// unless it sends the Lease's current holder (--leader-elect-apiserver-fence).
func installFence(ctx context.Context, cp *controlplane.ControlPlane, replicaCount, shards int) error {
	users := make([]string, replicaCount)
	for i := range users {
		users[i] = strconv.Quote(replicaName(i + 1))
	}
	identities := "request.userInfo.username in [" + strings.Join(users, ", ") + "]"
	if shards > 1 {
		return installShardFence(ctx, cp, identities, shards)
	}
	policy, err := controlplane.FencePolicy("", identities)
	if err != nil {
		return err
	}
	binding, err := controlplane.FenceBinding(controlplane.FenceBindingOptions{})
	if err != nil {
		return err
	}
	if binding.Spec.ParamRef.Namespace != metav1.NamespaceSystem || binding.Spec.ParamRef.Name != leaseName {
		return fmt.Errorf("deploy/fence/binding.yaml binds Lease %s/%s, but the replicas elect on kube-system/%s",
			binding.Spec.ParamRef.Namespace, binding.Spec.ParamRef.Name, leaseName)
	}
	if err := controlplane.InstallFencePolicy(ctx, cp.Client(), policy); err != nil {
		return err
	}
	if err := controlplane.InstallFenceBinding(ctx, cp.Client(), binding); err != nil {
		return err
	}
	fmt.Printf(">> installed the write fence of deploy/fence: ValidatingAdmissionPolicy %s bound to Lease kube-system/%s\n", policy.Name, leaseName)
	return nil
}

// installShardFence installs the fence of deploy/sharded/fence/ for the local replicas:
// its policy, and one binding per shard Lease.
func installShardFence(ctx context.Context, cp *controlplane.ControlPlane, identities string, shards int) error {
	policy, err := controlplane.ShardFencePolicy(identities)
	if err != nil {
		return err
	}
	bindings, err := controlplane.ShardFenceBindings(policy.Name, metav1.NamespaceSystem, leaseName, shards, nil)
	if err != nil {
		return err
	}
	if err := controlplane.InstallFencePolicy(ctx, cp.Client(), policy); err != nil {
		return err
	}
	for _, b := range bindings {
		if err := controlplane.InstallFenceBinding(ctx, cp.Client(), b); err != nil {
			return err
		}
	}
	fmt.Printf(">> installed the write fence of deploy/sharded/fence: ValidatingAdmissionPolicy %s bound to Leases kube-system/%s-0 … -%d\n",
		policy.Name, leaseName, shards-1)
	return nil
}

// startReplica starts mini-kcm replica i with its own user and a free port, with both
// layers of the write fence (sharded: per shard).
func startReplica(cp *controlplane.ControlPlane, binary string, i, shards int) (*replica, error) {
	name := replicaName(i)
	// TODO: a least-privilege RBAC role instead of system:masters once it exists.
	kubeconfig, err := cp.AddUser(name, "system:masters")
	if err != nil {
		return nil, err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	serving, err := cp.ServingFlags(name, port, kubeconfig)
	if err != nil {
		return nil, err
	}
	scraper, err := cp.ScrapeClient("localcluster-scraper")
	if err != nil {
		return nil, err
	}
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name:    name,
		Path:    binary,
		Args:    append(append([]string{"--kubeconfig=" + kubeconfig, "--shards=" + strconv.Itoa(shards)}, serving...), "--leader-elect-apiserver-fence=true", "--v=2"),
		LogPath: filepath.Join(cp.Dir(), "logs", name+".log"),
	})
	if err != nil {
		return nil, err
	}
	return &replica{name: name, port: port, scraper: scraper, process: p}, nil
}

// applySample creates, in namespace, a Deployment of three pause pods and a Service
// selecting them. KWOK never pulls the image; the pods only need to look real.
func applySample(ctx context.Context, client kubernetes.Interface, namespace string) error {
	if namespace != metav1.NamespaceDefault {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", namespace, err)
		}
	}
	labels := map[string]string{"app": "sample"}
	replicas := int32(3)
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "pause",
					Image: "registry.k8s.io/pause:3.10",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := client.AppsV1().Deployments(namespace).Create(ctx, deployment, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the sample Deployment: %w", err)
	}
	if _, err := client.CoreV1().Services(namespace).Create(ctx, service, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the sample Service: %w", err)
	}
	fmt.Printf(">> applied Deployment %s/sample (3 × registry.k8s.io/pause:3.10) and Service %s/sample\n", namespace, namespace)
	return nil
}

// status renders one line: the leader (sharded: the shards each replica holds), the
// replicas still running, the Deployments' ready counts, and the addresses of the
// sample Service's Endpoints.
func status(ctx context.Context, client kubernetes.Interface, replicas []*replica, shards int) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	leader, alive := "none", 0
	var held []string
	for _, r := range replicas {
		if r.process.Exited() {
			continue
		}
		alive++
		leases := leases(ctx, r)
		if shards > 1 {
			var mine []string
			for i := range shards {
				if leases[fmt.Sprintf("%s-%d", leaseName, i)] {
					mine = append(mine, strconv.Itoa(i))
				}
			}
			held = append(held, fmt.Sprintf("%s [%s]", strings.TrimPrefix(r.name, "mini-kcm-"), strings.Join(mine, ",")))
		}
		if leases[leaseName] {
			leader = fmt.Sprintf("%s (pid %d)", r.name, r.process.Pid())
		}
	}
	if shards > 1 {
		leader = "shards: " + strings.Join(held, " ")
	}

	var deployments []string
	if list, err := client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil {
		deployments = append(deployments, "error: "+err.Error())
	} else {
		var ready, want int32
		for _, d := range list.Items {
			w := int32(1)
			if d.Spec.Replicas != nil {
				w = *d.Spec.Replicas
			}
			ready, want = ready+d.Status.ReadyReplicas, want+w
			if len(list.Items) <= 3 {
				deployments = append(deployments, fmt.Sprintf("%s/%s %d/%d", d.Namespace, d.Name, d.Status.ReadyReplicas, w))
			}
		}
		if len(list.Items) > 3 {
			deployments = append(deployments, fmt.Sprintf("%d Deployments, pods %d/%d", len(list.Items), ready, want))
		}
	}

	addresses := "none"
	if ep, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "sample", metav1.GetOptions{}); err == nil {
		var ips []string
		for _, subset := range ep.Subsets {
			for _, a := range subset.Addresses {
				ips = append(ips, a.IP)
			}
		}
		if len(ips) > 0 {
			addresses = strings.Join(ips, ",")
		}
	}
	return fmt.Sprintf("%s  leader: %s  replicas: %d/%d  deployments ready: %s  endpoints sample: %s",
		time.Now().Format("15:04:05"), leader, alive, len(replicas), strings.Join(deployments, ", "), addresses)
}

// leases returns the Leases the replica's metrics say it holds, by name.
func leases(ctx context.Context, r *replica) map[string]bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(r.port)+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := r.scraper.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	held := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		name, ok := strings.CutPrefix(line, `leader_election_master_status{name="`)
		if name, value, found := strings.Cut(name, `"} `); ok && found && value == "1" {
			held[name] = true
		}
	}
	return held
}

// isTerminal reports whether f is a character device, i.e. a terminal a line can be
// rewritten on.
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
