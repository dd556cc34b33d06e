package endpoints

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"

	"github.com/mini-kcm/mini-kcm/controllers/endpoints/subsets"
)

func TestSyncBuildsSubsetsFromSelectedPods(t *testing.T) {
	const ns = "other"
	withPorts := func(ports ...v1.ServicePort) func(*v1.Service) {
		return func(s *v1.Service) { s.Spec.Ports = ports }
	}
	tcp := func(port int32) []v1.EndpointPort { return []v1.EndpointPort{{Port: port, Protocol: v1.ProtocolTCP}} }
	podWith := func(id int, mutate func(*v1.Pod)) *v1.Pod {
		pod := testPod(ns, id, 1, true, ipv4only)
		mutate(pod)
		return pod
	}
	now := metav1.Now()

	tests := []struct {
		name    string
		service func(*v1.Service)
		pods    []*v1.Pod
		// want is compared exactly after sorting it canonically.
		want []v1.EndpointSubset
	}{
		{
			name:    "a TCP port",
			service: withPorts(v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}),
			pods:    testPods(ns, 1, 0, 1, ipv4only),
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name:    "a UDP port",
			service: withPorts(v1.ServicePort{Port: 80, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(8080)}),
			pods:    testPods(ns, 1, 0, 1, ipv4only),
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolUDP}}}},
		},
		{
			name:    "an SCTP port",
			service: withPorts(v1.ServicePort{Port: 80, Protocol: v1.ProtocolSCTP, TargetPort: intstr.FromInt32(8080)}),
			pods:    testPods(ns, 1, 0, 1, ipv4only),
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolSCTP}}}},
		},
		{
			name: "one port number on two protocols",
			service: withPorts(
				v1.ServicePort{Name: "tcp", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
				v1.ServicePort{Name: "udp", Port: 80, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(8080)},
			),
			pods: testPods(ns, 1, 0, 1, ipv4only),
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{address(ns, 0)},
				Ports:     []v1.EndpointPort{{Name: "tcp", Port: 8080, Protocol: v1.ProtocolTCP}, {Name: "udp", Port: 8080, Protocol: v1.ProtocolUDP}},
			}},
		},
		{
			name: "two ports of three pods share one subset",
			service: withPorts(
				v1.ServicePort{Name: "port0", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
				v1.ServicePort{Name: "port1", Port: 88, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8088)},
			),
			pods: testPods(ns, 3, 0, 2, ipv4only),
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{address(ns, 0), address(ns, 1), address(ns, 2)},
				Ports:     []v1.EndpointPort{{Name: "port0", Port: 8080, Protocol: v1.ProtocolTCP}, {Name: "port1", Port: 8088, Protocol: v1.ProtocolTCP}},
			}},
		},
		{
			name: "an empty selector selects every pod of the namespace and only those",
			service: func(s *v1.Service) {
				s.Spec.Selector = map[string]string{}
			},
			pods: append(testPods(ns, 1, 0, 1, ipv4only), testPods("elsewhere", 3, 0, 1, ipv4only)...),
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name: "pods not matching the selector are left out",
			pods: []*v1.Pod{testPod(ns, 0, 1, true, ipv4only), podWith(1, func(p *v1.Pod) { p.Labels = map[string]string{"foo": "baz"} })},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name: "a not-ready pod is a not-ready address",
			pods: testPods(ns, 0, 1, 1, ipv4only),
			want: []v1.EndpointSubset{{NotReadyAddresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name: "ready and not-ready pods share a subset",
			pods: testPods(ns, 1, 1, 1, ipv4only),
			want: []v1.EndpointSubset{{
				Addresses:         []v1.EndpointAddress{address(ns, 0)},
				NotReadyAddresses: []v1.EndpointAddress{address(ns, 1)},
				Ports:             tcp(8080),
			}},
		},
		{
			name:    "publishNotReadyAddresses publishes not-ready pods as ready",
			service: func(s *v1.Service) { s.Spec.PublishNotReadyAddresses = true },
			pods:    testPods(ns, 1, 1, 1, ipv4only),
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0), address(ns, 1)}, Ports: tcp(8080)}},
		},
		{
			name: "failed and succeeded pods are left out",
			pods: []*v1.Pod{
				podWith(0, func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever; p.Status.Phase = v1.PodFailed }),
				podWith(1, func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever; p.Status.Phase = v1.PodSucceeded }),
				podWith(2, func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure; p.Status.Phase = v1.PodSucceeded }),
				podWith(3, func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }),
			},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 3)}, Ports: tcp(8080)}},
		},
		{
			name: "terminating pods are left out",
			pods: []*v1.Pod{podWith(0, func(p *v1.Pod) { p.DeletionTimestamp = &now }), testPod(ns, 1, 1, true, ipv4only)},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 1)}, Ports: tcp(8080)}},
		},
		{
			name:    "publishNotReadyAddresses keeps terminating pods",
			service: func(s *v1.Service) { s.Spec.PublishNotReadyAddresses = true },
			pods:    []*v1.Pod{podWith(0, func(p *v1.Pod) { p.DeletionTimestamp = &now })},
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name: "pods without an IP are left out",
			pods: []*v1.Pod{podWith(0, func(p *v1.Pod) { p.Status.PodIP = ""; p.Status.PodIPs = nil }), testPod(ns, 1, 1, true, ipv4only)},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 1)}, Ports: tcp(8080)}},
		},
		{
			name: "the node name is copied",
			pods: []*v1.Pod{podWith(0, func(p *v1.Pod) { p.Spec.NodeName = "node-a" })},
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{func() v1.EndpointAddress { a := address(ns, 0); a.NodeName = new("node-a"); return a }()},
				Ports:     tcp(8080),
			}},
		},
		{
			name: "the pod UID is in the targetRef but its resourceVersion is not",
			pods: []*v1.Pod{podWith(0, func(p *v1.Pod) { p.UID = "uid-0"; p.ResourceVersion = "42" })},
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{func() v1.EndpointAddress { a := address(ns, 0); a.TargetRef.UID = "uid-0"; return a }()},
				Ports:     tcp(8080),
			}},
		},
		{
			name: "the hostname is set for the Service named by the pod's subdomain",
			pods: []*v1.Pod{
				podWith(0, func(p *v1.Pod) { p.Spec.Hostname = "web-0"; p.Spec.Subdomain = "foo" }),
				podWith(1, func(p *v1.Pod) { p.Spec.Hostname = "web-1"; p.Spec.Subdomain = "other-service" }),
			},
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{func() v1.EndpointAddress { a := address(ns, 0); a.Hostname = "web-0"; return a }(), address(ns, 1)},
				Ports:     tcp(8080),
			}},
		},
		{
			name:    "a named target port resolves per pod",
			service: withPorts(v1.ServicePort{Name: "web", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http")}),
			pods: []*v1.Pod{
				podWith(0, func(p *v1.Pod) {
					p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8000, Protocol: v1.ProtocolTCP}}
				}),
				podWith(1, func(p *v1.Pod) {
					p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 9000, Protocol: v1.ProtocolTCP}}
				}),
			},
			want: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Name: "web", Port: 8000, Protocol: v1.ProtocolTCP}}},
				{Addresses: []v1.EndpointAddress{address(ns, 1)}, Ports: []v1.EndpointPort{{Name: "web", Port: 9000, Protocol: v1.ProtocolTCP}}},
			},
		},
		{
			name:    "a named target port must match the protocol too",
			service: withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromString("dns")}),
			pods: []*v1.Pod{podWith(0, func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "dns", ContainerPort: 5353, Protocol: v1.ProtocolTCP}}
			})},
			want: nil,
		},
		{
			name:    "a named target port may be on a sidecar",
			service: withPorts(v1.ServicePort{Name: "proxy", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("proxy")}),
			pods: []*v1.Pod{
				podWith(0, func(p *v1.Pod) {
					p.Spec.InitContainers = []v1.Container{{
						Name: "sidecar", RestartPolicy: new(v1.ContainerRestartPolicyAlways),
						Ports: []v1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: v1.ProtocolTCP}},
					}}
				}),
				podWith(1, func(p *v1.Pod) {
					p.Spec.InitContainers = []v1.Container{{
						Name:  "init",
						Ports: []v1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: v1.ProtocolTCP}},
					}}
				}),
			},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Name: "proxy", Port: 15001, Protocol: v1.ProtocolTCP}}}},
		},
		{
			name: "a pod lacking one named port serves only the other",
			service: withPorts(
				v1.ServicePort{Name: "a", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("a")},
				v1.ServicePort{Name: "b", Port: 81, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("b")},
			),
			pods: []*v1.Pod{
				podWith(0, func(p *v1.Pod) {
					p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "a", ContainerPort: 100, Protocol: v1.ProtocolTCP}, {Name: "b", ContainerPort: 101, Protocol: v1.ProtocolTCP}}
				}),
				podWith(1, func(p *v1.Pod) {
					p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "b", ContainerPort: 101, Protocol: v1.ProtocolTCP}}
				}),
			},
			want: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Name: "a", Port: 100, Protocol: v1.ProtocolTCP}}},
				{Addresses: []v1.EndpointAddress{address(ns, 0), address(ns, 1)}, Ports: []v1.EndpointPort{{Name: "b", Port: 101, Protocol: v1.ProtocolTCP}}},
			},
		},
		{
			name:    "the appProtocol is copied",
			service: withPorts(v1.ServicePort{Name: "h2", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080), AppProtocol: new("kubernetes.io/h2c")}),
			pods:    testPods(ns, 1, 0, 1, ipv4only),
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{address(ns, 0)},
				Ports:     []v1.EndpointPort{{Name: "h2", Port: 8080, Protocol: v1.ProtocolTCP, AppProtocol: new("kubernetes.io/h2c")}},
			}},
		},
		{
			name:    "an IPv6 Service takes the pods' IPv6 addresses",
			service: func(s *v1.Service) { s.Spec.ClusterIP = "fd00::1"; s.Spec.IPFamilies = ipv6ipv4 },
			pods:    testPods(ns, 1, 0, 1, ipv4ipv6),
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{func() v1.EndpointAddress { a := address(ns, 0); a.IP = "2000::4"; return a }()},
				Ports:     tcp(8080),
			}},
		},
		{
			name:    "an IPv6 Service leaves out IPv4-only pods",
			service: func(s *v1.Service) { s.Spec.ClusterIP = "fd00::1"; s.Spec.IPFamilies = ipv6only },
			pods:    testPods(ns, 1, 0, 1, ipv4only),
			want:    nil,
		},
		{
			name:    "an IPv4 Service takes the IPv4 address of IPv6-primary pods",
			service: func(s *v1.Service) { s.Spec.IPFamilies = ipv4ipv6 },
			pods:    testPods(ns, 1, 0, 1, ipv6ipv4),
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name: "an IP with leading zeros is written canonically",
			pods: []*v1.Pod{podWith(0, func(p *v1.Pod) {
				p.Status.PodIP = "001.002.003.004"
				p.Status.PodIPs = []v1.PodIP{{IP: "001.002.003.004"}}
			})},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: tcp(8080)}},
		},
		{
			name:    "a headless Service without ports lists addresses without ports",
			service: func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone; s.Spec.Ports = nil },
			pods:    testPods(ns, 1, 1, 1, ipv4only),
			want:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, NotReadyAddresses: []v1.EndpointAddress{address(ns, 1)}}},
		},
		{
			name:    "a Service with a cluster IP and without ports lists nothing",
			service: func(s *v1.Service) { s.Spec.Ports = nil },
			pods:    testPods(ns, 1, 0, 1, ipv4only),
			want:    nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService(ns)
			if tc.service != nil {
				tc.service(service)
			}
			f.addService(service)
			f.addPods(tc.pods...)

			f.mustSync(ns, "foo")

			got := f.onlyWrite("create")
			want := subsets.Sort(tc.want)
			if !subsets.EqualIgnoringResourceVersion(got.Subsets, want) || !reflect.DeepEqual(got.Subsets, subsets.Repack(want)) {
				t.Errorf("subsets =\n%s\nwant\n%s", dump.Pretty(got.Subsets), dump.Pretty(want))
			}
		})
	}
}

