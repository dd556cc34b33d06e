package endpoints

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The Endpoints mini-kcm writes are the ones kube-controller-manager v1.37 writes for
// the same Services and pods, down to the order of subsets, addresses and ports, which
// upstream fixes by hashing (RepackSubsets). This matters beyond looks: a controller
// that ordered them differently would rewrite every Endpoints in a cluster when it took
// over from kube-controller-manager, and back again on a downgrade. The test builds a
// varied workload, lets mini-kcm write its Endpoints, has the real
// kube-controller-manager write them afresh and compares the two, then starts mini-kcm
// again on kube-controller-manager's objects and checks in the audit log that it
// rewrites none of them.
func TestEndpointsAreTheOnesKubeControllerManagerWrites(t *testing.T) {
	e := start(t)
	services := e.createVariedWorkload()
	ours := e.endpointsByName()

	t.Log("kube-controller-manager writes the Endpoints afresh")
	e.replica.Kill()
	if err := e.Client.CoreV1().Endpoints(e.Namespace).DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	kcm := e.startKubeControllerManager()
	var theirs map[string]*corev1.Endpoints
	framework.EventuallyEvery(t, startTimeout, 500*time.Millisecond, func() error {
		theirs = e.endpointsByName()
		for name, ep := range ours {
			if theirs[name] == nil {
				return fmt.Errorf("kube-controller-manager has not written Endpoints %s yet", name)
			}
			if got, want := describe(theirs[name]), describe(ep); !equalLines(got, want) {
				return fmt.Errorf("kube-controller-manager's Endpoints %s list\n  %s\nmini-kcm's list\n  %s",
					name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
		return nil
	})
	for name, ep := range ours {
		if err := sameEndpoints(ep, theirs[name]); err != nil {
			t.Errorf("Endpoints %s: %v", name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Log("mini-kcm takes over from kube-controller-manager")
	kcm.Kill()
	mark := e.auditMark()
	e.startReplica()
	framework.EventuallyEvery(t, startTimeout, 500*time.Millisecond, func() error {
		// Every Service of the namespace synced, and the default/kubernetes one.
		m, err := e.replica.Metrics()
		if err != nil {
			return err
		}
		synced, _ := m.Value("mini_kcm_controller_sync_total", map[string]string{"controller": "endpoints-controller", "result": "success"})
		if int(synced) < len(services)+1 {
			return fmt.Errorf("%s synced %v Services, want at least %d", e.replica.Name, synced, len(services)+1)
		}
		return nil
	})
	settle()
	if writes := e.endpointsWritesSince(mark); len(writes) > 0 {
		t.Fatalf("mini-kcm rewrote Endpoints that kube-controller-manager wrote for the same objects: %v", writes)
	}
}

// createVariedWorkload creates Services and pods that exercise every rule that shapes an
// Endpoints object, waits until mini-kcm's Endpoints reflect them, and returns the
// Services' names.
func (e *env) createVariedWorkload() []string {
	e.t.Helper()
	api := map[string]string{"app": "api"}
	mixed := e.newService("api", api,
		servicePort("http", 80, intstr.FromString("web"), corev1.ProtocolTCP),
		servicePort("dns", 53, intstr.FromString("dns"), corev1.ProtocolUDP),
		servicePort("metrics", 9100, intstr.FromInt32(9100), corev1.ProtocolTCP),
	)
	mixed.Labels = map[string]string{"team": "api"}
	mixed.Spec.Ports[0].AppProtocol = ptr.To("http")
	e.createService(mixed)

	db := map[string]string{"app": "db"}
	sql := servicePort("sql", 5432, intstr.FromInt32(5432), corev1.ProtocolTCP)
	headless := e.newService("db", db, sql)
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	e.createService(headless)
	portless := e.newService("db-dns", db)
	portless.Spec.ClusterIP = corev1.ClusterIPNone
	e.createService(portless)
	peers := e.newService("db-peers", db, servicePort("gossip", 7000, intstr.FromInt32(7000), corev1.ProtocolTCP), sql)
	peers.Spec.PublishNotReadyAddresses = true
	e.createService(peers)
	e.createService(e.newService("nothing", map[string]string{"app": "nothing"}, sql))

	e.runPods(
		e.newPod("api-0", api, withPorts(port("web", 8080, corev1.ProtocolTCP), port("dns", 5353, corev1.ProtocolUDP))),
		e.newPod("api-1", api, withPorts(port("web", 8080, corev1.ProtocolTCP))),
		e.newPod("api-2", api, withPorts(port("web", 8081, corev1.ProtocolTCP), port("dns", 5353, corev1.ProtocolUDP))),
		e.newPod("api-3", api, withSidecarPorts(port("web", 8082, corev1.ProtocolTCP))),
		e.newPod("api-4", api),
		e.newPod("db-0", db, withHostname("db-0", "db")),
		e.newPod("db-1", db, withHostname("db-1", "db-dns")),
		e.newPod("db-2", db, withHostname("db-2", "db"), withFinalizer()),
		e.newPod("db-3", db),
	)
	e.setReady("api-2", false)
	e.setReady("api-4", false)
	e.setReady("db-3", false)
	e.deletePod("db-2")

	e.waitForEndpoints("api",
		"ready api-0 http:8080/TCP appProtocol=http",
		"ready api-0 dns:5353/UDP",
		"ready api-0 metrics:9100/TCP",
		"ready api-1 http:8080/TCP appProtocol=http",
		"ready api-1 metrics:9100/TCP",
		"notReady api-2 http:8081/TCP appProtocol=http",
		"notReady api-2 dns:5353/UDP",
		"notReady api-2 metrics:9100/TCP",
		"ready api-3 http:8082/TCP appProtocol=http",
		"ready api-3 metrics:9100/TCP",
		"notReady api-4 metrics:9100/TCP",
	)
	e.waitForEndpoints("db", "ready db-0 sql:5432/TCP", "ready db-1 sql:5432/TCP", "notReady db-3 sql:5432/TCP")
	e.waitForEndpoints("db-dns", "ready db-0 -", "ready db-1 -", "notReady db-3 -")
	e.waitForEndpoints("db-peers",
		"ready db-0 gossip:7000/TCP", "ready db-0 sql:5432/TCP",
		"ready db-1 gossip:7000/TCP", "ready db-1 sql:5432/TCP",
		"ready db-2 gossip:7000/TCP", "ready db-2 sql:5432/TCP",
		"ready db-3 gossip:7000/TCP", "ready db-3 sql:5432/TCP",
	)
	e.waitForEndpoints("nothing")
	return []string{"api", "db", "db-dns", "db-peers", "nothing"}
}

// endpointsByName returns the namespace's Endpoints.
func (e *env) endpointsByName() map[string]*corev1.Endpoints {
	e.t.Helper()
	list, err := e.Client.CoreV1().Endpoints(e.Namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	byName := map[string]*corev1.Endpoints{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	return byName
}

// sameEndpoints compares what two controllers wrote: the subsets exactly, in order, and
// the labels and annotations, but for the trigger time. That one records the history
// each controller saw, not the objects: kube-controller-manager's first sync publishes
// the Service's creation, while mini-kcm's last write here (a pod deletion) published
// no time and so removed it.
func sameEndpoints(ours, theirs *corev1.Endpoints) error {
	if !apiequality.Semantic.DeepEqual(ours.Subsets, theirs.Subsets) {
		return fmt.Errorf("subsets differ:\nmini-kcm:                %s\nkube-controller-manager: %s", toJSON(ours.Subsets), toJSON(theirs.Subsets))
	}
	if !maps.Equal(ours.Labels, theirs.Labels) {
		return fmt.Errorf("labels differ: mini-kcm %v, kube-controller-manager %v", ours.Labels, theirs.Labels)
	}
	withoutTriggerTime := func(annotations map[string]string) map[string]string {
		result := maps.Clone(annotations)
		delete(result, corev1.EndpointsLastChangeTriggerTime)
		return result
	}
	if a, b := withoutTriggerTime(ours.Annotations), withoutTriggerTime(theirs.Annotations); !maps.Equal(a, b) {
		return fmt.Errorf("annotations differ: mini-kcm %v, kube-controller-manager %v", ours.Annotations, theirs.Annotations)
	}
	return nil
}

func equalLines(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// startKubeControllerManager runs the real kube-controller-manager with only its
// endpoints controller, as its own user, and kills it when the test ends.
func (e *env) startKubeControllerManager() *controlplane.Process {
	e.t.Helper()
	return framework.StartKubeControllerManager(e.t, e.ControlPlane, "kube-controller-manager-"+e.Namespace, "endpoint")
}
