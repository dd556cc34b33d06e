package endpointslice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// workload is a set of Services and pods that exercises every rule that shapes a slice,
// with the endpoints each Service's slices must list.
type workload map[string][]string

// createVariedWorkload creates the workload and waits until the running controller
// publishes it.
func (e *env) createVariedWorkload() workload {
	e.t.Helper()
	api, db := map[string]string{"app": "api"}, map[string]string{"app": "db"}
	mixed := e.newService("api", api,
		servicePort("http", 80, intstr.FromString("web")),
		corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolUDP},
		servicePort("metrics", 9100, intstr.FromInt32(9100)))
	mixed.Spec.Ports[0].AppProtocol = ptr.To("http")
	e.createService(mixed)
	near := e.newService("api-near", api, servicePort("http", 80, intstr.FromString("web")))
	near.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	e.createService(near)
	headless := e.newService("db", db, servicePort("sql", 5432, intstr.FromInt32(5432)))
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	e.createService(headless)
	peers := e.newService("db-peers", db, servicePort("gossip", 7000, intstr.FromInt32(7000)))
	peers.Spec.PublishNotReadyAddresses = true
	e.createService(peers)
	e.createService(e.newService("nothing", map[string]string{"app": "nothing"}, servicePort("http", 80, intstr.FromInt32(8080))))

	e.runPods(
		e.newPod("api-0", api, withPorts(tcpPort("web", 8080), corev1.ContainerPort{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP})),
		e.newPod("api-1", api, withPorts(tcpPort("web", 8080))),
		e.newPod("api-2", api, withSidecarPorts(tcpPort("web", 8082))),
		e.newPod("db-0", db, withHostname("db-0", "db")),
		e.newPod("db-1", db, withHostname("db-1", "db")),
	)
	e.setReady("api-1", false)
	e.setReady("db-1", false)

	const up, down = "ready=true serving=true terminating=false", "ready=false serving=false terminating=false"
	w := workload{
		"api": {
			"api-0 " + up + " http:8080/TCP", "api-0 " + up + " dns:5353/UDP", "api-0 " + up + " metrics:9100/TCP",
			"api-1 " + down + " http:8080/TCP", "api-1 " + down + " metrics:9100/TCP",
			"api-2 " + up + " http:8082/TCP", "api-2 " + up + " metrics:9100/TCP",
		},
		"api-near": {"api-0 " + up + " http:8080/TCP", "api-1 " + down + " http:8080/TCP", "api-2 " + up + " http:8082/TCP"},
		"db":       {"db-0 " + up + " sql:5432/TCP", "db-1 " + down + " sql:5432/TCP"},
		"db-peers": {"db-0 " + up + " gossip:7000/TCP", "db-1 ready=true serving=false terminating=false gossip:7000/TCP"},
		"nothing":  nil,
	}
	for service, lines := range w {
		e.waitForEndpoints(service, lines...)
	}
	// trafficDistribution: PreferClose gives every ready endpoint a hint for its own
	// zone; a not-ready one gets none.
	for _, s := range e.slicesOf("api-near") {
		for _, ep := range s.Endpoints {
			zone := ptr.Deref(ep.Zone, "")
			if !ptr.Deref(ep.Conditions.Ready, false) {
				if ep.Hints != nil {
					e.t.Errorf("not-ready endpoint %s of api-near: hints %s, want none", ep.TargetRef.Name, toJSON(ep.Hints))
				}
				continue
			}
			if ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != zone || zone == "" {
				e.t.Errorf("endpoint %s of api-near: hints %s, want one for its zone %q", ep.TargetRef.Name, toJSON(ep.Hints), zone)
			}
		}
	}
	return w
}

// waitUntilSynced proves that the running controller has synced every Service of the
// workload: a canary Service, created with the workload, gets a pod only now, and
// the controller's queue is first in, first out, so once the canary's slice lists the
// pod every Service that was queued at the controller's start has been taken up.
// settle then lets the last of those syncs finish.
func (e *env) waitUntilSynced(canary map[string]string) {
	e.t.Helper()
	e.runPods(e.newPod("canary-0", canary))
	e.waitForEndpoints("canary", "canary-0 ready=true serving=true terminating=false http:8080/TCP")
	settle()
}

// mini-kcm takes over the slices kube-controller-manager wrote without writing one:
// both compute them with the same library, label them with the same managed-by value
// and order them the same way, so a takeover (or a downgrade) costs no write per
// Service. Against upstream this is a restart of kube-controller-manager, which must
// write nothing either.
func TestMiniKCMTakesOverKubeControllerManagersSlicesWithoutWritingOne(t *testing.T) {
	e := newEnv(t)
	canary := map[string]string{"app": "canary"}
	e.createService(e.newService("canary", canary, servicePort("http", 80, intstr.FromInt32(8080))))
	e.startKubeControllerManager("endpointslice")
	e.createVariedWorkload()
	previous := e.controllerUser
	e.stopController()

	mark := e.auditMark()
	e.startController()
	if e.controllerUser == previous {
		t.Fatalf("the controller under test runs as %s, the user of the one it replaces", previous)
	}
	e.waitUntilSynced(canary)

	if writes := e.sliceWritesSince(mark, e.controllerUser, "canary"); len(writes) > 0 {
		t.Errorf("%s rewrote slices %s wrote for the same objects: %v", e.controllerUser, previous, writes)
	}
	if writes := e.sliceWritesSince(mark, e.controllerUser); len(writes) == 0 {
		t.Errorf("%s wrote no slice for the canary: the check above proves nothing", e.controllerUser)
	}
}

// And back: kube-controller-manager takes over mini-kcm's slices without writing one.
func TestKubeControllerManagerTakesOverMiniKCMsSlicesWithoutWritingOne(t *testing.T) {
	e := newEnv(t)
	canary := map[string]string{"app": "canary"}
	e.createService(e.newService("canary", canary, servicePort("http", 80, intstr.FromInt32(8080))))
	e.startController()
	e.createVariedWorkload()
	previous := e.controllerUser
	e.stopController()

	mark := e.auditMark()
	e.startKubeControllerManager("endpointslice")
	e.waitUntilSynced(canary)

	writes := e.sliceWritesSince(mark, e.controllerUser, "canary")
	if len(writes) > 0 {
		t.Errorf("%s rewrote slices %s wrote for the same objects: %v", e.controllerUser, previous, writes)
	}
	if writes := e.sliceWritesSince(mark, e.controllerUser); len(writes) == 0 {
		t.Errorf("%s wrote no slice for the canary: the check above proves nothing", e.controllerUser)
	}
}
