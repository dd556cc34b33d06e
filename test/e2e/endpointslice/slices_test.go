package endpointslice

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// A Service's ready pods are published in slices labelled and owned as upstream does,
// one slice per set of ports (a sidecar's named port differs from the main
// container's), with each pod's address, node, zone and, for a pod whose subdomain is
// the Service, its hostname.
func TestReadyPodsArePublishedWithUpstreamLabelsOwnerPortsAddressesAndTopology(t *testing.T) {
	e := start(t)
	app := map[string]string{"app": "web"}
	svc := e.newService("web", app, servicePort("http", 80, intstr.FromString("web")), servicePort("metrics", 9100, intstr.FromInt32(9100)))
	svc = e.createService(svc)
	e.runPods(
		e.newPod("web-0", app, withPorts(tcpPort("web", 8080))),
		e.newPod("web-1", app, withSidecarPorts(tcpPort("web", 8081))),
		e.newPod("web-2", app, withPorts(tcpPort("web", 8080)), withHostname("web-2", "web")),
	)

	got := e.waitForEndpoints("web",
		"web-0 ready=true serving=true terminating=false http:8080/TCP",
		"web-0 ready=true serving=true terminating=false metrics:9100/TCP",
		"web-1 ready=true serving=true terminating=false http:8081/TCP",
		"web-1 ready=true serving=true terminating=false metrics:9100/TCP",
		"web-2 ready=true serving=true terminating=false http:8080/TCP",
		"web-2 ready=true serving=true terminating=false metrics:9100/TCP",
	)

	if len(got) != 2 {
		t.Errorf("%d slices, want 2: one per port mapping", len(got))
	}
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podByName := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		podByName[p.Name] = p
	}
	for _, s := range got {
		if s.GenerateName != "web-" || s.AddressType != discoveryv1.AddressTypeIPv4 {
			t.Errorf("slice %s: generateName %q, address type %s", s.Name, s.GenerateName, s.AddressType)
		}
		if s.Labels[discoveryv1.LabelServiceName] != "web" || s.Labels[discoveryv1.LabelManagedBy] != managedBy {
			t.Errorf("slice %s: labels %v", s.Name, s.Labels)
		}
		owner := metav1.GetControllerOf(&s)
		if owner == nil || owner.APIVersion != "v1" || owner.Kind != "Service" || owner.Name != "web" || owner.UID != svc.UID ||
			!ptr.Deref(owner.BlockOwnerDeletion, false) {
			t.Errorf("slice %s: controller owner %+v, want Service web %s blocking deletion", s.Name, owner, svc.UID)
		}
		if _, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
			t.Errorf("slice %s: no %s annotation: %v", s.Name, corev1.EndpointsLastChangeTriggerTime, s.Annotations)
		}
		for _, ep := range s.Endpoints {
			pod := podByName[ep.TargetRef.Name]
			if ep.TargetRef.Kind != "Pod" || ep.TargetRef.UID != pod.UID {
				t.Errorf("endpoint %s: targetRef %+v", pod.Name, ep.TargetRef)
			}
			if !slices.Equal(ep.Addresses, []string{pod.Status.PodIP}) {
				t.Errorf("endpoint %s: addresses %v, want [%s]", pod.Name, ep.Addresses, pod.Status.PodIP)
			}
			if ptr.Deref(ep.NodeName, "") != pod.Spec.NodeName {
				t.Errorf("endpoint %s: nodeName %v, want %s", pod.Name, ep.NodeName, pod.Spec.NodeName)
			}
			if want := zoneOf(slices.Index(e.nodes, pod.Spec.NodeName)); ptr.Deref(ep.Zone, "") != want {
				t.Errorf("endpoint %s: zone %v, want %s", pod.Name, ep.Zone, want)
			}
			wantHostname := ""
			if pod.Name == "web-2" {
				wantHostname = "web-2"
			}
			if ptr.Deref(ep.Hostname, "") != wantHostname {
				t.Errorf("endpoint %s: hostname %v, want %q", pod.Name, ep.Hostname, wantHostname)
			}
		}
	}

	if e.replica != nil {
		// The library's metrics, under upstream's names.
		m, err := e.replica.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := m.Value("endpoint_slice_controller_syncs", map[string]string{"result": "success"}); v < 1 {
			t.Errorf("endpoint_slice_controller_syncs{result=success} = %v, want at least 1", v)
		}
		if names := m.Names("endpoint_slice_controller_"); !slices.Contains(names, "endpoint_slice_controller_endpoints_desired") {
			t.Errorf("metrics %v lack endpoint_slice_controller_endpoints_desired", names)
		}
	}
}

