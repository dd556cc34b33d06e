package endpoints

import (
	"net"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestAddressForFollowsTheServiceIPFamily(t *testing.T) {
	tests := []struct {
		name       string
		podIPs     []v1.IPFamily
		clusterIP  string
		families   []v1.IPFamily
		wantIPv6   bool
		wantNoAddr bool
	}{
		{name: "v4 Service, single-stack pod", podIPs: ipv4only, clusterIP: "10.0.0.1", families: ipv4only},
		{name: "v4 Service, dual-stack pod", podIPs: ipv4ipv6, clusterIP: "10.0.0.1", families: ipv4only},
		{name: "v4 Service, IPv6-primary pod", podIPs: ipv6ipv4, clusterIP: "10.0.0.1", families: ipv4only},
		{name: "v4 headless Service, single-stack pod", podIPs: ipv4only, clusterIP: v1.ClusterIPNone, families: ipv4only},
		{name: "v4 headless Service, dual-stack pod", podIPs: ipv4ipv6, clusterIP: v1.ClusterIPNone, families: ipv4only},
		{name: "v6 Service, dual-stack pod", podIPs: ipv4ipv6, clusterIP: "3000::1", families: ipv6only, wantIPv6: true},
		{name: "v6 headless Service, single-stack pod", podIPs: ipv6only, clusterIP: v1.ClusterIPNone, families: ipv6only, wantIPv6: true},
		{name: "v6 headless Service, dual-stack pod", podIPs: ipv4ipv6, clusterIP: v1.ClusterIPNone, families: ipv6only, wantIPv6: true},
		{name: "v6 Service, v4-only pod", podIPs: ipv4only, clusterIP: "3000::1", families: ipv6only, wantNoAddr: true},
		{name: "no families, v4 cluster IP", podIPs: ipv4ipv6, clusterIP: "10.0.0.1"},
		{name: "no families, v6 cluster IP", podIPs: ipv4ipv6, clusterIP: "fd00::1", wantIPv6: true},
		{name: "no families, v4 cluster IP, v6-only pod", podIPs: ipv6only, clusterIP: "10.0.0.1", wantNoAddr: true},
		{name: "no families, headless, v4 pod", podIPs: ipv4only, clusterIP: v1.ClusterIPNone},
		{name: "no families, headless, v6 pod", podIPs: ipv6ipv4, clusterIP: v1.ClusterIPNone, wantIPv6: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("test", 0, 1, true, tc.podIPs)
			pod.UID = "uid-0"
			pod.Spec.NodeName = "node-1"
			// An irregular IPv4 form must come out canonical.
			for i, ip := range pod.Status.PodIPs {
				if net.ParseIP(ip.IP).To4() != nil {
					pod.Status.PodIPs[i].IP = "0" + ip.IP
				}
			}
			service := &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "test"},
				Spec:       v1.ServiceSpec{ClusterIP: tc.clusterIP, IPFamilies: tc.families},
			}

			addr, err := addressFor(service, pod)

			if tc.wantNoAddr {
				if err == nil {
					t.Fatalf("want no address, got %+v", addr)
				}
				return
			}
			if err != nil {
				t.Fatalf("addressFor: %v", err)
			}
			ip := net.ParseIP(addr.IP)
			if ip == nil || ip.String() != addr.IP {
				t.Errorf("IP %q is not in canonical form", addr.IP)
			}
			if isV6 := ip != nil && ip.To4() == nil; isV6 != tc.wantIPv6 {
				t.Errorf("IP %q: IPv6 %v, want %v", addr.IP, isV6, tc.wantIPv6)
			}
			if addr.NodeName == nil || *addr.NodeName != "node-1" {
				t.Errorf("nodeName = %v, want node-1", addr.NodeName)
			}
			want := v1.ObjectReference{Kind: "Pod", Namespace: "test", Name: "pod0", UID: "uid-0"}
			if addr.TargetRef == nil || *addr.TargetRef != want {
				t.Errorf("targetRef = %+v, want %+v", addr.TargetRef, want)
			}
		})
	}
}

func TestAddressForSetsAnEmptyNodeNameAndDoesNotAliasThePod(t *testing.T) {
	pod := testPod("test", 0, 1, true, ipv4only)
	addr, err := addressFor(testService("test"), pod)
	if err != nil {
		t.Fatal(err)
	}
	if addr.NodeName == nil || *addr.NodeName != "" {
		t.Fatalf("nodeName = %v, want a pointer to \"\"", addr.NodeName)
	}
	*addr.NodeName = "changed"
	if pod.Spec.NodeName != "" {
		t.Error("the address shares its nodeName with the cached pod")
	}
}

