package subsets

import (
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Count returns the number of ready and not-ready addresses in subsets.
func Count(subsets []v1.EndpointSubset) (ready, notReady int) {
	for _, subset := range subsets {
		ready += len(subset.Addresses)
		notReady += len(subset.NotReadyAddresses)
	}
	return ready, notReady
}

// Truncate returns subsets cut down to at most limit addresses in total, and whether it had
// to drop any. Ready addresses take priority, and the cut is spread over the subsets in
// proportion to their size, the way upstream's truncateEndpoints does it:
//
//   - more than limit ready addresses: every subset keeps ceil(its share of ready addresses
//     × limit) of them, as long as the total allows, and loses all not-ready ones;
//   - otherwise: every ready address stays and the not-ready ones are shared out the same
//     way among the limit−ready free places.
//
// Rounding up means the last subsets may get less than their share. Within a subset the
// first addresses are kept, so truncating repacked subsets drops the highest IPs. The input
// is not modified; a negative limit counts as 0.
func Truncate(subsets []v1.EndpointSubset, limit int) ([]v1.EndpointSubset, bool) {
	limit = max(limit, 0)
	totalReady, totalNotReady := Count(subsets)
	if totalReady+totalNotReady <= limit {
		return subsets, false
	}

	truncateReady := totalReady > limit
	budget, total := limit-totalReady, totalNotReady
	if truncateReady {
		budget, total = limit, totalReady
	}
	left := budget

	result := slices.Clone(subsets)
	for i := range result {
		subset := &result[i]
		inSubset := len(subset.NotReadyAddresses)
		if truncateReady {
			inSubset = len(subset.Addresses)
		}
		// Upstream computes the share in floating point; doing the same keeps the
		// rounding identical in the cases where an exact integer ceiling would differ.
		share := min(int(math.Ceil(float64(inSubset)/float64(total)*float64(budget))), left)
		if truncateReady {
			subset.Addresses = firstN(subset.Addresses, share)
			subset.NotReadyAddresses = []v1.EndpointAddress{}
			left -= len(subset.Addresses)
		} else {
			subset.NotReadyAddresses = firstN(subset.NotReadyAddresses, share)
			left -= len(subset.NotReadyAddresses)
		}
	}
	return result, true
}

// firstN returns a copy of the first n addresses, or all of them if there are fewer.
func firstN(addresses []v1.EndpointAddress, n int) []v1.EndpointAddress {
	if len(addresses) <= n {
		return addresses
	}
	return slices.Clone(addresses[:n])
}
