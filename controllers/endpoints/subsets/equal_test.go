package subsets

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestEqualIgnoringResourceVersion(t *testing.T) {
	base := func() []v1.EndpointSubset {
		return []v1.EndpointSubset{
			{
				Addresses:         []v1.EndpointAddress{{IP: "1.1.1.1", TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "pod1-1", Namespace: "ns", ResourceVersion: "1"}}},
				NotReadyAddresses: []v1.EndpointAddress{{IP: "1.1.1.2", TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "pod1-2", Namespace: "ns", ResourceVersion: "2"}}},
				Ports:             []v1.EndpointPort{{Port: 8081, Protocol: v1.ProtocolTCP}},
			},
			{
				Addresses:         []v1.EndpointAddress{{IP: "2.2.2.1", TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "pod2-1", Namespace: "ns", ResourceVersion: "3"}}},
				NotReadyAddresses: []v1.EndpointAddress{{IP: "2.2.2.2", TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "pod2-2", Namespace: "ns", ResourceVersion: "4"}}},
				Ports:             []v1.EndpointPort{{Port: 8082, Protocol: v1.ProtocolTCP}},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func([]v1.EndpointSubset) []v1.EndpointSubset
		want   bool
	}{
		{"identical", func(s []v1.EndpointSubset) []v1.EndpointSubset { return s }, true},
		{"a subset removed", func(s []v1.EndpointSubset) []v1.EndpointSubset { return s[:1] }, false},
		{"a ready IP changed", func(s []v1.EndpointSubset) []v1.EndpointSubset { s[0].Addresses[0].IP = "1.1.1.10"; return s }, false},
		{"a not-ready IP changed", func(s []v1.EndpointSubset) []v1.EndpointSubset { s[1].NotReadyAddresses[0].IP = "2.2.2.10"; return s }, false},
		{"a pod resourceVersion changed", func(s []v1.EndpointSubset) []v1.EndpointSubset {
			s[1].Addresses[0].TargetRef.ResourceVersion = "100"
			return s
		}, true},
		{"a pod resourceVersion removed", func(s []v1.EndpointSubset) []v1.EndpointSubset {
			s[1].Addresses[0].TargetRef.ResourceVersion = ""
			return s
		}, true},
		{"a pod UID changed", func(s []v1.EndpointSubset) []v1.EndpointSubset { s[1].Addresses[0].TargetRef.UID = "other"; return s }, false},
		{"a targetRef removed", func(s []v1.EndpointSubset) []v1.EndpointSubset { s[1].Addresses[0].TargetRef = nil; return s }, false},
		{"a port changed", func(s []v1.EndpointSubset) []v1.EndpointSubset { s[1].Ports[0].Port = 8081; return s }, false},
		{"a nodeName set", func(s []v1.EndpointSubset) []v1.EndpointSubset { s[0].Addresses[0].NodeName = new(""); return s }, false},
		{"empty not-ready list instead of nil", func(s []v1.EndpointSubset) []v1.EndpointSubset {
			s[0].NotReadyAddresses = nil
			s = append(s, v1.EndpointSubset{})
			return s
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EqualIgnoringResourceVersion(base(), tc.mutate(base())); got != tc.want {
				t.Errorf("EqualIgnoringResourceVersion() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEqualIgnoringResourceVersionTreatsNilAndEmptyAlike(t *testing.T) {
	if !EqualIgnoringResourceVersion(nil, []v1.EndpointSubset{}) {
		t.Error("nil and empty subsets differ")
	}
	a := []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: nil}}
	b := []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "1.2.3.4"}}, Ports: []v1.EndpointPort{}, NotReadyAddresses: []v1.EndpointAddress{}}}
	if !EqualIgnoringResourceVersion(a, b) {
		t.Error("nil and empty ports or address lists differ")
	}
}
