package subsets

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/utils/ptr"
)

func podRef(uid string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)}
}

func addrs(ips ...string) []v1.EndpointAddress {
	var out []v1.EndpointAddress
	for _, ip := range ips {
		out = append(out, v1.EndpointAddress{IP: ip})
	}
	return out
}

func ports(numbers ...int32) []v1.EndpointPort {
	var out []v1.EndpointPort
	for _, n := range numbers {
		out = append(out, v1.EndpointPort{Port: n})
	}
	return out
}

func TestRepackMergesDeduplicatesAndSorts(t *testing.T) {
	fooRef := &v1.ObjectReference{Name: "foo"}
	barRef := &v1.ObjectReference{Name: "bar"}

	tests := []struct {
		name  string
		given []v1.EndpointSubset
		want  []v1.EndpointSubset
	}{
		{
			name:  "a subset without addresses or ports disappears",
			given: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{}, Ports: []v1.EndpointPort{}}},
			want:  []v1.EndpointSubset{},
		},
		{
			name:  "a port without addresses disappears",
			given: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{}, Ports: ports(111)}},
			want:  []v1.EndpointSubset{},
		},
		{
			name:  "ready addresses without ports are kept with nil ports",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: []v1.EndpointPort{}}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4")}},
		},
		{
			name:  "not-ready addresses without ports are kept with nil ports",
			given: []v1.EndpointSubset{{NotReadyAddresses: addrs("1.2.3.4"), Ports: []v1.EndpointPort{}}},
			want:  []v1.EndpointSubset{{NotReadyAddresses: addrs("1.2.3.4")}},
		},
		{
			name:  "ports below 1 are dropped but their addresses stay",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(0)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4")}},
		},
		{
			name:  "one ready IPv4 address and one port",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "one ready IPv6 address and one port",
			given: []v1.EndpointSubset{{Addresses: addrs("beef::1:2:3:4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("beef::1:2:3:4"), Ports: ports(111)}},
		},
		{
			name:  "one not-ready address and one port",
			given: []v1.EndpointSubset{{NotReadyAddresses: addrs("1.2.3.4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{NotReadyAddresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "an address with a pod UID",
			given: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)}},
		},
		{
			name:  "a not-ready address with an empty pod UID",
			given: []v1.EndpointSubset{{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("")}}, Ports: ports(111)}},
			want:  []v1.EndpointSubset{{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("")}}, Ports: ports(111)}},
		},
		{
			name:  "ready and not-ready addresses share a subset",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), NotReadyAddresses: addrs("5.6.7.8"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), NotReadyAddresses: addrs("5.6.7.8"), Ports: ports(111)}},
		},
		{
			name:  "an address both ready and not ready is not ready",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), NotReadyAddresses: addrs("1.2.3.4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{NotReadyAddresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "two ports of one address",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111, 222)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111, 222)}},
		},
		{
			name:  "duplicate IPv4 addresses merge",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4", "1.2.3.4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "duplicate IPv6 addresses merge",
			given: []v1.EndpointSubset{{Addresses: addrs("beef::1", "beef::1"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("beef::1"), Ports: ports(111)}},
		},
		{
			name: "duplicates with the same UID keep the first targetRef",
			given: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: fooRef}, {IP: "1.2.3.4", TargetRef: barRef}},
				Ports:     ports(111),
			}},
			want: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: fooRef}}, Ports: ports(111)}},
		},
		{
			name: "a duplicate seen ready then not ready keeps the first fields and is not ready",
			given: []v1.EndpointSubset{{
				Addresses:         []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: fooRef}},
				NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: barRef}},
				Ports:             ports(111),
			}},
			want: []v1.EndpointSubset{{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: fooRef}}, Ports: ports(111)}},
		},
		{
			name:  "duplicate ports merge",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111, 111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "identical subsets merge",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}, {Addresses: addrs("1.2.3.4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "the same address and port ready in one subset and not ready in another is not ready",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}, {NotReadyAddresses: addrs("1.2.3.4"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{NotReadyAddresses: addrs("1.2.3.4"), Ports: ports(111)}},
		},
		{
			name:  "one address in two subsets with different ports becomes one subset",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}, {Addresses: addrs("1.2.3.4"), Ports: ports(222)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111, 222)}},
		},
		{
			name: "readiness per port keeps subsets apart",
			given: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(222)},
			},
			want: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(222)},
			},
		},
		{
			name:  "two addresses on one port join",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}, {Addresses: addrs("5.6.7.8"), Ports: ports(111)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4", "5.6.7.8"), Ports: ports(111)}},
		},
		{
			name: "one IP for two pods is two addresses",
			given: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-2")}}, Ports: ports(111)},
			},
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}, {IP: "1.2.3.4", TargetRef: podRef("uid-2")}},
				Ports:     ports(111),
			}},
		},
		{
			name: "an address without targetRef sorts before one with the same IP",
			given: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{{IP: "5.6.7.8"}}, Ports: ports(111)},
				{Addresses: []v1.EndpointAddress{{IP: "5.6.7.8", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: ports(111)},
			},
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{
					{IP: "1.2.3.4"}, {IP: "1.2.3.4", TargetRef: podRef("uid-1")},
					{IP: "5.6.7.8"}, {IP: "5.6.7.8", TargetRef: podRef("uid-1")},
				},
				Ports: ports(111),
			}},
		},
		{
			name: "mixed readiness on one port ends up split between the address lists",
			given: []v1.EndpointSubset{
				{Addresses: []v1.EndpointAddress{{IP: "5.6.7.8"}}, Ports: ports(111)},
				{NotReadyAddresses: []v1.EndpointAddress{{IP: "5.6.7.8", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4", TargetRef: podRef("uid-1")}}, Ports: ports(111)},
				{NotReadyAddresses: []v1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: ports(111)},
			},
			want: []v1.EndpointSubset{{
				Addresses: []v1.EndpointAddress{{IP: "5.6.7.8"}},
				NotReadyAddresses: []v1.EndpointAddress{
					{IP: "1.2.3.4"}, {IP: "1.2.3.4", TargetRef: podRef("uid-1")}, {IP: "5.6.7.8", TargetRef: podRef("uid-1")},
				},
				Ports: ports(111),
			}},
		},
		{
			name:  "different addresses on different ports stay apart",
			given: []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}, {Addresses: addrs("5.6.7.8"), Ports: ports(222)}},
			want:  []v1.EndpointSubset{{Addresses: addrs("1.2.3.4"), Ports: ports(111)}, {Addresses: addrs("5.6.7.8"), Ports: ports(222)}},
		},
		{
			name: "jumbled subsets regroup by address set",
			given: []v1.EndpointSubset{
				{Addresses: addrs("1.2.3.4"), Ports: ports(111)},
				{NotReadyAddresses: addrs("1.2.3.5"), Ports: ports(222)},
				{Addresses: addrs("1.2.3.6"), Ports: ports(111)},
				{NotReadyAddresses: addrs("1.2.3.5"), Ports: ports(333)},
			},
			want: []v1.EndpointSubset{
				{Addresses: addrs("1.2.3.4", "1.2.3.6"), Ports: ports(111)},
				{NotReadyAddresses: addrs("1.2.3.5"), Ports: ports(222, 333)},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Repack(tc.given)
			if want := Sort(tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("Repack() =\n%s\nwant\n%s", dump.Pretty(got), dump.Pretty(want))
			}
		})
	}
}