// A readiness probe that fails takes the endpoint out of service (ready and serving
// false) and one that passes again puts it back; a terminating pod stays listed, not
// ready, terminating.
func TestReadinessFlipsAndTerminationChangeTheEndpointConditions(t *testing.T) {
	e := start(t)
	app := map[string]string{"app": "flip"}
	e.createService(e.newService("flip", app, servicePort("http", 80, intstr.FromInt32(8080))))
	e.runPods(e.newPod("flip-0", app), e.newPod("flip-1", app, withFinalizer()))
	e.waitForEndpoints("flip",
		"flip-0 ready=true serving=true terminating=false http:8080/TCP",
		"flip-1 ready=true serving=true terminating=false http:8080/TCP")

	e.setReady("flip-0", false)
	e.waitForEndpoints("flip",
		"flip-0 ready=false serving=false terminating=false http:8080/TCP",
		"flip-1 ready=true serving=true terminating=false http:8080/TCP")

	e.setReady("flip-0", true)
	e.waitForEndpoints("flip",
		"flip-0 ready=true serving=true terminating=false http:8080/TCP",
		"flip-1 ready=true serving=true terminating=false http:8080/TCP")

	// Still Ready, so serving: a terminating pod may finish its connections.
	e.deletePod("flip-1")
	e.waitForEndpoints("flip",
		"flip-0 ready=true serving=true terminating=false http:8080/TCP",
		"flip-1 ready=false serving=true terminating=true http:8080/TCP")
}

// A Service that selects no pod gets one empty placeholder slice, so that consumers can
// tell "no endpoints" from "not processed yet"; its first pod fills it.
func TestAServiceWithoutEndpointsGetsOnePlaceholderSlice(t *testing.T) {
	e := start(t)
	app := map[string]string{"app": "lonely"}
	e.createService(e.newService("lonely", app, servicePort("http", 80, intstr.FromInt32(8080))))

	got := e.waitForEndpoints("lonely")
	if len(got) != 1 || len(got[0].Endpoints) != 0 || len(got[0].Ports) != 0 {
		t.Fatalf("slices %s, want one placeholder without endpoints or ports", toJSON(got))
	}

	e.runPods(e.newPod("lonely-0", app))
	got = e.waitForEndpoints("lonely", "lonely-0 ready=true serving=true terminating=false http:8080/TCP")
	if len(got) != 1 {
		t.Errorf("%d slices once a pod exists, want 1", len(got))
	}
}

// publishNotReadyAddresses publishes every endpoint as ready, while serving still tells
// the truth.
func TestPublishNotReadyAddressesMarksEveryEndpointReady(t *testing.T) {
	e := start(t)
	app := map[string]string{"app": "peers"}
	svc := e.newService("peers", app, servicePort("gossip", 7000, intstr.FromInt32(7000)))
	svc.Spec.PublishNotReadyAddresses = true
	e.createService(svc)
	e.runPods(e.newPod("peers-0", app), e.newPod("peers-1", app))
	e.setReady("peers-1", false)

	e.waitForEndpoints("peers",
		"peers-0 ready=true serving=true terminating=false gossip:7000/TCP",
		"peers-1 ready=true serving=false terminating=false gossip:7000/TCP")
}

// --max-endpoints-per-slice bounds every slice; the endpoints of a Service spread over
// as few slices as that allows.
func TestMaxEndpointsPerSliceSplitsTheEndpoints(t *testing.T) {
	e := start(t, "--max-endpoints-per-slice=2")
	app := map[string]string{"app": "many"}
	e.createService(e.newService("many", app, servicePort("http", 80, intstr.FromInt32(8080))))
	var pods []*corev1.Pod
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("many-%d", i)
		pods = append(pods, e.newPod(name, app))
		want = append(want, name+" ready=true serving=true terminating=false http:8080/TCP")
	}
	e.runPods(pods...)

	got := e.waitForEndpoints("many", want...)
	var sizes []int
	for _, s := range got {
		sizes = append(sizes, len(s.Endpoints))
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{1, 2, 2}) {
		t.Errorf("slice sizes %v, want [1 2 2]", sizes)
	}
}

// Deleting a Service deletes its slices, and no other Service's. Upstream leaves that
// to the garbage collector (the slices' owner reference), so against upstream the test
// runs kube-controller-manager's garbage collector too; mini-kcm, which has none,
// deletes them itself, which the audit log shows.
func TestDeletingAServiceDeletesItsSlicesAndNoOther(t *testing.T) {
	var e *env
	if framework.AgainstUpstream() {
		e = newEnv(t)
		e.startKubeControllerManager("endpointslice,garbagecollector")
	} else {
		e = start(t)
	}
	gone, kept := map[string]string{"app": "gone"}, map[string]string{"app": "kept"}
	e.createService(e.newService("gone", gone, servicePort("http", 80, intstr.FromInt32(8080))))
	e.createService(e.newService("kept", kept, servicePort("http", 80, intstr.FromInt32(8080))))
	e.runPods(e.newPod("gone-0", gone), e.newPod("kept-0", kept))
	e.waitForEndpoints("gone", "gone-0 ready=true serving=true terminating=false http:8080/TCP")
	e.waitForEndpoints("kept", "kept-0 ready=true serving=true terminating=false http:8080/TCP")
	mark := e.auditMark()

	if err := e.Client.CoreV1().Services(e.Namespace).Delete(e.ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	framework.EventuallyEvery(t, convergeTimeout, 500*time.Millisecond, func() error {
		if left := e.slicesOf("gone"); len(left) > 0 {
			return fmt.Errorf("%d slices of the deleted Service are left", len(left))
		}
		return nil
	})
	if len(e.slicesOf("kept")) != 1 {
		t.Errorf("the other Service lost its slice")
	}
	if e.replica != nil {
		deletes := e.sliceWritesSince(mark, e.controllerUser)
		if len(deletes) != 1 || !strings.HasPrefix(deletes[0], "delete gone-") {
			t.Errorf("mini-kcm's slice writes after the deletion: %v, want one delete of gone's slice", deletes)
		}
	}
}