// TestSyncSortsPortsLikeUpstream pins the order upstream writes for one port number on
// two protocols (UDP before TCP), which depends on hashing exactly as upstream does.
func TestSyncSortsPortsLikeUpstream(t *testing.T) {
	f := newFixture(t, 0)
	service := testService("other")
	service.Spec.Ports = []v1.ServicePort{
		{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP},
		{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolUDP},
	}
	f.addService(service)
	f.addPods(testPods("other", 1, 0, 1, ipv4only)...)

	f.mustSync("other", "foo")

	got := f.onlyWrite("create").Subsets
	want := []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolUDP}, {Port: 8080, Protocol: v1.ProtocolTCP}}
	if len(got) != 1 || !reflect.DeepEqual(got[0].Ports, want) {
		t.Errorf("subsets = %s, want one subset with ports %v", dump.Pretty(got), want)
	}
}

func TestSyncCountsReadinessByPhaseDeletionAndPublishNotReady(t *testing.T) {
	makePod := func(phase v1.PodPhase, ready, terminating bool) *v1.Pod {
		pod := testPod("ns", 0, 1, ready, ipv4only)
		pod.Status.Phase = phase
		if terminating {
			now := metav1.Now()
			pod.DeletionTimestamp = &now
		}
		return pod
	}
	tests := []struct {
		name                    string
		pod                     *v1.Pod
		publishNotReady         bool
		wantReady, wantNotReady int
	}{
		{"running", makePod(v1.PodRunning, true, false), false, 1, 0},
		{"running and terminating", makePod(v1.PodRunning, true, true), false, 0, 0},
		{"unknown phase, ready", makePod(v1.PodUnknown, true, false), false, 1, 0},
		{"unknown phase, ready, terminating", makePod(v1.PodUnknown, true, true), false, 0, 0},
		{"pending, ready", makePod(v1.PodPending, true, false), false, 1, 0},
		{"pending, ready, terminating", makePod(v1.PodPending, true, true), false, 0, 0},
		{"unknown phase, not ready", makePod(v1.PodUnknown, false, false), false, 0, 1},
		{"pending, not ready", makePod(v1.PodPending, false, false), false, 0, 1},
		{"failed", makePod(v1.PodFailed, false, false), false, 0, 0},
		{"succeeded", makePod(v1.PodSucceeded, false, false), false, 0, 0},
		{"running, not ready, published", makePod(v1.PodRunning, false, false), true, 1, 0},
		{"running, not ready, terminating, published", makePod(v1.PodRunning, false, true), true, 1, 0},
		{"unknown phase, not ready, published", makePod(v1.PodUnknown, false, false), true, 1, 0},
		{"unknown phase, not ready, terminating, published", makePod(v1.PodUnknown, false, true), true, 1, 0},
		{"pending, not ready, published", makePod(v1.PodPending, false, false), true, 1, 0},
		{"pending, not ready, terminating, published", makePod(v1.PodPending, false, true), true, 1, 0},
		{"failed, published", makePod(v1.PodFailed, false, false), true, 0, 0},
		{"succeeded, published", makePod(v1.PodSucceeded, false, false), true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService("ns")
			service.Spec.PublishNotReadyAddresses = tc.publishNotReady
			f.addService(service)
			f.addPods(tc.pod)

			f.mustSync("ns", "foo")

			ready, notReady := subsets.Count(f.stored("ns", "foo").Subsets)
			if ready != tc.wantReady || notReady != tc.wantNotReady {
				t.Errorf("got %d ready and %d not-ready addresses, want %d and %d", ready, notReady, tc.wantReady, tc.wantNotReady)
			}
		})
	}
}

