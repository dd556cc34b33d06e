package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A Service lists its ready pods under addresses and the others under
// notReadyAddresses, each with its node and a reference to the pod, and a pod moves
// between the two as its readiness changes.
func TestReadinessMovesPodsBetweenAddressesAndNotReadyAddresses(t *testing.T) {
	e := start(t)
	web := map[string]string{"app": "web"}
	e.createService(e.newService("web", web, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	e.runPods(e.newPod("web-0", web), e.newPod("web-1", web), e.newPod("web-2", web))
	// A pod that is not scheduled has no IP, and upstream's ShouldPodBeInEndpoints
	// skips pods without one.
	e.createPods(e.newPod("web-pending", web, unscheduled()))

	e.waitForEndpoints("web",
		"ready web-0 http:8080/TCP",
		"ready web-1 http:8080/TCP",
		"ready web-2 http:8080/TCP",
	)

	t.Log("web-1 stops being ready")
	e.setReady("web-1", false)
	e.waitForEndpoints("web",
		"ready web-0 http:8080/TCP",
		"notReady web-1 http:8080/TCP",
		"ready web-2 http:8080/TCP",
	)

	t.Log("web-1 is ready again and web-0 stops being ready")
	e.setReady("web-1", true)
	e.setReady("web-0", false)
	e.waitForEndpoints("web",
		"notReady web-0 http:8080/TCP",
		"ready web-1 http:8080/TCP",
		"ready web-2 http:8080/TCP",
	)

	t.Log("web-2 is deleted")
	e.deletePod("web-2")
	e.waitForEndpoints("web",
		"notReady web-0 http:8080/TCP",
		"ready web-1 http:8080/TCP",
	)
}

// A named targetPort resolves to each pod's own container port of that name and
// protocol, so one Service port can reach different port numbers on different pods; a
// pod without such a port gets no address for that Service port (upstream FindPort).
// Ports of restartable init containers (sidecars) count, and a numeric targetPort is
// used as is.
func TestNamedTargetPortIsResolvedPerPod(t *testing.T) {
	e := start(t)
	api := map[string]string{"app": "api"}
	e.createService(e.newService("api", api,
		servicePort("http", 80, intstr.FromString("web"), corev1.ProtocolTCP),
		servicePort("dns", 53, intstr.FromString("dns"), corev1.ProtocolUDP),
		servicePort("metrics", 9100, intstr.FromInt32(9100), corev1.ProtocolTCP),
	))
	e.runPods(
		e.newPod("api-8080", api, withPorts(port("web", 8080, corev1.ProtocolTCP))),
		e.newPod("api-8081", api, withPorts(port("web", 8081, corev1.ProtocolTCP), port("dns", 5353, corev1.ProtocolUDP))),
		// The name matches but the protocol does not: FindPort needs both.
		e.newPod("api-udp-only", api, withPorts(port("web", 8080, corev1.ProtocolUDP))),
		e.newPod("api-sidecar", api, withSidecarPorts(port("web", 8082, corev1.ProtocolTCP))),
		e.newPod("api-no-ports", api),
	)

	e.waitForEndpoints("api",
		"ready api-8080 http:8080/TCP",
		"ready api-8080 metrics:9100/TCP",
		"ready api-8081 http:8081/TCP",
		"ready api-8081 dns:5353/UDP",
		"ready api-8081 metrics:9100/TCP",
		"ready api-udp-only metrics:9100/TCP",
		"ready api-sidecar http:8082/TCP",
		"ready api-sidecar metrics:9100/TCP",
		"ready api-no-ports metrics:9100/TCP",
	)

	t.Log("the Service stops exposing metrics, leaving pods with no matching port out entirely")
	svc, err := e.Client.CoreV1().Services(e.Namespace).Get(e.ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = svc.Spec.Ports[:2]
	if _, err := e.Client.CoreV1().Services(e.Namespace).Update(e.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForEndpoints("api",
		"ready api-8080 http:8080/TCP",
		"ready api-8081 http:8081/TCP",
		"ready api-8081 dns:5353/UDP",
		"ready api-sidecar http:8082/TCP",
	)
}

// With publishNotReadyAddresses, every pod goes under addresses whatever its
// readiness, and terminating pods stay listed until they are gone; without it, a
// terminating pod leaves at once (upstream ShouldPodBeInEndpoints with
// includeTerminating = publishNotReadyAddresses, then addEndpointSubset with
// tolerateUnreadyEndpoints). This is what StatefulSet peers rely on to find each other
// before they are ready.
func TestPublishNotReadyAddressesListsEveryPodAsReady(t *testing.T) {
	e := start(t)
	db := map[string]string{"app": "db"}
	e.createService(e.newService("db", db, servicePort("sql", 5432, intstr.FromInt32(5432), corev1.ProtocolTCP)))
	peers := e.newService("db-peers", db, servicePort("gossip", 7000, intstr.FromInt32(7000), corev1.ProtocolTCP))
	peers.Spec.PublishNotReadyAddresses = true
	e.createService(peers)
	e.runPods(e.newPod("db-0", db), e.newPod("db-1", db), e.newPod("db-2", db, withFinalizer()))

	t.Log("db-1 is not ready")
	e.setReady("db-1", false)
	e.waitForEndpoints("db",
		"ready db-0 sql:5432/TCP",
		"notReady db-1 sql:5432/TCP",
		"ready db-2 sql:5432/TCP",
	)
	e.waitForEndpoints("db-peers",
		"ready db-0 gossip:7000/TCP",
		"ready db-1 gossip:7000/TCP",
		"ready db-2 gossip:7000/TCP",
	)

	t.Log("db-2 is deleted but a finalizer keeps it terminating")
	e.deletePod("db-2")
	e.waitForEndpoints("db",
		"ready db-0 sql:5432/TCP",
		"notReady db-1 sql:5432/TCP",
	)
	e.expectEndpointsStay("db-peers",
		"ready db-0 gossip:7000/TCP",
		"ready db-1 gossip:7000/TCP",
		"ready db-2 gossip:7000/TCP",
	)

	t.Log("db-2 is released and goes away")
	e.releasePod("db-2")
	e.waitForEndpoints("db-peers",
		"ready db-0 gossip:7000/TCP",
		"ready db-1 gossip:7000/TCP",
	)
}

// A pod that has finished, Succeeded or Failed, is dropped rather than listed as not
// ready: its containers will never run again (upstream ShouldPodBeInEndpoints checks the
// phase before anything else; kubernetes#95394). The kubelet reports the terminal phase
// and Ready=False in one status write; the readiness change is what makes the
// controller look at the pod, as upstream's podEndpointsChanged ignores the phase.
func TestFinishedPodsAreDropped(t *testing.T) {
	e := start(t)
	batch := map[string]string{"app": "batch"}
	e.createService(e.newService("batch", batch, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	e.runPods(e.newPod("running", batch), e.newPod("not-ready", batch), e.newPod("succeeded", batch), e.newPod("failed", batch))
	e.waitForEndpoints("batch",
		"ready failed http:8080/TCP",
		"ready not-ready http:8080/TCP",
		"ready running http:8080/TCP",
		"ready succeeded http:8080/TCP",
	)

	e.setReady("not-ready", false)
	e.finish("succeeded", corev1.PodSucceeded)
	e.finish("failed", corev1.PodFailed)
	e.waitForEndpoints("batch",
		"notReady not-ready http:8080/TCP",
		"ready running http:8080/TCP",
	)
}
