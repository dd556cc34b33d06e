package endpointslice

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers"
)

var web = map[string]string{"app": "web"}

func TestSyncWritesOneSliceWithUpstreamLabelsOwnerPortsAndConditions(t *testing.T) {
	f := newFixture(t, 100)
	f.add(f.services, newService("web", web, servicePort("http", 80, intstr.FromString("web"))))
	f.add(f.pods, newPod("web-0", web, true, "10.1.0.1"), newPod("web-1", web, false, "10.1.0.2"))

	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}

	created := f.createdSlices()
	if len(created) != 1 {
		t.Fatalf("created %d slices, want 1: %v", len(created), f.writes())
	}
	s := created[0]
	if s.GenerateName != "web-" || s.AddressType != discovery.AddressTypeIPv4 {
		t.Errorf("generateName %q, address type %s", s.GenerateName, s.AddressType)
	}
	if s.Labels[discovery.LabelServiceName] != "web" || s.Labels[discovery.LabelManagedBy] != "endpointslice-controller.k8s.io" {
		t.Errorf("labels = %v", s.Labels)
	}
	if owner := metav1.GetControllerOf(s); owner == nil || owner.Kind != "Service" || owner.Name != "web" || owner.UID != "uid-web" {
		t.Errorf("controller owner = %+v", owner)
	}
	wantPorts := []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
	if !apiequality.Semantic.DeepEqual(s.Ports, wantPorts) {
		t.Errorf("ports = %+v", s.Ports)
	}
	ready := map[string]bool{}
	for _, ep := range s.Endpoints {
		ready[ep.TargetRef.Name] = *ep.Conditions.Ready
		if *ep.Conditions.Terminating || ep.NodeName == nil || *ep.NodeName != "node-1" {
			t.Errorf("endpoint %s: terminating %v, node %v", ep.TargetRef.Name, *ep.Conditions.Terminating, ep.NodeName)
		}
	}
	if !ready["web-0"] || ready["web-1"] || len(ready) != 2 {
		t.Errorf("ready by pod = %v, want web-0 ready and web-1 not", ready)
	}
	if s.Annotations[v1.EndpointsLastChangeTriggerTime] == "" {
		t.Errorf("no trigger-time annotation on the first write: %v", s.Annotations)
	}
}

func TestSyncOfServiceWithoutPodsWritesOnePlaceholderSlice(t *testing.T) {
	f := newFixture(t, 100)
	f.add(f.services, newService("web", web, servicePort("http", 80, intstr.FromInt32(8080))))

	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}

	created := f.createdSlices()
	if len(created) != 1 || len(created[0].Endpoints) != 0 || len(created[0].Ports) != 0 {
		t.Fatalf("created %+v, want one empty placeholder slice", created)
	}
}

func TestSyncSplitsEndpointsAtMaxEndpointsPerSlice(t *testing.T) {
	f := newFixture(t, 2)
	f.add(f.services, newService("web", web, servicePort("http", 80, intstr.FromInt32(8080))))
	f.add(f.pods,
		newPod("web-0", web, true, "10.1.0.1"), newPod("web-1", web, true, "10.1.0.2"),
		newPod("web-2", web, true, "10.1.0.3"), newPod("web-3", web, true, "10.1.0.4"),
		newPod("web-4", web, true, "10.1.0.5"))

	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}

	var sizes []int
	for _, s := range f.createdSlices() {
		sizes = append(sizes, len(s.Endpoints))
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{1, 2, 2}) {
		t.Errorf("slice sizes = %v, want [1 2 2]", sizes)
	}
}

func TestSyncLeavesExternalNameAndSelectorlessServicesAlone(t *testing.T) {
	f := newFixture(t, 100)
	external := newService("external", web)
	external.Spec.Type = v1.ServiceTypeExternalName
	f.add(f.services, external, newService("manual", nil))
	f.add(f.pods, newPod("web-0", web, true, "10.1.0.1"))

	for _, name := range []string{"external", "manual"} {
		if err := f.sync(name); err != nil {
			t.Errorf("sync %s: %v", name, err)
		}
	}
	if writes := f.writes(); len(writes) != 0 {
		t.Errorf("writes = %v, want none", writes)
	}
}

func TestSyncOfDeletedServiceDeletesTheSlicesItOwnedAndNoOther(t *testing.T) {
	f := newFixture(t, 100)
	// Ours, owned by the deleted Service (and one by an earlier Service of that name).
	owned := ownedSlice("web-abc", "web", "uid-web")
	earlier := ownedSlice("web-old", "web", "uid-earlier")
	// Labelled for the Service but managed by someone else, or without an owner: the
	// garbage collector would not delete these either.
	foreign := ownedSlice("web-foreign", "web", "uid-web")
	foreign.Labels[discovery.LabelManagedBy] = "example.com/my-controller"
	orphan := ownedSlice("web-orphan", "web", "uid-web")
	orphan.OwnerReferences = nil
	// Another Service's.
	other := ownedSlice("api-abc", "api", "uid-api")
	f.add(f.slices, owned, earlier, foreign, orphan, other)

	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}

	got := f.writes()
	slices.Sort(got)
	if want := []string{"delete web-abc", "delete web-old"}; !slices.Equal(got, want) {
		t.Errorf("writes = %v, want %v", got, want)
	}
	for _, a := range f.client.Actions() {
		if d, ok := a.(core.DeleteAction); ok {
			if uid := d.GetDeleteOptions().Preconditions; uid == nil || uid.UID == nil || string(*uid.UID) != "uid-"+d.GetName() {
				t.Errorf("delete of %s without the slice's UID as precondition: %+v", d.GetName(), uid)
			}
		}
	}
}