func TestSyncWritesNothingWhenEndpointsAreUpToDate(t *testing.T) {
	const ns = metav1.NamespaceDefault
	pod0, pod1 := testPod(ns, 0, 1, true, ipv4only), testPod(ns, 1, 1, true, ipv4only)
	notReady1 := testPod(ns, 1, 1, false, ipv4only)
	withRV := func(a v1.EndpointAddress, rv string) v1.EndpointAddress {
		a.TargetRef.ResourceVersion = rv
		return a
	}
	tests := []struct {
		name     string
		service  func(*v1.Service)
		pods     []*v1.Pod
		existing v1.Endpoints
	}{
		{
			name:     "no pods and nil subsets",
			existing: v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()}, Subsets: nil},
		},
		{
			name:     "no pods and empty subsets",
			existing: v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()}, Subsets: []v1.EndpointSubset{}},
		},
		{
			name:     "a headless label on the Endpoints of a Service with a cluster IP",
			existing: v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Labels: managedLabels(v1.IsHeadlessService, "")}},
		},
		{
			name: "identical subsets",
			pods: []*v1.Pod{pod0},
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
		},
		{
			name: "identical subsets in another order",
			pods: []*v1.Pod{pod0, pod1},
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 1), address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
		},
		{
			name: "only the pods' resourceVersions differ",
			pods: []*v1.Pod{pod0, notReady1},
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()},
				Subsets: []v1.EndpointSubset{{
					Addresses:         []v1.EndpointAddress{withRV(address(ns, 0), "1")},
					NotReadyAddresses: []v1.EndpointAddress{withRV(address(ns, 1), "2")},
					Ports:             []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}},
				}},
			},
		},
		{
			name:    "a stale trigger-time annotation alone",
			service: func(s *v1.Service) { s.Labels = map[string]string{"app": "web"} },
			existing: v1.Endpoints{ObjectMeta: metav1.ObjectMeta{
				Labels:      managedLabels("app", "web"),
				Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "2001-01-01T00:00:00Z", "user": "kept"},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService(ns)
			if tc.service != nil {
				tc.service(service)
			}
			f.addService(service)
			f.addPods(tc.pods...)
			existing := tc.existing.DeepCopy()
			existing.Namespace, existing.Name, existing.ResourceVersion = ns, "foo", "1"
			f.addEndpoints(existing)

			f.mustSync(ns, "foo")

			f.noWrites()
		})
	}
}

