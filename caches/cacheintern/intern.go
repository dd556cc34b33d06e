// Package cacheintern makes the pods of the shared informer cache share what they
// hold alike. Pods of one ReplicaSet carry the same labels, owner reference and
// containers, pods on one node the same node name, every pod of a namespace its name;
// decoded, each pod holds copies of its own. An Interner replaces a cached pod's copies
// with ones it already gave an earlier pod of the same content: strings, the labels
// map, the owner references, the containers (trimmed to what the controllers read,
// they are the same for every pod of a template) and the container statuses (the same
// for every Ready pod that never restarted). The pod reads the same; it only holds
// less memory of its own (test/bench/results/podmem.md measures how much).
//
// Sharing is safe because cached objects are read-only: a controller that changes one
// must DeepCopy it first, which copies what is shared too. Values are compared by
// content, through their protobuf encoding for the API structs, which does not tell a
// nil slice or map from an empty one; no controller does either.
//
// What is interned is chosen to repeat across pods by construction (per template, per
// owner, per node, per namespace), so that the tables stay small; a per-pod value
// (name, UID, IPs, condition times) is left alone.
//
// The tables forget what no pod was given lately, so that owners and templates that
// are gone (every finished Job, every replaced ReplicaSet) do not stay in them: each
// table has a young and an old generation; a value found in the old one moves to the
// young one, and every generation (10 minutes), or when the young one reaches
// maxEntries, the old one is dropped and the young one becomes old. A value no pod was
// given for two generations is forgotten. Forgetting costs sharing, never
// correctness: the pods keep what they were given, and the next pod of that content
// starts a new shared copy. Before the tables forgot, 32 000 ReplicaSets created and
// deleted left 26 MB in them (TestChurnedOwnersAreForgotten logs the figure for
// 5 000).
package cacheintern

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxEntries bounds each generation of each table of an Interner: a cluster with more
// distinct label sets, owners or templates than this shares less, and the tables stay
// within a few MB.
const maxEntries = 1 << 15

// generation is how long a table's young generation lasts: a value no pod was given
// for two of them is forgotten.
const generation = 10 * time.Minute

// Interner hands out shared copies of what pods hold alike. It is safe for concurrent
// use; its zero value is not usable, call New.
type Interner struct {
	mu              sync.Mutex
	strings         table[string]
	labels          table[map[string]string]
	owners          table[[]metav1.OwnerReference]
	containers      table[[]v1.Container]
	initContainers  table[[]v1.Container]
	statuses        table[[]v1.ContainerStatus]
	initStatuses    table[[]v1.ContainerStatus]
	buf             []byte
	sortedLabelKeys []string
	// now is the clock of the generations (time.Now; tests replace it), born when
	// the young ones began; pods counts the pods interned, so that the clock is read
	// only every agingCheck of them.
	now  func() time.Time
	born time.Time
	pods uint64
}

// agingCheck is how many pods an Interner interns between two readings of its clock
// (a reading costs as much as a tenth of a pod's interning on some machines).
const agingCheck = 256

// New returns an empty Interner.
func New() *Interner {
	return &Interner{
		now:            time.Now,
		born:           time.Now(),
		strings:        newTable[string](),
		labels:         newTable[map[string]string](),
		owners:         newTable[[]metav1.OwnerReference](),
		containers:     newTable[[]v1.Container](),
		initContainers: newTable[[]v1.Container](),
		statuses:       newTable[[]v1.ContainerStatus](),
		initStatuses:   newTable[[]v1.ContainerStatus](),
	}
}

// table maps a value's content (its key) to the copy every pod gets, in two
// generations: what pods were given lately (young) and before (old).
type table[T any] struct{ young, old map[string]T }

func newTable[T any]() table[T] { return table[T]{young: map[string]T{}, old: map[string]T{}} }

// get returns the shared copy of the value whose key is key, if the table remembers
// one, moving it to the young generation. Looking up with string(key) does not
// allocate.
func (t *table[T]) get(key []byte) (T, bool) {
	if shared, ok := t.young[string(key)]; ok {
		return shared, true
	}
	shared, ok := t.old[string(key)]
	if ok {
		t.add(string(key), shared)
	}
	return shared, ok
}

// intern returns the shared copy of the value whose key is key, making value the
// shared copy if there is none.
func (t *table[T]) intern(key []byte, value T) T {
	if shared, ok := t.get(key); ok {
		return shared
	}
	t.add(string(key), value)
	return value
}

// add puts value in the young generation under key, ending the generation first if
// it is full.
func (t *table[T]) add(key string, value T) {
	if len(t.young) >= maxEntries {
		t.age()
	}
	t.young[key] = value
}

// age ends a generation: the old one is forgotten, the young one becomes old.
func (t *table[T]) age() { t.old, t.young = t.young, map[string]T{} }

// len is the number of values the table remembers.
func (t *table[T]) len() int { return len(t.young) + len(t.old) }

