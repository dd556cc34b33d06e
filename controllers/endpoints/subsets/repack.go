// Package subsets holds the pure functions that put core/v1 Endpoints subsets into their
// canonical form, compare them and cut them down to capacity. None of them reads or
// writes anything but its arguments, and none of them modifies its input (except Sort,
// which says so), so they can be tested and fuzzed on their own.
//
// The canonical form is upstream's (k8s.io/kubernetes pkg/api/v1/endpoints.RepackSubsets):
// one subset per distinct set of addresses, each subset carrying every port that exactly
// that set of addresses serves, with addresses sorted by IP and pod UID and ports and
// subsets sorted by the FNV-128a hash of their spew dump. Matching the order byte for byte
// matters: an Endpoints object written by upstream's controller must compare equal to ours,
// or a takeover from kube-controller-manager would rewrite every Endpoints in the cluster.
package subsets

import (
	"bytes"
	"cmp"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/dump"
)

// noPort stands in for the port of a subset that has none (a headless Service without
// ports), so that its addresses are grouped like any other. Like every port number below 1
// it never appears in the output.
const noPort = -1

// addressKey identifies an address. Two addresses with the same IP but different pods
// (hostNetwork pods on one node, say) are distinct; a missing targetRef counts as UID "".
type addressKey struct {
	ip  string
	uid types.UID
}

func keyOf(addr *v1.EndpointAddress) addressKey {
	key := addressKey{ip: addr.IP}
	if addr.TargetRef != nil {
		key.uid = addr.TargetRef.UID
	}
	return key
}

// portKey identifies a port by value. (Upstream keys a map by v1.EndpointPort itself, so
// equal appProtocol strings behind different pointers count as different ports there; for
// the subsets this controller builds, where every address of one Service port shares the
// same pointer, the two are the same.)
type portKey struct {
	name           string
	port           int32
	protocol       v1.Protocol
	hasAppProtocol bool
	appProtocol    string
}

func portKeyOf(port v1.EndpointPort) portKey {
	key := portKey{name: port.Name, port: port.Port, protocol: port.Protocol}
	if port.AppProtocol != nil {
		key.hasAppProtocol = true
		key.appProtocol = *port.AppProtocol
	}
	return key
}

// portAddresses records which addresses serve one port and whether each is ready there.
type portAddresses struct {
	port  v1.EndpointPort
	ready map[addressKey]bool
}

// Repack returns subsets in canonical form: it expands them to (address, port, ready)
// triples and packs those again. Duplicate addresses (same IP and pod UID) are merged and
// the first occurrence's fields win; an address that is not ready for a port in any input
// subset is not ready for that port in the result. Ports numbered below 1 are dropped but
// their addresses are kept, so a headless Service without ports keeps its addresses. The
// result is newly allocated and shares nothing with the input.
//
// Repacking a result again changes nothing, unless the input had ports numbered below 1
// (which the API rejects): like upstream, each such port groups its addresses on its own
// before it is dropped, so they may end up in several portless subsets the first time.
func Repack(subsets []v1.EndpointSubset) []v1.EndpointSubset {
	addresses := map[addressKey]*v1.EndpointAddress{}
	byPort := map[portKey]*portAddresses{}

	record := func(addr *v1.EndpointAddress, port v1.EndpointPort, ready bool) {
		key := keyOf(addr)
		if _, seen := addresses[key]; !seen {
			addresses[key] = addr.DeepCopy()
		}
		pk := portKeyOf(port)
		pa := byPort[pk]
		if pa == nil {
			pa = &portAddresses{port: *port.DeepCopy(), ready: map[addressKey]bool{}}
			byPort[pk] = pa
		}
		// Not ready wins: once an address was seen not ready for a port it stays so.
		if wasReady, seen := pa.ready[key]; !seen || wasReady {
			pa.ready[key] = ready
		}
	}
	for i := range subsets {
		subset := &subsets[i]
		ports := subset.Ports
		if len(ports) == 0 {
			ports = []v1.EndpointPort{{Port: noPort}}
		}
		for _, port := range ports {
			for j := range subset.Addresses {
				record(&subset.Addresses[j], port, true)
			}
			for j := range subset.NotReadyAddresses {
				record(&subset.NotReadyAddresses[j], port, false)
			}
		}
	}

	// Ports served by exactly the same addresses, with the same readiness, share a subset.
	type group struct {
		ready map[addressKey]bool
		keys  []addressKey // ready's keys in order
		ports []v1.EndpointPort
	}
	groups := map[string]*group{}
	for _, pa := range byPort {
		keys := sortedKeys(pa.ready)
		key := addressSetKey(keys, pa.ready)
		g := groups[key]
		if g == nil {
			g = &group{ready: pa.ready, keys: keys}
			groups[key] = g
		}
		if pa.port.Port > 0 {
			g.ports = append(g.ports, pa.port)
		}
	}

	result := make([]v1.EndpointSubset, 0, len(groups))
	for _, g := range groups {
		// Nil (not empty) slices where a list has no entries: the sort hash below sees
		// the difference, and upstream produces nil here.
		var ready, notReady []v1.EndpointAddress
		// In Sort's order already (keys are unique, and a missing targetRef is UID ""),
		// so that its stable sort below finds nothing to move.
		for _, key := range g.keys {
			isReady := g.ready[key]
			addr := *addresses[key].DeepCopy()
			if isReady {
				ready = append(ready, addr)
			} else {
				notReady = append(notReady, addr)
			}
		}
		result = append(result, v1.EndpointSubset{Addresses: ready, NotReadyAddresses: notReady, Ports: g.ports})
	}
	return Sort(result)
}

