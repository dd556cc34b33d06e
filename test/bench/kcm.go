package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// Implementation names a controller manager under test.
type Implementation string

// The two controller managers the benchmarks compare.
const (
	Upstream Implementation = "upstream"
	MiniKCM  Implementation = "mini-kcm"
)

// benchedControllers is the --controllers value of both controller managers, unless a
// workload names its own (workload.controllers): every controller of mini-kcm's registry
// but those a workload runs alone, whose CPU and writes would otherwise blur the
// others'. Upstream knows each by the same name, so a new controller joins the
// comparison without an edit here.
func benchedControllers() string {
	var alone []string
	for _, w := range allWorkloads() {
		alone = append(alone, strings.Split(w.controllers, ",")...)
	}
	var names []string
	for _, name := range all.Registry().Names() {
		if !slices.Contains(alone, name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}

// workerFlags are the registered controllers' worker-count flags,
// --concurrent-<resource>-syncs, which upstream names alike.
func workerFlags() []string {
	fs := pflag.NewFlagSet("controllers", pflag.ContinueOnError)
	for _, d := range all.Registry().Descriptors() {
		if d.NewOptions != nil {
			d.NewOptions().AddFlags(fs)
		}
	}
	var flags []string
	fs.VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "concurrent-") && strings.HasSuffix(f.Name, "-syncs") {
			flags = append(flags, f.Name)
		}
	})
	return flags
}

// Settings are the tuning flags, given identically to both controller managers.
type Settings struct {
	// QPS and Burst are --kube-api-qps and --kube-api-burst.
	QPS   float32 `json:"kubeAPIQPS"`
	Burst int32   `json:"kubeAPIBurst"`
	// ConcurrentSyncs is the worker count of each controller, given to every
	// --concurrent-<resource>-syncs flag of the registered controllers (workerFlags).
	ConcurrentSyncs int `json:"concurrentSyncs"`
}

func (s Settings) args() []string {
	args := []string{
		"--kube-api-qps=" + strconv.FormatFloat(float64(s.QPS), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(int(s.Burst)),
	}
	for _, flag := range workerFlags() {
		args = append(args, "--"+flag+"="+strconv.Itoa(s.ConcurrentSyncs))
	}
	return args
}

// controllerManager is one running controller manager with its own user, which is how
// its requests are told apart in the audit log.
type controllerManager struct {
	impl Implementation
	// user is the client-certificate user it authenticates as.
	user    string
	process *controlplane.Process
	// debugURL serves /debug/pprof over HTTPS, with a certificate of the control
	// plane's CA.
	debugURL string
}

// startControllerManager starts impl's binary against cp with the given --controllers,
// settings and no leader election. Its log goes to logDir.
func startControllerManager(cp *controlplane.ControlPlane, impl Implementation, binary, controllers string, settings Settings, logDir string) (*controllerManager, error) {
	user := "bench-" + string(impl)
	kubeconfig, err := cp.AddUser(user, "system:masters")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
	}
	args = append(args, settings.args()...)
	kcm := &controllerManager{impl: impl, user: user}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	switch impl {
	case Upstream:
		// One identity for all controllers, as mini-kcm has, so that the audit log
		// attributes every request to one user.
		args = append(args, "--use-service-account-credentials=false")
	case MiniKCM:
	default:
		return nil, fmt.Errorf("unknown controller manager %q", impl)
	}
	// Both serve alike: HTTPS on loopback, delegated authentication and authorization,
	// and /debug/pprof allowed without credentials so that a phase can be profiled with
	// a plain curl -k, which a loopback-only test cluster can afford.
	serving, err := cp.ServingFlags(string(impl), port, kubeconfig)
	if err != nil {
		return nil, err
	}
	args = append(args, serving...)
	args = append(args, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof,/debug/pprof/*")
	kcm.debugURL = "https://127.0.0.1:" + strconv.Itoa(port) + "/debug/pprof/"
	kcm.process, err = controlplane.StartProcess(controlplane.ProcessSpec{
		Name:    string(impl),
		Path:    binary,
		Args:    args,
		LogPath: filepath.Join(logDir, string(impl)+".log"),
	})
	if err != nil {
		return nil, err
	}
	return kcm, nil
}

// usage reads the controller manager's CPU time and memory.
func (k *controllerManager) usage() (processUsage, error) {
	if err := k.exited(); err != nil {
		return processUsage{}, err
	}
	return readProcessUsage(k.process.Pid())
}

// exited returns an error with the end of the log if the process has exited.
func (k *controllerManager) exited() error {
	if !k.process.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited; end of %s:\n%s", k.impl, k.process.LogPath(), controlplane.Tail(k.process.LogPath(), 30))
}

// stop stops the controller manager: SIGTERM, then SIGKILL after 10 seconds.
func (k *controllerManager) stop() { k.process.Stop(10 * time.Second) }

// warmUpNamespace holds the objects that prove a controller manager is working.
const warmUpNamespace = "bench-warm-up"

// waitUntilWorking returns once every controller of the controller manager (its
// --controllers) has synced its caches and handled an object: a Deployment of zero
// replicas has its ReplicaSet, whose status the ReplicaSet controller has written, and a
// Service has its Endpoints and its EndpointSlice. This works the same for both
// implementations, whose readiness endpoints differ.
func waitUntilWorking(ctx context.Context, client kubernetes.Interface, kcm *controllerManager, controllers string, timeout time.Duration) error {
	runs := func(controller string) bool { return slices.Contains(strings.Split(controllers, ","), controller) }
	labels := map[string]string{"app": "warm-up"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: warmUpNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the warm-up namespace: %w", err)
	}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "warm-up"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, "1"),
		},
	}
	if _, err := client.AppsV1().Deployments(warmUpNamespace).Create(ctx, deployment, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the warm-up Deployment: %w", err)
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "warm-up"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if _, err := client.CoreV1().Services(warmUpNamespace).Create(ctx, service, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the warm-up Service: %w", err)
	}

	working := func() error {
		if runs("endpointslice-controller") {
			list, err := client.DiscoveryV1().EndpointSlices(warmUpNamespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=warm-up"})
			if err != nil {
				return err
			}
			if len(list.Items) == 0 {
				return fmt.Errorf("the EndpointSlice controller has not synced the warm-up Service")
			}
		}
		if runs("deployment-controller") {
			d, err := client.AppsV1().Deployments(warmUpNamespace).Get(ctx, "warm-up", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.ObservedGeneration < d.Generation {
				return fmt.Errorf("the Deployment controller has not synced the warm-up Deployment")
			}
			// The ReplicaSet is the Deployment controller's, so it is checked only with it.
			if runs("replicaset-controller") {
				replicaSets, err := client.AppsV1().ReplicaSets(warmUpNamespace).List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				if len(replicaSets.Items) == 0 || replicaSets.Items[0].Status.ObservedGeneration < 1 {
					return fmt.Errorf("the ReplicaSet controller has not synced the warm-up ReplicaSet")
				}
			}
		}
		if runs("endpoints-controller") {
			if _, err := client.CoreV1().Endpoints(warmUpNamespace).Get(ctx, "warm-up", metav1.GetOptions{}); err != nil {
				return fmt.Errorf("the Endpoints controller has not synced the warm-up Service: %w", err)
			}
		}
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := kcm.exited(); err != nil {
			return err
		}
		err := working()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not working after %v: %w", kcm.impl, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