func TestSyncUpdatesStaleEndpoints(t *testing.T) {
	const ns = "bar"
	tests := []struct {
		name     string
		service  func(*v1.Service)
		existing v1.Endpoints
		want     v1.Endpoints
	}{
		{
			name: "other subsets are replaced and our labels set",
			existing: v1.Endpoints{Subsets: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{{IP: "6.7.8.9", NodeName: new("")}},
				Ports:     []v1.EndpointPort{{Port: 1000}},
			}}},
			want: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
		},
		{
			name:    "labels follow the Service's and foreign labels go",
			service: func(s *v1.Service) { s.Labels = map[string]string{"baz": "blah"} },
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"foo": "bar", LabelManagedBy: ComponentName}},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
			want: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels("baz", "blah")},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
		},
		{
			name:    "a missing managed-by label is added",
			service: func(s *v1.Service) { s.Labels = map[string]string{"foo": "bar"} },
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"foo": "bar"}},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
			want: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels("foo", "bar")},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
		},
		{
			name: "a headless Service gets the headless label, and foreign annotations stay",
			service: func(s *v1.Service) {
				s.Spec.ClusterIP = v1.ClusterIPNone
				s.Spec.Ports = nil
				s.Labels = map[string]string{"a": "b"}
			},
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"note": "kept"}},
				Subsets: []v1.EndpointSubset{{
					Addresses: []v1.EndpointAddress{{IP: "6.7.8.9", NodeName: new("")}},
					Ports:     []v1.EndpointPort{{Port: 1000, Protocol: v1.ProtocolTCP}},
				}},
			},
			want: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels("a", "b", v1.IsHeadlessService, ""), Annotations: map[string]string{"note": "kept"}},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}}},
			},
		},
		{
			name:    "a Service that got a cluster IP loses the headless label",
			service: func(s *v1.Service) { s.Labels = map[string]string{v1.IsHeadlessService: ""} },
			existing: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels(v1.IsHeadlessService, "")},
			},
			want: v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Labels: managedLabels()},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{address(ns, 0)}, Ports: []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService(ns)
			if tc.service != nil {
				tc.service(service)
			}
			original := service.DeepCopy()
			f.addService(service)
			f.addPods(testPod(ns, 0, 1, true, ipv4only))
			existing := tc.existing.DeepCopy()
			existing.Namespace, existing.Name, existing.ResourceVersion = ns, "foo", "1"
			f.addEndpoints(existing)

			f.mustSync(ns, "foo")

			got := f.onlyWrite("update")
			want := tc.want.DeepCopy()
			want.Namespace, want.Name, want.ResourceVersion = ns, "foo", "1"
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("updated endpoints =\n%s\nwant\n%s", dump.Pretty(got), dump.Pretty(want))
			}
			if !reflect.DeepEqual(service, original) {
				t.Errorf("the sync changed the cached Service")
			}
		})
	}
}

