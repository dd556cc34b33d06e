package endpointslice

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// fixture is a controller on a fake clientset whose informer caches the tests fill
// directly, so that a test decides exactly what the controller sees.
type fixture struct {
	t          *testing.T
	ctx        context.Context
	client     *fake.Clientset
	recorder   *record.FakeRecorder
	controller *Controller
	pods       cache.Indexer
	services   cache.Indexer
	slices     cache.Indexer
}

func newFixture(t *testing.T, maxEndpointsPerSlice int32) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	// The fake API does not fill in generateName; the reconciler creates slices with it.
	var created int
	client.PrependReactor("create", "endpointslices", func(action core.Action) (bool, runtime.Object, error) {
		slice := action.(core.CreateAction).GetObject().(*discovery.EndpointSlice)
		if slice.Name == "" {
			created++
			slice.Name = fmt.Sprintf("%s%d", slice.GenerateName, created)
		}
		return false, nil, nil
	})
	core := factory.Core().V1()
	sliceInformer := factory.Discovery().V1().EndpointSlices()
	c, err := NewController(ctx, core.Pods(), core.Services(), core.Nodes(), sliceInformer, client, recorder, maxEndpointsPerSlice, 0)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	t.Cleanup(func() {
		c.queue.ShutDown()
		c.podQueue.ShutDown()
		c.topologyQueue.ShutDown()
	})
	// The reconciler skips pods whose node it cannot find.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}
	if err := core.Nodes().Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	return &fixture{
		t: t, ctx: ctx, client: client, recorder: recorder, controller: c,
		pods:     core.Pods().Informer().GetIndexer(),
		services: core.Services().Informer().GetIndexer(),
		slices:   sliceInformer.Informer().GetIndexer(),
	}
}

func (f *fixture) add(indexer cache.Indexer, objs ...any) {
	f.t.Helper()
	for _, obj := range objs {
		if err := indexer.Add(obj); err != nil {
			f.t.Fatal(err)
		}
	}
}

// sync runs one sync of the Service and returns its error.
func (f *fixture) sync(name string) error {
	return f.controller.syncService(f.ctx, "default/"+name)
}

// writes returns the EndpointSlice writes the controller made, as "verb name" (the
// name is empty for a create, which uses generateName).
func (f *fixture) writes() []string {
	var writes []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource != "endpointslices" {
			continue
		}
		switch a.GetVerb() {
		case "create":
			writes = append(writes, "create "+a.(core.CreateAction).GetObject().(*discovery.EndpointSlice).GenerateName)
		case "update":
			writes = append(writes, "update "+a.(core.UpdateAction).GetObject().(*discovery.EndpointSlice).Name)
		case "delete":
			writes = append(writes, "delete "+a.(core.DeleteAction).GetName())
		}
	}
	return writes
}

// createdSlices returns the slices the controller created, from the fake API.
func (f *fixture) createdSlices() []*discovery.EndpointSlice {
	var created []*discovery.EndpointSlice
	for _, a := range f.client.Actions() {
		if c, ok := a.(core.CreateAction); ok && a.GetResource().Resource == "endpointslices" {
			created = append(created, c.GetObject().(*discovery.EndpointSlice))
		}
	}
	return created
}

func newService(name string, selector map[string]string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: v1.ServiceSpec{
			Selector:   selector,
			Ports:      ports,
			ClusterIP:  "10.0.0.10",
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
		},
	}
}

func servicePort(name string, port int32, target intstr.IntOrString) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: v1.ProtocolTCP}
}

// newPod returns a running pod with the given readiness and IP on node-1.
func newPod(name string, labels map[string]string, ready bool, ip string) *v1.Pod {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels},
		Spec: v1.PodSpec{
			NodeName:   "node-1",
			Containers: []v1.Container{{Name: "app", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}}},
		},
		Status: v1.PodStatus{
			Phase:  v1.PodRunning,
			PodIP:  ip,
			PodIPs: []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{
				Type: v1.PodReady, Status: status,
				LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)),
			}},
		},
	}
}

// ownedSlice returns a slice of ours owned by the named Service.
func ownedSlice(name, service string, serviceUID types.UID) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Labels: map[string]string{discovery.LabelServiceName: service, discovery.LabelManagedBy: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: service, UID: serviceUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		AddressType: discovery.AddressTypeIPv4,
	}
}
