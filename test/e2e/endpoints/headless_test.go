package endpoints

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// A headless Service's Endpoints carry the service.kubernetes.io/headless label, which
// tells kube-proxy to leave them alone, and give a pod its hostname when the pod's
// subdomain names the Service, so that <hostname>.<service> resolves in DNS. A headless
// Service may have no ports at all; its pods are then listed without ports. Every
// Endpoints carries its Service's labels, kept in step with them, and the managed-by
// label (waitForEndpoints checks labels and hostnames on every call).
func TestHeadlessServiceEndpointsCarryHostnamesAndTheHeadlessLabel(t *testing.T) {
	e := start(t)
	db := map[string]string{"app": "db"}
	sql := servicePort("sql", 5432, intstr.FromInt32(5432), corev1.ProtocolTCP)

	headless := e.newService("db", db, sql)
	headless.Labels = map[string]string{"tier": "storage"}
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	e.createService(headless)
	portless := e.newService("db-dns", db)
	portless.Spec.ClusterIP = corev1.ClusterIPNone
	e.createService(portless)
	// A Service with a cluster IP that selects the same pods: no headless label, and
	// no hostnames, since no pod's subdomain names it.
	e.createService(e.newService("db-lb", db, sql))

	e.runPods(
		e.newPod("db-0", db, withHostname("db-0", "db")),
		e.newPod("db-1", db, withHostname("db-1", "db-dns")),
		e.newPod("db-2", db, withHostname("db-2", "elsewhere")),
		e.newPod("db-3", db),
	)

	ep := e.waitForEndpoints("db",
		"ready db-0 sql:5432/TCP",
		"ready db-1 sql:5432/TCP",
		"ready db-2 sql:5432/TCP",
		"ready db-3 sql:5432/TCP",
	)
	if _, ok := ep.Labels[corev1.IsHeadlessService]; !ok {
		t.Fatalf("headless Service's Endpoints lack the %s label: %v", corev1.IsHeadlessService, ep.Labels)
	}
	expectHostnames(t, ep, map[string]string{"db-0": "db-0"})

	dns := e.waitForEndpoints("db-dns",
		"ready db-0 -",
		"ready db-1 -",
		"ready db-2 -",
		"ready db-3 -",
	)
	expectHostnames(t, dns, map[string]string{"db-1": "db-1"})

	lb := e.waitForEndpoints("db-lb",
		"ready db-0 sql:5432/TCP",
		"ready db-1 sql:5432/TCP",
		"ready db-2 sql:5432/TCP",
		"ready db-3 sql:5432/TCP",
	)
	if _, ok := lb.Labels[corev1.IsHeadlessService]; ok {
		t.Fatalf("the Endpoints of a Service with a cluster IP have the %s label: %v", corev1.IsHeadlessService, lb.Labels)
	}
	expectHostnames(t, lb, map[string]string{})

	t.Log("the headless Service's labels change")
	patch := `{"metadata":{"labels":{"tier":null,"team":"storage"}}}`
	if _, err := e.Client.CoreV1().Services(e.Namespace).Patch(e.ctx, "db", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyEvery(t, convergeTimeout, 200*time.Millisecond, func() error {
		ep, err := e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, "db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return e.checkEndpoints(ep)
	})
}

// expectHostnames checks which addresses of ep carry a hostname, by pod name.
func expectHostnames(t *testing.T, ep *corev1.Endpoints, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, subset := range ep.Subsets {
		for _, a := range append(subset.Addresses, subset.NotReadyAddresses...) {
			if a.Hostname != "" {
				got[podName(a)] = a.Hostname
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("endpoints %s give hostnames %v, want %v", ep.Name, got, want)
	}
}