func TestAddressForSkipsUnparsableIPs(t *testing.T) {
	pod := testPod("test", 0, 1, true, ipv4only)
	pod.Status.PodIPs = []v1.PodIP{{IP: "not-an-ip"}, {IP: "10.1.2.3"}}
	addr, err := addressFor(testService("test"), pod)
	if err != nil || addr.IP != "10.1.2.3" {
		t.Errorf("addressFor = %v, %v; want 10.1.2.3", addr, err)
	}
}

func TestParseIPSloppy(t *testing.T) {
	tests := map[string]string{
		"1.2.3.4":           "1.2.3.4",
		"01.002.0003.0":     "1.2.3.0",
		"010.0.0.1":         "10.0.0.1",
		"::ffff:01.02.03.4": "1.2.3.4",
		"fd00::0001":        "fd00::1",
		"256.1.1.1":         "",
		"1.2.3":             "",
		"1.2.3.4.5":         "",
		"1.2.3.-4":          "",
		"1..3.4":            "",
		"":                  "",
		"hello":             "",
	}
	for in, want := range tests {
		got := ""
		if ip := parseIPSloppy(in); ip != nil {
			got = ip.String()
		}
		if got != want {
			t.Errorf("parseIPSloppy(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindPort(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name    string
		pod     v1.PodSpec
		target  intstr.IntOrString
		proto   v1.Protocol
		want    int
		wantErr bool
	}{
		{
			name:   "a numeric target port needs no container port",
			target: intstr.FromInt32(8080), proto: v1.ProtocolTCP, want: 8080,
		},
		{
			name:   "a named port in a container",
			pod:    v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolTCP}}}}},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, want: 93,
		},
		{
			name: "the first container with the name wins",
			pod: v1.PodSpec{Containers: []v1.Container{
				{Ports: []v1.ContainerPort{{Name: "q", ContainerPort: 1, Protocol: v1.ProtocolTCP}}},
				{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolTCP}, {Name: "p", ContainerPort: 94, Protocol: v1.ProtocolTCP}}},
			}},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, want: 93,
		},
		{
			name: "the protocol must match",
			pod: v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{
				{Name: "p", ContainerPort: 21, Protocol: v1.ProtocolUDP},
				{Name: "p", ContainerPort: 22, Protocol: v1.ProtocolTCP},
			}}}},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, want: 22,
		},
		{
			name:   "a missing name",
			pod:    v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolTCP}}}}},
			target: intstr.FromString("q"), proto: v1.ProtocolTCP, wantErr: true,
		},
		{
			name:   "a name on another protocol only",
			pod:    v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolUDP}}}}},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, wantErr: true,
		},
		{
			name: "a sidecar's named port",
			pod: v1.PodSpec{InitContainers: []v1.Container{{
				RestartPolicy: &always,
				Ports:         []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolTCP}},
			}}},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, want: 93,
		},
		{
			name: "a regular container before a sidecar",
			pod: v1.PodSpec{
				InitContainers: []v1.Container{{RestartPolicy: &always, Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 1, Protocol: v1.ProtocolTCP}}}},
				Containers:     []v1.Container{{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolTCP}}}},
			},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, want: 93,
		},
		{
			name:   "a plain init container's port is ignored",
			pod:    v1.PodSpec{InitContainers: []v1.Container{{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: 93, Protocol: v1.ProtocolTCP}}}}},
			target: intstr.FromString("p"), proto: v1.ProtocolTCP, wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: tc.pod}
			got, err := findPort(pod, &v1.ServicePort{TargetPort: tc.target, Protocol: tc.proto})
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("findPort() = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestEndpointPortForCopiesNameProtocolAndAppProtocol(t *testing.T) {
	for _, appProtocol := range []*string{nil, new("http")} {
		servicePort := &v1.ServicePort{Name: "test", Protocol: v1.ProtocolUDP, AppProtocol: appProtocol}
		got := endpointPortFor(servicePort, 80)
		if got.Name != "test" || got.Port != 80 || got.Protocol != v1.ProtocolUDP || got.AppProtocol != appProtocol {
			t.Errorf("endpointPortFor() = %+v", got)
		}
	}
}
