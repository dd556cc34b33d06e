package subsets

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestTruncateSharesCapacityInProportion(t *testing.T) {
	tests := []struct {
		name                    string
		ready, notReady         []int // per subset
		wantReady, wantNotReady []int
		wantTruncated           bool
	}{
		{
			name: "no subsets",
		},
		{
			name:         "under capacity nothing changes",
			ready:        []int{50, 100, 100, 100, 100},
			notReady:     []int{50, 100, 100, 100, 100},
			wantReady:    []int{50, 100, 100, 100, 100},
			wantNotReady: []int{50, 100, 100, 100, 100},
		},
		{
			name:         "at capacity nothing changes",
			ready:        []int{100, 100, 100, 100, 100},
			notReady:     []int{100, 100, 100, 100, 100},
			wantReady:    []int{100, 100, 100, 100, 100},
			wantNotReady: []int{100, 100, 100, 100, 100},
		},
		{
			name:          "fewer ready than capacity keeps all ready and shares out the not ready",
			ready:         []int{90, 110, 50, 10, 20},
			notReady:      []int{101, 200, 200, 201, 298},
			wantReady:     []int{90, 110, 50, 10, 20},
			wantNotReady:  []int{73, 144, 144, 145, 214},
			wantTruncated: true,
		},
		{
			name:          "more ready than capacity shares out the ready and drops all not ready",
			ready:         []int{205, 400, 402, 400, 693},
			notReady:      []int{100, 200, 200, 200, 300},
			wantReady:     []int{98, 191, 192, 191, 328},
			wantNotReady:  []int{0, 0, 0, 0, 0},
			wantTruncated: true,
		},
		{
			name:          "one over capacity drops one not-ready address",
			ready:         []int{999},
			notReady:      []int{2},
			wantReady:     []int{999},
			wantNotReady:  []int{1},
			wantTruncated: true,
		},
		{
			name:          "exactly capacity ready drops every not-ready address",
			ready:         []int{1000},
			notReady:      []int{10},
			wantReady:     []int{1000},
			wantNotReady:  []int{0},
			wantTruncated: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var given []v1.EndpointSubset
			for i := range tc.ready {
				given = append(given, v1.EndpointSubset{
					Addresses:         make([]v1.EndpointAddress, tc.ready[i]),
					NotReadyAddresses: make([]v1.EndpointAddress, tc.notReady[i]),
				})
			}
			before := deepCopy(given)

			got, truncated := Truncate(given, 1000)

			if truncated != tc.wantTruncated {
				t.Errorf("truncated = %v, want %v", truncated, tc.wantTruncated)
			}
			for i, subset := range got {
				if len(subset.Addresses) != tc.wantReady[i] || len(subset.NotReadyAddresses) != tc.wantNotReady[i] {
					t.Errorf("subset %d has %d ready and %d not ready addresses, want %d and %d",
						i, len(subset.Addresses), len(subset.NotReadyAddresses), tc.wantReady[i], tc.wantNotReady[i])
				}
			}
			if !reflect.DeepEqual(given, before) {
				t.Error("Truncate modified its input")
			}
		})
	}
}

func TestTruncateKeepsTheFirstAddresses(t *testing.T) {
	var ready []v1.EndpointAddress
	for i := range 12 {
		ready = append(ready, v1.EndpointAddress{IP: fmt.Sprintf("10.0.0.%d", i)})
	}
	got, truncated := Truncate([]v1.EndpointSubset{{Addresses: ready}}, 10)
	if !truncated {
		t.Fatal("12 addresses were not truncated to 10")
	}
	if !reflect.DeepEqual(got[0].Addresses, ready[:10]) {
		t.Errorf("kept %v, want the first ten", got[0].Addresses)
	}
}

func TestTruncateNeverExceedsTheLimitAndPrefersReady(t *testing.T) {
	for _, limit := range []int{-1, 0, 1, 3, 7, 1000} {
		for _, shape := range [][2][]int{
			{{5, 5, 5}, {5, 5, 5}},
			{{0, 0, 1}, {9, 9, 9}},
			{{1, 1, 1}, {0, 0, 0}},
			{{1500, 1}, {3, 0}},
		} {
			var given []v1.EndpointSubset
			for i := range shape[0] {
				given = append(given, v1.EndpointSubset{
					Addresses:         make([]v1.EndpointAddress, shape[0][i]),
					NotReadyAddresses: make([]v1.EndpointAddress, shape[1][i]),
				})
			}
			readyBefore, notReadyBefore := Count(given)
			got, truncated := Truncate(given, limit)
			ready, notReady := Count(got)

			if want := min(readyBefore+notReadyBefore, max(limit, 0)); ready+notReady != want && truncated {
				t.Errorf("limit %d, shape %v: kept %d addresses, want %d", limit, shape, ready+notReady, want)
			}
			if !truncated && ready+notReady != readyBefore+notReadyBefore {
				t.Errorf("limit %d, shape %v: dropped addresses without reporting it", limit, shape)
			}
			if want := min(readyBefore, max(limit, 0)); ready != want {
				t.Errorf("limit %d, shape %v: kept %d ready addresses, want %d", limit, shape, ready, want)
			}
		}
	}
}

func deepCopy(subsets []v1.EndpointSubset) []v1.EndpointSubset {
	if subsets == nil {
		return nil
	}
	out := make([]v1.EndpointSubset, len(subsets))
	for i := range subsets {
		subsets[i].DeepCopyInto(&out[i])
	}
	return out
}
