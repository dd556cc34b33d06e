package podranking

import (
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fuzzCosts are deletion-cost annotations, valid and invalid ("" means none).
var fuzzCosts = []string{"", "0", "-1", "10", "+5", "010", "abc", "2147483648", "-7"}

// fuzzPhases are the phases an active pod can have.
var fuzzPhases = []v1.PodPhase{v1.PodPending, v1.PodUnknown, v1.PodRunning}

// fuzzTime maps a byte to a time before now, few enough distinct values that equal
// times and times in one log2 bucket are common; 255 is the zero time.
func fuzzTime(b byte) metav1.Time {
	if b == 255 {
		return metav1.Time{}
	}
	return metav1.NewTime(now.Add(-time.Duration(b%24) * 37 * time.Minute))
}

// podFromBytes builds a pod from 8 bytes, each deciding one attribute the order looks at.
func podFromBytes(i int, b []byte) (*v1.Pod, int) {
	ready := b[2]&1 == 1
	readySince := fuzzTime(b[3])
	p := pod("p"+strconv.Itoa(i), "", fuzzPhases[int(b[1])%len(fuzzPhases)], ready,
		int32(b[5]%3), int32(b[5]/3%3), readySince, fuzzTime(b[4]), fuzzCosts[int(b[2]>>1)%len(fuzzCosts)])
	if b[0]%4 != 0 {
		p.Spec.NodeName = "node-" + strconv.Itoa(int(b[0]%4))
	}
	p.UID = types.UID(string(rune('a' + b[7]%4)))
	return p, int(b[6] % 4)
}

// FuzzDeletionOrderIsAStrictWeakOrder checks, on three pods built from the input, that
// Less is irreflexive, asymmetric and transitive, and that "neither comes first" is
// transitive too: the properties sort.Sort relies on to put the same pods first
// whatever order the cache returned them in.
func FuzzDeletionOrderIsAStrictWeakOrder(f *testing.F) {
	f.Add([]byte{1, 2, 1, 3, 3, 0, 1, 0, 1, 2, 1, 4, 3, 0, 1, 1, 1, 2, 1, 3, 3, 0, 1, 2}, false)
	f.Add([]byte{0, 0, 0, 255, 255, 0, 0, 0, 1, 2, 1, 255, 5, 4, 2, 1, 2, 2, 3, 7, 7, 8, 3, 3}, true)
	f.Add([]byte{1, 2, 1, 10, 10, 0, 1, 0, 1, 2, 1, 10, 10, 1, 1, 1, 1, 2, 1, 11, 10, 0, 1, 2}, false)
	f.Fuzz(func(t *testing.T, data []byte, zeroNow bool) {
		const podBytes = 8
		data = append(data, make([]byte, 3*podBytes)...)[:3*podBytes]
		s := ActivePodsWithRanks{Now: now}
		if zeroNow {
			s.Now = metav1.Time{}
		}
		for i := range 3 {
			p, rank := podFromBytes(i, data[i*podBytes:(i+1)*podBytes])
			s.Pods = append(s.Pods, p)
			s.Rank = append(s.Rank, rank)
		}
		less := func(i, j int) bool { return s.Less(i, j) }
		equivalent := func(i, j int) bool { return !less(i, j) && !less(j, i) }
		describe := func() string {
			out := ""
			for i, p := range s.Pods {
				out += fmt.Sprintf("\n  %d: node %q phase %s ready %v since %v created %v cost %q rank %d restarts %v uid %s",
					i, p.Spec.NodeName, p.Status.Phase, len(p.Status.Conditions) > 0, readyTimeOf(p), p.CreationTimestamp.Time,
					p.Annotations[DeletionCostAnnotation], s.Rank[i], p.Status.ContainerStatuses, p.UID)
			}
			return out + fmt.Sprintf("\n  now %v", s.Now.Time)
		}
		for i := range 3 {
			if less(i, i) {
				t.Fatalf("pod %d comes before itself:%s", i, describe())
			}
			for j := range 3 {
				if less(i, j) && less(j, i) {
					t.Fatalf("pods %d and %d each come before the other:%s", i, j, describe())
				}
				for k := range 3 {
					if less(i, j) && less(j, k) && !less(i, k) {
						t.Fatalf("%d < %d < %d but not %d < %d:%s", i, j, k, i, k, describe())
					}
					if equivalent(i, j) && equivalent(j, k) && !equivalent(i, k) {
						t.Fatalf("%d ~ %d ~ %d but not %d ~ %d:%s", i, j, k, i, k, describe())
					}
				}
			}
		}
		// And sorting, which relies on the above, must not lose or duplicate a pod.
		pods := append([]*v1.Pod(nil), s.Pods...)
		sort.Sort(s)
		seen := map[*v1.Pod]bool{}
		for _, p := range s.Pods {
			seen[p] = true
		}
		for _, p := range pods {
			if !seen[p] {
				t.Fatalf("sorting lost pod %s", p.Name)
			}
		}
	})
}

func readyTimeOf(p *v1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