// age ends every table's generation when it has lasted long enough.
func (in *Interner) age() {
	now := in.now()
	if now.Sub(in.born) < generation {
		return
	}
	in.born = now
	in.strings.age()
	in.labels.age()
	in.owners.age()
	in.containers.age()
	in.initContainers.age()
	in.statuses.age()
	in.initStatuses.age()
}

// Pod replaces what pod holds alike with other pods by shared copies. The pod must
// not be shared yet: the informers' transform receives each object freshly decoded.
func (in *Interner) Pod(pod *v1.Pod) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pods++; in.pods%agingCheck == 0 {
		in.age()
	}
	s := in.string
	pod.Namespace = s(pod.Namespace)
	pod.GenerateName = s(pod.GenerateName)
	pod.Labels = in.labelsOf(pod.Labels)
	pod.OwnerReferences = in.ownersOf(pod.OwnerReferences)
	pod.Finalizers = internEach(pod.Finalizers, s)
	pod.Spec.NodeName = s(pod.Spec.NodeName)
	pod.Spec.Hostname = s(pod.Spec.Hostname)
	pod.Spec.Subdomain = s(pod.Spec.Subdomain)
	pod.Spec.Containers = internSlice(in, &in.containers, pod.Spec.Containers)
	pod.Spec.InitContainers = internSlice(in, &in.initContainers, pod.Spec.InitContainers)
	pod.Status.Phase = v1.PodPhase(s(string(pod.Status.Phase)))
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		c.Type = v1.PodConditionType(s(string(c.Type)))
		c.Status = v1.ConditionStatus(s(string(c.Status)))
		c.Reason = s(c.Reason)
	}
	pod.Status.ContainerStatuses = internSlice(in, &in.statuses, pod.Status.ContainerStatuses)
	pod.Status.InitContainerStatuses = internSlice(in, &in.initStatuses, pod.Status.InitContainerStatuses)
}

func (in *Interner) string(s string) string {
	if s == "" {
		return s
	}
	if shared, ok := in.strings.young[s]; ok {
		return shared
	}
	if shared, ok := in.strings.old[s]; ok {
		s = shared
	}
	in.strings.add(s, s)
	return s
}

// internEach interns every string of a slice in place.
func internEach(values []string, s func(string) string) []string {
	for i := range values {
		values[i] = s(values[i])
	}
	return values
}

// labelsOf returns the shared map of labels' content: its pairs in key order, each
// string ended by a zero byte, which no label key or value holds.
func (in *Interner) labelsOf(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	keys := in.sortedLabelKeys[:0]
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	in.sortedLabelKeys = keys
	b := in.buf[:0]
	for _, k := range keys {
		b = append(append(b, k...), 0)
		b = append(append(b, labels[k]...), 0)
	}
	in.buf = b
	if shared, ok := in.labels.get(b); ok {
		return shared
	}
	// The first pod of a label set gives its map, with its strings interned.
	interned := make(map[string]string, len(labels))
	for k, v := range labels {
		interned[in.string(k)] = in.string(v)
	}
	return in.labels.intern(b, interned)
}

// ownersOf returns the shared copy of owner references of the same content.
func (in *Interner) ownersOf(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	b := in.buf[:0]
	for i := range refs {
		r := &refs[i]
		b = append(append(b, r.APIVersion...), 0)
		b = append(append(b, r.Kind...), 0)
		b = append(append(b, r.Name...), 0)
		b = append(append(b, r.UID...), 0)
		b = append(b, optionalBool(r.Controller), optionalBool(r.BlockOwnerDeletion))
	}
	in.buf = b
	if shared, ok := in.owners.get(b); ok {
		return shared
	}
	for i := range refs {
		r := &refs[i]
		r.APIVersion, r.Kind, r.Name = in.string(r.APIVersion), in.string(r.Kind), in.string(r.Name)
	}
	return in.owners.intern(b, refs)
}

func optionalBool(b *bool) byte {
	switch {
	case b == nil:
		return 0
	case *b:
		return 1
	default:
		return 2
	}
}

// protobufMessage is a generated API struct, encoded to compare by content.
type protobufMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// internSlice returns the shared copy of a slice of API structs of the same content:
// the protobuf encoding of each item, after its length. A slice that cannot be
// encoded, which a decoded one always can, is kept as it is.
func internSlice[T any, PT interface {
	*T
	protobufMessage
}](in *Interner, t *table[[]T], items []T) []T {
	if len(items) == 0 {
		return items
	}
	b := in.buf[:0]
	for i := range items {
		item := PT(&items[i])
		n := item.Size()
		b = appendUvarint(b, uint64(n))
		start := len(b)
		b = slices.Grow(b, n)[:start+n]
		if _, err := item.MarshalToSizedBuffer(b[start:]); err != nil {
			in.buf = b[:0]
			return items
		}
	}
	in.buf = b
	return t.intern(b, items)
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