func TestSyncOfDeletedServiceTreatsGoneSlicesAsDeletedAndRetriesOtherErrors(t *testing.T) {
	f := newFixture(t, 100)
	f.add(f.slices, ownedSlice("web-abc", "web", "uid-web"))
	f.client.PrependReactor("delete", "endpointslices", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	if err := f.sync("web"); err == nil {
		t.Error("a failed delete must fail the sync, so that it is retried")
	}

	f = newFixture(t, 100)
	f.add(f.slices, ownedSlice("web-abc", "web", "uid-web"))
	if err := f.sync("web"); err != nil { // the fake API has no such slice: NotFound
		t.Errorf("a slice already gone must count as deleted, got %v", err)
	}
}

func TestSyncFailsAsStaleWhileTheCacheMissesOurLastWrite(t *testing.T) {
	f := newFixture(t, 100)
	f.add(f.services, newService("web", web, servicePort("http", 80, intstr.FromInt32(8080))))
	slice := ownedSlice("web-abc", "web", "uid-web")
	slice.Generation = 1
	f.add(f.slices, slice)
	// We wrote generation 2; the cache still holds 1.
	written := slice.DeepCopy()
	written.Generation = 2
	f.controller.sliceTracker.Update(written)

	err := f.sync("web")
	if !isStaleCache(err) {
		t.Fatalf("sync error = %v, want the stale-cache error", err)
	}
	if writes := f.writes(); len(writes) != 0 {
		t.Errorf("a stale sync wrote %v", writes)
	}

	// The cache catches up: the sync goes through.
	if err := f.slices.Update(written); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("web"); err != nil {
		t.Errorf("sync after the cache caught up: %v", err)
	}
}

// The shared informers trim pods (caches/cachetrim) to the fields the controllers declare;
// every field the library reads must be among this controller's own declarations, or
// slices would silently lose hostnames, named ports, sidecar ports or addresses. The
// slices for pods trimmed to those alone and for untrimmed pods must be the same.
func TestTrimmedPodsYieldTheSameSlicesAsWholePods(t *testing.T) {
	service := newService("db", web,
		servicePort("http", 80, intstr.FromString("web")),
		servicePort("admin", 9000, intstr.FromString("admin")))
	service.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	deleted := metav1.Now()
	full := func() []*v1.Pod {
		ready := newPod("db-0", web, true, "10.1.0.1")
		ready.Status.PodIPs = append(ready.Status.PodIPs, v1.PodIP{IP: "fd00::1"})
		ready.Annotations = map[string]string{"note": "dropped by Trim"}
		terminating := newPod("db-1", web, false, "10.1.0.2")
		terminating.Status.PodIPs = append(terminating.Status.PodIPs, v1.PodIP{IP: "fd00::2"})
		terminating.DeletionTimestamp = &deleted
		pods := []*v1.Pod{ready, terminating}
		for _, p := range pods {
			p.Spec.Hostname, p.Spec.Subdomain = p.Name, "db"
			p.Spec.Containers[0].Image = "app:1"
			// A sidecar: a restartable init container, whose named port counts.
			p.Spec.InitContainers = []v1.Container{{
				Name: "proxy", Image: "proxy:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
				Ports: []v1.ContainerPort{{Name: "admin", ContainerPort: 9901, Protocol: v1.ProtocolTCP}},
			}}
		}
		return pods
	}

	slicesFor := func(pods []*v1.Pod) []*discovery.EndpointSlice {
		f := newFixture(t, 100)
		f.add(f.services, service)
		for _, p := range pods {
			f.add(f.pods, p)
		}
		if err := f.sync("db"); err != nil {
			t.Fatal(err)
		}
		// The order of families and of pods comes from maps; the content is what counts.
		created := f.createdSlices()
		slices.SortFunc(created, func(a, b *discovery.EndpointSlice) int {
			return strings.Compare(string(a.AddressType), string(b.AddressType))
		})
		for _, s := range created {
			s.Name = "" // named by the fixture in creation order
			slices.SortFunc(s.Endpoints, func(a, b discovery.Endpoint) int { return strings.Compare(a.TargetRef.Name, b.TargetRef.Name) })
		}
		return created
	}
	want := slicesFor(full())
	trimmer, err := cachetrim.NewTrimmer(controllers.PodReads{Fields: Descriptor().PodFields, Annotations: Descriptor().PodAnnotations})
	if err != nil {
		t.Fatal(err)
	}
	trimmed := full()
	for _, p := range trimmed {
		trimmer.Trim(p)
	}
	got := slicesFor(trimmed)

	if len(want) != 2 || len(got) != len(want) {
		t.Fatalf("slices: %d for whole pods (want one per family), %d for trimmed pods", len(want), len(got))
	}
	for i := range want {
		// The trigger time comes from the Ready condition, which Trim keeps.
		if !apiequality.Semantic.DeepEqual(got[i], want[i]) {
			t.Errorf("slice %d for trimmed pods\n%+v\ndiffers from whole pods'\n%+v", i, got[i], want[i])
		}
		if len(want[i].Ports) != 2 || len(want[i].Endpoints) != 2 || want[i].Endpoints[0].Hostname == nil {
			t.Errorf("the reference slice misses what the test is about: %+v", want[i])
		}
	}
}
