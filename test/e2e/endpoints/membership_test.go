package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A pod belongs to the Services whose selectors match its labels now: relabelling it
// moves it from one Service to another, and a pod that stops matching leaves. A Service
// that selects no pod still has Endpoints, with no subsets.
func TestRelabelledPodsMoveBetweenServices(t *testing.T) {
	e := start(t)
	http := servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)
	e.createService(e.newService("shop", map[string]string{"app": "shop"}, http))
	e.createService(e.newService("blue", map[string]string{"app": "shop", "color": "blue"}, http))
	e.createService(e.newService("green", map[string]string{"app": "shop", "color": "green"}, http))
	e.runPods(
		e.newPod("shop-0", map[string]string{"app": "shop", "color": "blue"}),
		e.newPod("shop-1", map[string]string{"app": "shop", "color": "blue"}),
	)
	e.waitForEndpoints("shop", "ready shop-0 http:8080/TCP", "ready shop-1 http:8080/TCP")
	e.waitForEndpoints("blue", "ready shop-0 http:8080/TCP", "ready shop-1 http:8080/TCP")
	e.waitForEndpoints("green")

	t.Log("shop-1 turns green")
	e.patchPod("shop-1", `{"metadata":{"labels":{"color":"green"}}}`)
	e.waitForEndpoints("blue", "ready shop-0 http:8080/TCP")
	e.waitForEndpoints("green", "ready shop-1 http:8080/TCP")
	e.waitForEndpoints("shop", "ready shop-0 http:8080/TCP", "ready shop-1 http:8080/TCP")

	t.Log("shop-0 loses its labels")
	e.patchPod("shop-0", `{"metadata":{"labels":{"app":null,"color":null}}}`)
	e.waitForEndpoints("blue")
	e.waitForEndpoints("shop", "ready shop-1 http:8080/TCP")
	e.waitForEndpoints("green", "ready shop-1 http:8080/TCP")

	t.Log("the blue Service's selector changes to select green pods")
	patch := `{"spec":{"selector":{"color":"green"}}}`
	if _, err := e.Client.CoreV1().Services(e.Namespace).Patch(e.ctx, "blue", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForEndpoints("blue", "ready shop-1 http:8080/TCP")
}