func TestSyncCreatesEndpointsWithLabelsForANewService(t *testing.T) {
	f := newFixture(t, 0)
	service := testService("other")
	service.Labels = map[string]string{"foo": "bar"}
	service.Spec.ClusterIP = ""
	f.addService(service)

	f.mustSync("other", "foo")

	got := f.onlyWrite("create")
	want := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "other",
			Name:        "foo",
			Labels:      managedLabels("foo", "bar", v1.IsHeadlessService, ""),
			Annotations: map[string]string{},
		},
		Subsets: []v1.EndpointSubset{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("created endpoints =\n%s\nwant\n%s", dump.Pretty(got), dump.Pretty(want))
	}
}

func TestSyncLeavesServicesWithoutEndpointsAlone(t *testing.T) {
	tests := []struct {
		name    string
		service func(*v1.Service)
	}{
		{"no selector", func(s *v1.Service) { s.Spec.Selector = nil }},
		{"ExternalName with selector and ports", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName }},
		{"ExternalName with ports", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.Selector = nil }},
		{"ExternalName with selector", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.Ports = nil }},
		{"ExternalName alone", func(s *v1.Service) {
			s.Spec = v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.com"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService("default")
			tc.service(service)
			f.addService(service)
			f.addPods(testPods("default", 1, 0, 1, ipv4only)...)
			f.addEndpoints(&v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "default", ResourceVersion: "1"},
				Subsets: []v1.EndpointSubset{{
					Addresses: []v1.EndpointAddress{{IP: "6.7.8.9"}},
					Ports:     []v1.EndpointPort{{Port: 1000}},
				}},
			})

			f.mustSync("default", "foo")

			f.noWrites()
		})
	}
}

func TestSyncDeletesEndpointsOfDeletedService(t *testing.T) {
	f := newFixture(t, 0)
	f.addEndpoints(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "default", ResourceVersion: "1"}})

	f.mustSync("default", "foo")

	f.onlyWrite("delete")
	if _, err := f.client.CoreV1().Endpoints("default").Get(f.ctx, "foo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("endpoints still there: %v", err)
	}
}

func TestSyncIgnoresMissingEndpointsOfDeletedService(t *testing.T) {
	f := newFixture(t, 0)

	if err := f.sync("default", "foo"); err != nil {
		t.Errorf("sync of a Service without Service or Endpoints failed: %v", err)
	}
}

