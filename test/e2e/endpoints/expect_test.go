package endpoints

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// managedByLabel and managedByValue mark the Endpoints the controller writes; the value
// is upstream's controller name, so tools that look for it keep working.
const (
	managedByLabel = "endpoints.kubernetes.io/managed-by"
	managedByValue = "endpoint-controller"
)

// newService returns a ClusterIP Service in the test's namespace.
func (e *env) newService(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
	}
}

// servicePort is a Service port named name on port that targets target.
func servicePort(name string, port int32, target intstr.IntOrString, protocol corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: protocol}
}

func (e *env) createService(svc *corev1.Service) *corev1.Service {
	e.t.Helper()
	created, err := e.Client.CoreV1().Services(e.Namespace).Create(e.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating service %s: %v", svc.Name, err)
	}
	return created
}

// describe lists an Endpoints' (address, port) pairs one per line, sorted, as
// "<ready|notReady> <pod> <port>", where port is "name:number/PROTOCOL" or "-" for a
// subset without ports. It is the form tests state their expectations in; the fields of
// each address are checked separately by checkAddresses.
func describe(ep *corev1.Endpoints) []string {
	var lines []string
	for _, subset := range ep.Subsets {
		ports := make([]string, 0, len(subset.Ports))
		for _, p := range subset.Ports {
			s := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
			if p.Name != "" {
				s = p.Name + ":" + s
			}
			if p.AppProtocol != nil {
				s += " appProtocol=" + *p.AppProtocol
			}
			ports = append(ports, s)
		}
		if len(ports) == 0 {
			ports = []string{"-"}
		}
		for state, addresses := range map[string][]corev1.EndpointAddress{"ready": subset.Addresses, "notReady": subset.NotReadyAddresses} {
			for _, a := range addresses {
				for _, p := range ports {
					lines = append(lines, fmt.Sprintf("%s %s %s", state, podName(a), p))
				}
			}
		}
	}
	slices.Sort(lines)
	return lines
}

// podName names the pod an address points to, or its IP if it points to none.
func podName(a corev1.EndpointAddress) string {
	if a.TargetRef == nil {
		return a.IP
	}
	return a.TargetRef.Name
}

// waitForEndpoints waits until the Service's Endpoints list exactly want (in describe's
// form, any order) and every address is correct for its pod (checkAddresses), and
// returns the Endpoints.
func (e *env) waitForEndpoints(service string, want ...string) *corev1.Endpoints {
	e.t.Helper()
	slices.Sort(want)
	var ep *corev1.Endpoints
	framework.EventuallyEvery(e.t, convergeTimeout, 200*time.Millisecond, func() error {
		var err error
		ep, err = e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, service, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("endpoints %s: %w", service, err)
		}
		if got := describe(ep); !slices.Equal(got, want) {
			return fmt.Errorf("endpoints %s list\n  %s\nwant\n  %s\nsubsets: %s", service,
				strings.Join(got, "\n  "), strings.Join(want, "\n  "), toJSON(ep.Subsets))
		}
		return e.checkEndpoints(ep)
	})
	return ep
}

// expectEndpointsStay checks that the Service's Endpoints list want, now and after the
// controller had time to act on anything pending, for changes that must leave them as
// they are.
func (e *env) expectEndpointsStay(service string, want ...string) *corev1.Endpoints {
	e.t.Helper()
	e.waitForEndpoints(service, want...)
	settle()
	ep, err := e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, service, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("endpoints %s: %v", service, err)
	}
	slices.Sort(want)
	if got := describe(ep); !slices.Equal(got, want) {
		e.t.Fatalf("endpoints %s changed to list\n  %s\nwant them to stay\n  %s", service, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	return ep
}

// checkEndpoints checks what must hold for every Endpoints the controller writes: its
// labels and every address's fields.
func (e *env) checkEndpoints(ep *corev1.Endpoints) error {
	svc, err := e.Client.CoreV1().Services(e.Namespace).Get(e.ctx, ep.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("service of endpoints %s: %w", ep.Name, err)
	}
	if err := checkLabels(ep, svc); err != nil {
		return err
	}
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	return checkAddresses(ep, svc, byName)
}

// checkLabels checks that an Endpoints carries exactly its Service's labels, the
// managed-by label, and the headless label if and only if the Service is headless
// (upstream syncService: labels = service labels, plus v1.IsHeadlessService when
// !IsServiceIPSet, plus LabelManagedBy).
func checkLabels(ep *corev1.Endpoints, svc *corev1.Service) error {
	want := maps.Clone(svc.Labels)
	if want == nil {
		want = map[string]string{}
	}
	want[managedByLabel] = managedByValue
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		want[corev1.IsHeadlessService] = ""
	}
	if !maps.Equal(ep.Labels, want) {
		return fmt.Errorf("endpoints %s has labels %v, want %v", ep.Name, ep.Labels, want)
	}
	return nil
}

// checkAddresses checks each address against its pod: the pod's IP, its node (always
// set, to a pointer), a reference to the pod by kind, namespace, name and UID without
// resourceVersion (so that pod updates which change nothing here do not rewrite the
// Endpoints), and a hostname only where upstream's ShouldSetHostname allows it: the pod
// has one and its subdomain names this Service.
func checkAddresses(ep *corev1.Endpoints, svc *corev1.Service, pods map[string]*corev1.Pod) error {
	var errs []error
	for _, subset := range ep.Subsets {
		for _, a := range slices.Concat(subset.Addresses, subset.NotReadyAddresses) {
			ref := a.TargetRef
			if ref == nil {
				errs = append(errs, fmt.Errorf("address %s has no targetRef", a.IP))
				continue
			}
			pod := pods[ref.Name]
			if pod == nil {
				errs = append(errs, fmt.Errorf("address %s points to pod %s, which does not exist", a.IP, ref.Name))
				continue
			}
			wantRef := corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
			if *ref != wantRef {
				errs = append(errs, fmt.Errorf("address %s has targetRef %+v, want %+v", a.IP, *ref, wantRef))
			}
			if a.IP != pod.Status.PodIP {
				errs = append(errs, fmt.Errorf("address of pod %s has IP %s, want its pod IP %s", pod.Name, a.IP, pod.Status.PodIP))
			}
			if a.NodeName == nil || *a.NodeName != pod.Spec.NodeName {
				errs = append(errs, fmt.Errorf("address of pod %s has nodeName %v, want %q", pod.Name, toJSON(a.NodeName), pod.Spec.NodeName))
			}
			wantHostname := ""
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
				wantHostname = pod.Spec.Hostname
			}
			if a.Hostname != wantHostname {
				errs = append(errs, fmt.Errorf("address of pod %s has hostname %q, want %q", pod.Name, a.Hostname, wantHostname))
			}
		}
	}
	return errors.Join(errs...)
}

// expectNoEndpoints checks that the Service has no Endpoints.
func (e *env) expectNoEndpoints(service string) {
	e.t.Helper()
	ep, err := e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, service, metav1.GetOptions{})
	if err == nil {
		e.t.Fatalf("service %s has Endpoints, want none: labels=%v subsets=%s", service, ep.Labels, toJSON(ep.Subsets))
	}
	if !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
}

// waitForNoEndpoints waits until the Service's Endpoints are gone.
func (e *env) waitForNoEndpoints(service string) {
	e.t.Helper()
	framework.EventuallyEvery(e.t, convergeTimeout, 200*time.Millisecond, func() error {
		ep, err := e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, service, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("endpoints %s still exist (uid %s, subsets %s)", service, ep.UID, toJSON(ep.Subsets))
	})
}