// The Endpoints of a Service live and die with it: deleted by hand they come back,
// edited by hand they are put right at the Service's next sync, and deleted with the
// Service they stay deleted.
func TestEndpointsFollowTheirService(t *testing.T) {
	e := start(t)
	web := map[string]string{"app": "web"}
	e.createService(e.newService("web", web, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	e.runPods(e.newPod("web-0", web), e.newPod("web-1", web))
	first := e.waitForEndpoints("web", "ready web-0 http:8080/TCP", "ready web-1 http:8080/TCP")

	t.Log("someone deletes the Endpoints")
	if err := e.Client.CoreV1().Endpoints(e.Namespace).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := e.waitForEndpoints("web", "ready web-0 http:8080/TCP", "ready web-1 http:8080/TCP")
	if again.UID == first.UID {
		t.Fatalf("the Endpoints still have uid %s; want a new object", first.UID)
	}

	// Upstream watches Endpoints only for deletions, so a hand edit stands until the
	// next event for the Service or its pods, which then overwrites it.
	t.Log("someone empties the Endpoints, then the Service is edited")
	again.Subsets = nil
	if _, err := e.Client.CoreV1().Endpoints(e.Namespace).Update(e.ctx, again, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.annotateService("web", "edited")
	e.waitForEndpoints("web", "ready web-0 http:8080/TCP", "ready web-1 http:8080/TCP")

	t.Log("the Service is deleted")
	if err := e.Client.CoreV1().Services(e.Namespace).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForNoEndpoints("web")
	// Pod events must not bring them back for a Service that is gone.
	e.setReady("web-0", false)
	settle()
	e.expectNoEndpoints("web")
}

// A Service deleted while no controller ran leaves its Endpoints behind; the controller
// deletes them when it starts, as upstream's checkLeftoverEndpoints does by queueing
// every Endpoints once. Endpoints that hold a leader-election record
// (control-plane.alpha.kubernetes.io/leader) have no Service by design and are kept.
func TestEndpointsLeftByAServiceDeletedWhileStoppedAreDeletedOnStart(t *testing.T) {
	e := newEnv(t)
	web := map[string]string{"app": "web"}
	e.createService(e.newService("web", web, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	e.runPods(e.newPod("web-0", web))
	for _, ep := range []*corev1.Endpoints{
		{ObjectMeta: metav1.ObjectMeta{Name: "deleted-service", Labels: map[string]string{managedByLabel: managedByValue}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lock", Annotations: map[string]string{
			"control-plane.alpha.kubernetes.io/leader": `{"holderIdentity":"someone","leaseDurationSeconds":15}`,
		}}},
	} {
		if _, err := e.Client.CoreV1().Endpoints(e.Namespace).Create(e.ctx, ep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	e.startReplica()
	e.waitForNoEndpoints("deleted-service")
	e.waitForEndpoints("web", "ready web-0 http:8080/TCP")
	settle()
	if _, err := e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, "lock", metav1.GetOptions{}); err != nil {
		t.Fatalf("the leader-election Endpoints: %v", err)
	}
}

// A Service without a selector gets its Endpoints from someone else, and an
// ExternalName Service gets none at all (kubernetes#105986): the controller writes
// neither, whatever happens to pods that match. Once the ExternalName Service becomes a
// ClusterIP Service, it gets Endpoints like any other. Deleting the selector-less
// Service deletes its hand-made Endpoints too: upstream deletes the Endpoints named
// after any deleted Service, whoever made them.
func TestServicesWithoutSelectorOrWithExternalNameAreLeftAlone(t *testing.T) {
	e := start(t)
	mark := e.auditMark()
	app := map[string]string{"app": "legacy"}
	http := servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)

	e.createService(e.newService("manual", nil, http))
	handMade := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "manual", Labels: map[string]string{"owner": "team-a"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	}
	handMade, err := e.Client.CoreV1().Endpoints(e.Namespace).Create(e.ctx, handMade, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	external := e.newService("external", app, http)
	external.Spec.Type = corev1.ServiceTypeExternalName
	external.Spec.ExternalName = "legacy.example.com"
	e.createService(external)
	// A Service that selects the same pods shows when the controller has seen them.
	e.createService(e.newService("witness", app, http))

	e.runPods(e.newPod("legacy-0", app), e.newPod("legacy-1", app))
	e.annotateService("manual", "edited")
	e.annotateService("external", "edited")
	e.setReady("legacy-1", false)
	e.expectEndpointsStay("witness", "ready legacy-0 http:8080/TCP", "notReady legacy-1 http:8080/TCP")

	e.expectNoEndpoints("external")
	manual, err := e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, "manual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if manual.ResourceVersion != handMade.ResourceVersion {
		t.Fatalf("the hand-made Endpoints changed: resourceVersion %s, was %s; now labels=%v subsets=%s",
			manual.ResourceVersion, handMade.ResourceVersion, manual.Labels, toJSON(manual.Subsets))
	}
	for _, w := range e.endpointsWritesSince(mark) {
		if w.name != "witness" {
			t.Errorf("the controller wrote Endpoints it must leave alone: %s", w)
		}
	}

	t.Log("the ExternalName Service becomes a ClusterIP Service")
	patch := `{"spec":{"type":"ClusterIP","externalName":null}}`
	if _, err := e.Client.CoreV1().Services(e.Namespace).Patch(e.ctx, "external", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForEndpoints("external", "ready legacy-0 http:8080/TCP", "notReady legacy-1 http:8080/TCP")

	t.Log("the selector-less Service is deleted")
	if err := e.Client.CoreV1().Services(e.Namespace).Delete(e.ctx, "manual", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForNoEndpoints("manual")
}

// annotateService sets an annotation on a Service: an update that changes nothing the
// Endpoints are built from.
func (e *env) annotateService(name, value string) {
	e.t.Helper()
	patch := `{"metadata":{"annotations":{"e2e.mini-kcm.io/note":"` + value + `"}}}`
	if _, err := e.Client.CoreV1().Services(e.Namespace).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("annotating service %s: %v", name, err)
	}
}