// sortedKeys returns the keys of set by IP, then pod UID.
func sortedKeys(set map[addressKey]bool) []addressKey {
	return slices.SortedFunc(maps.Keys(set), func(a, b addressKey) int {
		return cmp.Or(strings.Compare(a.ip, b.ip), strings.Compare(string(a.uid), string(b.uid)))
	})
}

// addressSetKey encodes a set of addresses with their readiness, given its keys in
// order, as a string that is equal for equal sets. Each IP and UID is written after
// its length, which keeps the encoding unambiguous whatever they hold, as quoting them
// did before at more than half of the key's cost.
func addressSetKey(keys []addressKey, set map[addressKey]bool) string {
	size := 0
	for _, key := range keys {
		size += len(key.ip) + len(key.uid) + 8
	}
	b := make([]byte, 0, size)
	for _, key := range keys {
		b = strconv.AppendInt(b, int64(len(key.ip)), 10)
		b = append(append(b, ':'), key.ip...)
		b = strconv.AppendInt(b, int64(len(key.uid)), 10)
		b = append(append(b, ':'), key.uid...)
		if set[key] {
			b = append(b, 'r')
		} else {
			b = append(b, 'n')
		}
	}
	return string(b)
}

// Sort sorts subsets in place into upstream's canonical order and returns them: addresses
// by IP bytes, then pod UID (an address without targetRef first); ports and subsets by the
// hash of their dump.
func Sort(subsets []v1.EndpointSubset) []v1.EndpointSubset {
	for i := range subsets {
		subset := &subsets[i]
		slices.SortStableFunc(subset.Addresses, compareAddresses)
		slices.SortStableFunc(subset.NotReadyAddresses, compareAddresses)
		sortByHash(subset.Ports)
	}
	sortByHash(subsets)
	return subsets
}

// compareAddresses orders addresses like upstream's LessEndpointAddress.
func compareAddresses(a, b v1.EndpointAddress) int {
	if c := strings.Compare(a.IP, b.IP); c != 0 { // byte order, as bytes.Compare
		return c
	}
	switch {
	case a.TargetRef == nil && b.TargetRef == nil:
		return 0
	case a.TargetRef == nil:
		return -1
	case b.TargetRef == nil:
		return 1
	}
	return strings.Compare(string(a.TargetRef.UID), string(b.TargetRef.UID))
}

// sortByHash sorts items by the FNV-128a hash of their spew dump, as upstream does. Each
// hash is computed once rather than once per comparison: dumping is the expensive part.
func sortByHash[T any](items []T) {
	if len(items) < 2 {
		return
	}
	type hashed struct {
		hash []byte
		item T
	}
	tmp := make([]hashed, len(items))
	for i := range items {
		tmp[i] = hashed{hash: hashOf(items[i]), item: items[i]}
	}
	slices.SortStableFunc(tmp, func(a, b hashed) int { return bytes.Compare(a.hash, b.hash) })
	for i := range tmp {
		items[i] = tmp[i].item
	}
}

// hashOf is upstream's hashutil.DeepHashObject with an FNV-128a hasher.
func hashOf(obj any) []byte {
	hasher := fnv.New128a()
	// The apimachinery wrapper is deprecated in favour of k8s.io/utils/dump, which is not
	// one of our allowed dependencies; both print exactly the same bytes, which is all
	// that matters for the order.
	hasher.Write([]byte(dump.ForHash(obj)))
	return hasher.Sum(nil)
}