// TestSortMatchesUpstreamHashOrder pins orders that upstream's own tests expect, so a
// change in how we hash (and so a mass rewrite of Endpoints after a takeover from
// kube-controller-manager) cannot go unnoticed.
func TestSortMatchesUpstreamHashOrder(t *testing.T) {
	got := Sort([]v1.EndpointSubset{{
		Addresses: addrs("1.2.3.4"),
		Ports:     []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}, {Port: 8080, Protocol: v1.ProtocolUDP}},
	}})
	want := []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolUDP}, {Port: 8080, Protocol: v1.ProtocolTCP}}
	if !reflect.DeepEqual(got[0].Ports, want) {
		t.Errorf("ports sorted as %v, upstream sorts them as %v", got[0].Ports, want)
	}
}

func TestRepackDoesNotShareMemoryWithItsInput(t *testing.T) {
	nodeName := "node-1"
	given := []v1.EndpointSubset{{
		Addresses: []v1.EndpointAddress{{IP: "1.2.3.4", NodeName: &nodeName, TargetRef: podRef("uid-1")}},
		Ports:     []v1.EndpointPort{{Port: 80, AppProtocol: new("http")}},
	}}
	before := given[0].DeepCopy()

	got := Repack(given)
	*got[0].Addresses[0].NodeName = "changed"
	got[0].Addresses[0].TargetRef.Name = "changed"
	*got[0].Ports[0].AppProtocol = "changed"

	if !reflect.DeepEqual(given[0], *before) {
		t.Errorf("changing Repack's result changed its input: %s", dump.Pretty(given))
	}
}

func TestRepackIsIdempotent(t *testing.T) {
	given := []v1.EndpointSubset{
		{Addresses: addrs("10.0.0.3", "10.0.0.1"), NotReadyAddresses: addrs("10.0.0.2"), Ports: ports(80, 443)},
		{Addresses: addrs("10.0.0.1"), Ports: ports(8080)},
		{NotReadyAddresses: addrs("10.0.0.9")},
	}
	once := Repack(given)
	twice := Repack(once)
	if !reflect.DeepEqual(once, twice) {
		t.Errorf("Repack(Repack(x)) != Repack(x):\n%s\n%s", dump.Pretty(once), dump.Pretty(twice))
	}
}

// BenchmarkRepackAService repacks what the Endpoints controller builds for a Service of
// 300 pods with one port, a third of them not ready: one subset per pod, as the
// controller adds them, into one subset.
func BenchmarkRepackAService(b *testing.B) {
	var given []v1.EndpointSubset
	for i := range 300 {
		addr := v1.EndpointAddress{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250), NodeName: ptr.To(fmt.Sprintf("node-%d", i%10)),
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		subset := v1.EndpointSubset{Ports: []v1.EndpointPort{{Name: "http", Port: 8080, Protocol: v1.ProtocolTCP}}}
		if i%3 == 0 {
			subset.NotReadyAddresses = []v1.EndpointAddress{addr}
		} else {
			subset.Addresses = []v1.EndpointAddress{addr}
		}
		given = append(given, subset)
	}
	b.ReportAllocs()
	for b.Loop() {
		Repack(given)
	}
}