func TestSyncForgetsStateOfDeletedService(t *testing.T) {
	f := newFixture(t, 0)
	service := testService("ns")
	service.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	f.addService(service)
	f.mustSync("ns", "foo")
	f.controller.staleEndpoints.markStale(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", ResourceVersion: "7"}})

	if err := f.services.Delete(service); err != nil {
		t.Fatal(err)
	}
	f.mustSync("ns", "foo")

	if len(f.controller.triggerTimes.ServiceStates) != 0 || len(f.controller.staleEndpoints.replaced) != 0 {
		t.Errorf("state of the deleted Service kept: trigger times %v, replaced versions %v",
			f.controller.triggerTimes.ServiceStates, f.controller.staleEndpoints.replaced)
	}
}

func TestSyncAddsAndDeletesServicePorts(t *testing.T) {
	f := newFixture(t, 0)
	service := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "ns"},
		Spec: v1.ServiceSpec{
			Selector:   map[string]string{"foo": "bar"},
			ClusterIP:  "1.1.1.1",
			Ports:      []v1.ServicePort{{Name: "portname1", Port: 80, TargetPort: intstr.FromString("svc1")}},
			IPFamilies: ipv4only,
		},
	}
	f.addService(service)
	f.addEndpoints(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "ns", ResourceVersion: "1", Labels: managedLabels()}})
	pod := func(name, ip, portName string, port int32) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"foo": "bar"}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{{Name: portName, ContainerPort: port}}}}},
			Status: v1.PodStatus{
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
				PodIP:      ip,
				PodIPs:     []v1.PodIP{{IP: ip}},
			},
		}
	}
	addr := func(name, ip string) []v1.EndpointAddress {
		return []v1.EndpointAddress{{IP: ip, NodeName: new(""), TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name}}}
	}
	first := v1.EndpointSubset{Addresses: addr("pod1", "10.1.1.1"), Ports: []v1.EndpointPort{{Name: "portname1", Port: 100}}}
	second := v1.EndpointSubset{Addresses: addr("pod2", "10.1.1.2"), Ports: []v1.EndpointPort{{Name: "portname2", Port: 101}}}
	expect := func(step string, want ...v1.EndpointSubset) {
		t.Helper()
		got := f.stored("ns", "foo").Subsets
		if want := subsets.Repack(want); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: subsets =\n%s\nwant\n%s", step, dump.Pretty(got), dump.Pretty(want))
		}
	}

	f.addPods(pod("pod1", "10.1.1.1", "svc1", 100))
	f.mustSync("ns", "foo")
	expect("first pod", first)

	service = service.DeepCopy()
	service.Spec.Ports = append(service.Spec.Ports, v1.ServicePort{Name: "portname2", Port: 81, TargetPort: intstr.FromString("svc2")})
	f.addService(service)
	f.addPods(pod("pod2", "10.1.1.2", "svc2", 101))
	if err := f.endpoints.Update(f.stored("ns", "foo")); err != nil {
		t.Fatal(err)
	}
	f.mustSync("ns", "foo")
	expect("second port and pod", first, second)

	service = service.DeepCopy()
	service.Spec.Ports = service.Spec.Ports[1:]
	f.addService(service)
	if err := f.endpoints.Update(f.stored("ns", "foo")); err != nil {
		t.Fatal(err)
	}
	f.mustSync("ns", "foo")
	expect("first port deleted", second)
}

func TestSyncSetsLastChangeTriggerTime(t *testing.T) {
	created := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	old := created.Add(-time.Hour)
	tests := []struct {
		name            string
		serviceCreated  time.Time
		existingTrigger string
		want            string // "" means no annotation
	}{
		{"the first sync reports the Service's creation", created, "", created.Format(time.RFC3339Nano)},
		{"an older value is overridden", created, old.Format(time.RFC3339Nano), created.Format(time.RFC3339Nano)},
		{"without any trigger the annotation is removed", time.Time{}, created.Format(time.RFC3339Nano), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService("other")
			service.CreationTimestamp = metav1.NewTime(tc.serviceCreated)
			f.addService(service)
			f.addPods(testPods("other", 1, 0, 1, ipv4only)...)
			existing := &v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "other", ResourceVersion: "1", Annotations: map[string]string{}},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "6.7.8.9", NodeName: new("")}}, Ports: []v1.EndpointPort{{Port: 1000}}}},
			}
			if tc.existingTrigger != "" {
				existing.Annotations[v1.EndpointsLastChangeTriggerTime] = tc.existingTrigger
			}
			f.addEndpoints(existing)

			f.mustSync("other", "foo")

			got, ok := f.onlyWrite("update").Annotations[v1.EndpointsLastChangeTriggerTime]
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("trigger time annotation = %q (set: %v), want %q", got, ok, tc.want)
			}
		})
	}
}

func TestSyncReportsThePodReadinessChangeAsTriggerTime(t *testing.T) {
	f := newFixture(t, 0)
	bumpResourceVersions(f.client)
	service := testService("ns")
	service.CreationTimestamp = metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	f.addService(service)
	pod := testPod("ns", 0, 1, false, ipv4only)
	f.addPods(pod)
	f.mustSync("ns", "foo")
	if err := f.endpoints.Add(f.stored("ns", "foo")); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()

	readyAt := time.Date(2024, 5, 1, 10, 5, 0, 123000000, time.UTC)
	pod = pod.DeepCopy()
	pod.Status.Conditions[0] = v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}
	f.addPods(pod)
	f.mustSync("ns", "foo")

	if got := f.onlyWrite("update").Annotations[v1.EndpointsLastChangeTriggerTime]; got != "2024-05-01T10:05:00.123Z" {
		t.Errorf("trigger time = %q, want the pod's Ready transition 2024-05-01T10:05:00.123Z", got)
	}
}

