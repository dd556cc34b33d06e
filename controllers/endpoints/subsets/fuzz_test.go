package subsets

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// subsetsFromBytes builds subsets from fuzz input, drawing IPs, UIDs and ports from small
// pools so that duplicates, shared ports and readiness conflicts are common.
func subsetsFromBytes(data []byte) []v1.EndpointSubset {
	ips := []string{"1.2.3.4", "1.2.3.5", "10.0.0.1", "beef::1", "", "not-an-ip"}
	uids := []types.UID{"", "a", "b"}
	portPool := []v1.EndpointPort{
		{Port: 80}, {Port: 80, Protocol: v1.ProtocolUDP}, {Name: "http", Port: 8080, Protocol: v1.ProtocolTCP, AppProtocol: new("http")},
		{Port: 0}, {Port: -1}, {Name: "x", Port: 1},
	}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	address := func() v1.EndpointAddress {
		b := next()
		addr := v1.EndpointAddress{IP: ips[b%len(ips)]}
		if b&0x40 != 0 {
			addr.TargetRef = &v1.ObjectReference{Kind: "Pod", UID: uids[(b>>3)%len(uids)]}
		}
		if b&0x80 != 0 {
			addr.Hostname = "h"
		}
		return addr
	}
	var result []v1.EndpointSubset
	for len(data) > 0 {
		shape := next()
		subset := v1.EndpointSubset{}
		for range shape % 4 {
			subset.Addresses = append(subset.Addresses, address())
		}
		for range (shape >> 2) % 3 {
			subset.NotReadyAddresses = append(subset.NotReadyAddresses, address())
		}
		for range (shape >> 4) % 4 {
			subset.Ports = append(subset.Ports, portPool[next()%len(portPool)])
		}
		result = append(result, subset)
	}
	return result
}

type pair struct {
	key  addressKey
	port portKey
}

// readiness maps every (address, port) pair with a real port (or no port at all) to
// whether it is ready, not ready winning.
func readiness(subsets []v1.EndpointSubset) map[pair]bool {
	result := map[pair]bool{}
	note := func(addr v1.EndpointAddress, port portKey, ready bool) {
		p := pair{keyOf(&addr), port}
		if was, seen := result[p]; !seen || was {
			result[p] = ready
		}
	}
	for _, subset := range subsets {
		ports := []portKey{{port: noPort}}
		if len(subset.Ports) > 0 {
			ports = nil
			for _, port := range subset.Ports {
				ports = append(ports, portKeyOf(port))
			}
		}
		for _, port := range ports {
			if port.port < 1 {
				port = portKey{port: noPort}
			}
			for _, addr := range subset.Addresses {
				note(addr, port, true)
			}
			for _, addr := range subset.NotReadyAddresses {
				note(addr, port, false)
			}
		}
	}
	return result
}

// validPorts reports whether every port is one the API accepts (numbered from 1).
func validPorts(subsets []v1.EndpointSubset) bool {
	for _, subset := range subsets {
		for _, port := range subset.Ports {
			if port.Port < 1 {
				return false
			}
		}
	}
	return true
}

func FuzzRepack(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x15, 1, 2, 0x43, 0x2a, 3, 0x81})
	f.Add([]byte{0xff, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x01, 0x02, 0x03})
	f.Fuzz(func(t *testing.T, data []byte) {
		given := subsetsFromBytes(data)
		before := deepCopy(given)

		once := Repack(given)

		if !reflect.DeepEqual(given, before) {
			t.Fatal("Repack modified its input")
		}
		if twice := Repack(once); validPorts(given) && !reflect.DeepEqual(once, twice) {
			t.Fatalf("Repack is not idempotent:\n%v\n%v", once, twice)
		}
		for _, subset := range once {
			if len(subset.Addresses)+len(subset.NotReadyAddresses) == 0 {
				t.Fatalf("Repack returned a subset without addresses: %v", once)
			}
		}
		// Every pair keeps its readiness, except that a pair only seen without a real
		// port disappears when the same address has a real port in the same group; so
		// compare the pairs with real ports exactly and the portless ones by address.
		want, got := readiness(given), readiness(once)
		for p, ready := range want {
			if p.port.port == noPort {
				continue
			}
			if gotReady, ok := got[p]; !ok || gotReady != ready {
				t.Fatalf("pair %+v: ready=%v present=%v, want ready=%v\ninput %v\noutput %v", p, gotReady, ok, ready, given, once)
			}
		}
		for p := range got {
			if _, ok := want[p]; !ok && p.port.port != noPort {
				t.Fatalf("Repack invented pair %+v", p)
			}
		}
	})
}

func FuzzTruncate(f *testing.F) {
	f.Add([]byte{10, 3, 5, 200, 1}, 7)
	f.Add([]byte{255, 255, 255}, 1000)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, sizes []byte, limit int) {
		limit %= 2000
		var given []v1.EndpointSubset
		for i := 0; i+1 < len(sizes); i += 2 {
			given = append(given, v1.EndpointSubset{
				Addresses:         make([]v1.EndpointAddress, int(sizes[i])*3),
				NotReadyAddresses: make([]v1.EndpointAddress, int(sizes[i+1])*3),
			})
		}
		readyBefore, notReadyBefore := Count(given)

		got, truncated := Truncate(given, limit)

		ready, notReady := Count(got)
		if r, n := Count(given); r != readyBefore || n != notReadyBefore {
			t.Fatal("Truncate modified its input")
		}
		if len(got) != len(given) {
			t.Fatalf("Truncate returned %d subsets for %d", len(got), len(given))
		}
		if truncated != (readyBefore+notReadyBefore > max(limit, 0)) {
			t.Fatalf("truncated=%v for %d addresses and limit %d", truncated, readyBefore+notReadyBefore, limit)
		}
		if want := min(readyBefore+notReadyBefore, max(limit, 0)); truncated && ready+notReady != want {
			t.Fatalf("kept %d addresses, want %d", ready+notReady, want)
		}
		if want := min(readyBefore, max(limit, 0)); ready != want {
			t.Fatalf("kept %d ready addresses, want %d", ready, want)
		}
	})
}