func TestSyncTruncatesOverCapacity(t *testing.T) {
	tests := []struct {
		name                      string
		startingAnnotation        *string
		existing, ready, notReady int
		wantReady, wantNotReady   int
		wantAnnotation            bool
	}{
		{name: "empty"},
		{name: "past capacity with fewer ready than capacity", existing: maxCapacity - 1, ready: maxCapacity - 3, notReady: 4,
			wantReady: maxCapacity - 3, wantNotReady: 3, wantAnnotation: true},
		{name: "past capacity with capacity ready", existing: maxCapacity - 1, ready: maxCapacity, notReady: 10,
			wantReady: maxCapacity, wantNotReady: 0, wantAnnotation: true},
		{name: "annotation removed below capacity", startingAnnotation: new("truncated"), existing: maxCapacity - 1, ready: maxCapacity - 1,
			wantReady: maxCapacity - 1},
		{name: "a warning annotation removed at capacity", startingAnnotation: new("warning"), existing: maxCapacity, ready: maxCapacity,
			wantReady: maxCapacity},
		{name: "a warning annotation corrected over capacity", startingAnnotation: new("warning"), existing: maxCapacity + 1, ready: maxCapacity + 1,
			wantReady: maxCapacity, wantAnnotation: true},
		{name: "annotation removed at capacity", startingAnnotation: new("truncated"), existing: maxCapacity, ready: maxCapacity,
			wantReady: maxCapacity},
		{name: "an invalid annotation corrected with unchanged pods", startingAnnotation: new("invalid"), existing: maxCapacity + 1, ready: maxCapacity + 1,
			wantReady: maxCapacity, wantAnnotation: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			service := testService("test")
			service.Spec.Ports = []v1.ServicePort{{Port: 80}}
			f.addService(service)
			pods := testPods("test", tc.ready, tc.notReady, 1, ipv4only)
			f.addPods(pods...)
			var existing v1.EndpointSubset
			for _, pod := range pods[:tc.existing] {
				addr, err := addressFor(service, pod)
				if err != nil {
					t.Fatal(err)
				}
				existing.Addresses = append(existing.Addresses, *addr)
			}
			endpoints := &v1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "test", ResourceVersion: "1", Annotations: map[string]string{}},
				Subsets:    []v1.EndpointSubset{existing},
			}
			if tc.startingAnnotation != nil {
				endpoints.Annotations[v1.EndpointsOverCapacity] = *tc.startingAnnotation
			}
			f.addEndpoints(endpoints)

			f.mustSync("test", "foo")

			got := f.stored("test", "foo")
			annotation, ok := got.Annotations[v1.EndpointsOverCapacity]
			if ok != tc.wantAnnotation || (ok && annotation != "truncated") {
				t.Errorf("over-capacity annotation = %q (set: %v), want set: %v", annotation, ok, tc.wantAnnotation)
			}
			if ready, notReady := subsets.Count(got.Subsets); ready != tc.wantReady || notReady != tc.wantNotReady {
				t.Errorf("got %d ready and %d not-ready addresses, want %d and %d", ready, notReady, tc.wantReady, tc.wantNotReady)
			}
		})
	}
}

func TestSyncWaitsForTheCacheToSeeItsOwnUpdate(t *testing.T) {
	f := newFixture(t, 0)
	bumpResourceVersions(f.client)
	f.addService(testService("default"))
	pod := testPod("default", 0, 1, true, ipv4only)
	f.addPods(pod)
	replaced := &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "default", ResourceVersion: "1", Labels: managedLabels()}}
	f.addEndpoints(replaced)
	f.mustSync("default", "foo")
	f.onlyWrite("update")
	f.client.ClearActions()

	// The pod turns not ready before the cache saw our update: the sync writes nothing
	// and leaves no retry behind.
	pod = pod.DeepCopy()
	flipped := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pod.Status.Conditions[0].Status, pod.Status.Conditions[0].LastTransitionTime = v1.ConditionFalse, flipped
	f.addPods(pod)
	f.mustSync("default", "foo")
	f.noWrites()
	if n := f.controller.queue.Len(); n != 0 {
		t.Fatalf("the waiting sync queued %d keys", n)
	}

	// The cache catching up queues the Service, whose sync then goes through.
	written := f.stored("default", "foo")
	if err := f.endpoints.Update(written); err != nil {
		t.Fatal(err)
	}
	f.controller.onEndpointsUpdate(replaced, written)
	if got := drain(f.controller); !slices.Equal(got, []string{"default/foo"}) {
		t.Fatalf("the cache catching up queued %v, want default/foo", got)
	}
	f.mustSync("default", "foo")
	got := f.onlyWrite("update")
	if ready, notReady := subsets.Count(got.Subsets); ready != 0 || notReady != 1 {
		t.Errorf("got %d ready and %d not-ready addresses, want the pod not ready", ready, notReady)
	}
	// The sync that waited did not count as having published the change.
	if trigger := got.Annotations[v1.EndpointsLastChangeTriggerTime]; trigger != flipped.Format(time.RFC3339Nano) {
		t.Errorf("trigger time %q, want the pod's transition %s", trigger, flipped.Format(time.RFC3339Nano))
	}
}

func TestSyncDropsForbiddenCreateInTerminatingNamespace(t *testing.T) {
	forbidden := func(withCause bool) error {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "endpoints"}, "foo", errors.New("namespace is terminating"))
		if withCause {
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: v1.NamespaceTerminatingCause})
		}
		return err
	}
	tests := []struct {
		name      string
		err       error
		wantErr   bool
		wantEvent string
	}{
		{name: "terminating namespace", err: forbidden(true)},
		{name: "forbidden for another reason", err: forbidden(false), wantErr: true,
			wantEvent: "Warning FailedToCreateEndpoint Failed to create endpoint for service ns/foo: "},
		{name: "any other error", err: apierrors.NewInternalError(errors.New("etcd is down")), wantErr: true,
			wantEvent: "Warning FailedToCreateEndpoint Failed to create endpoint for service ns/foo: Internal error occurred: etcd is down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			f.client.PrependReactor("create", "endpoints", func(core.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			f.addService(testService("ns"))

			err := f.sync("ns", "foo")

			if (err != nil) != tc.wantErr {
				t.Errorf("sync returned %v, want error: %v", err, tc.wantErr)
			}
			assertEvent(t, f, tc.wantEvent)
		})
	}
}

func TestSyncReportsFailedUpdateAsEvent(t *testing.T) {
	f := newFixture(t, 0)
	f.client.PrependReactor("update", "endpoints", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "endpoints"}, "foo", errors.New("stale"))
	})
	f.addService(testService("ns"))
	f.addEndpoints(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "ns", ResourceVersion: "1"}})

	err := f.sync("ns", "foo")

	if !apierrors.IsConflict(err) {
		t.Errorf("sync returned %v, want the conflict", err)
	}
	assertEvent(t, f, "Warning FailedToUpdateEndpoint Failed to update endpoint ns/foo: Operation cannot be fulfilled on endpoints \"foo\": stale")
	if f.controller.staleEndpoints.check(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "ns", ResourceVersion: "1"}}) != cacheCurrent {
		t.Error("a failed update marked the cached Endpoints stale")
	}
}

// assertEvent checks that the controller emitted exactly one event starting with prefix,
// or none if prefix is empty.
func assertEvent(t *testing.T, f *fixture, prefix string) {
	t.Helper()
	var events []string
	for len(f.recorder.Events) > 0 {
		events = append(events, <-f.recorder.Events)
	}
	switch {
	case prefix == "" && len(events) > 0:
		t.Errorf("want no events, got %q", events)
	case prefix != "" && (len(events) != 1 || !strings.HasPrefix(events[0], prefix)):
		t.Errorf("events = %q, want one starting with %q", events, prefix)
	}
}

func TestEndpointsLabels(t *testing.T) {
	tests := []struct {
		clusterIP string
		service   map[string]string
		want      map[string]string
	}{
		{"10.0.0.1", nil, managedLabels()},
		{"10.0.0.1", map[string]string{"app": "web", v1.IsHeadlessService: ""}, managedLabels("app", "web")},
		{v1.ClusterIPNone, nil, managedLabels(v1.IsHeadlessService, "")},
		{"", map[string]string{"app": "web"}, managedLabels("app", "web", v1.IsHeadlessService, "")},
		{"10.0.0.1", map[string]string{LabelManagedBy: "someone-else"}, managedLabels()},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q %v", tc.clusterIP, tc.service), func(t *testing.T) {
			service := &v1.Service{ObjectMeta: metav1.ObjectMeta{Labels: tc.service}, Spec: v1.ServiceSpec{ClusterIP: tc.clusterIP}}
			before := service.DeepCopy()
			if got := endpointsLabels(service); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("endpointsLabels() = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(service, before) {
				t.Error("endpointsLabels changed the Service's labels")
			}
		})
	}
}

func TestLabelsUpToDate(t *testing.T) {
	tests := []struct {
		name               string
		endpoints, service map[string]string
		want               bool
	}{
		{"service labels plus managed-by", managedLabels("a", "b"), map[string]string{"a": "b"}, true},
		{"plus the headless label", managedLabels("a", "b", v1.IsHeadlessService, ""), map[string]string{"a": "b"}, true},
		{"managed-by missing", map[string]string{"a": "b"}, map[string]string{"a": "b"}, false},
		{"managed by someone else", map[string]string{"a": "b", LabelManagedBy: "x"}, map[string]string{"a": "b"}, false},
		{"a service label missing", managedLabels(), map[string]string{"a": "b"}, false},
		{"a service label differs", managedLabels("a", "c"), map[string]string{"a": "b"}, false},
		{"an extra label", managedLabels("a", "b", "x", "y"), map[string]string{"a": "b"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := labelsUpToDate(tc.endpoints, tc.service); got != tc.want {
				t.Errorf("labelsUpToDate() = %v, want %v", got, tc.want)
			}
		})
	}
}
