package endpoints

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
)

var (
	ipv4only = []v1.IPFamily{v1.IPv4Protocol}
	ipv6only = []v1.IPFamily{v1.IPv6Protocol}
	ipv4ipv6 = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	ipv6ipv4 = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
)

func alwaysReady() bool { return true }
func neverReady() bool  { return false }

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
	endpoints  cache.Indexer
}

func newFixture(t *testing.T, batchPeriod time.Duration) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	core := factory.Core().V1()
	c, err := NewController(ctx, core.Pods(), core.Services(), core.Endpoints(), client, recorder, batchPeriod)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	c.podsSynced, c.servicesSynced, c.endpointsSynced = alwaysReady, alwaysReady, alwaysReady
	c.workerLoopPeriod = 10 * time.Millisecond
	// As if Run had started: tests call the handlers directly.
	c.running.Store(true)
	return &fixture{
		t: t, ctx: ctx, client: client, recorder: recorder, controller: c,
		pods:      core.Pods().Informer().GetIndexer(),
		services:  core.Services().Informer().GetIndexer(),
		endpoints: core.Endpoints().Informer().GetIndexer(),
	}
}

func (f *fixture) addPods(pods ...*v1.Pod) {
	f.t.Helper()
	for _, pod := range pods {
		if err := f.pods.Add(pod); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) addService(service *v1.Service) {
	f.t.Helper()
	if err := f.services.Add(service); err != nil {
		f.t.Fatal(err)
	}
}

// addEndpoints puts endpoints in the cache and in the fake apiserver, so that an update
// of it succeeds.
func (f *fixture) addEndpoints(endpoints *v1.Endpoints) {
	f.t.Helper()
	if err := f.endpoints.Add(endpoints); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.client.CoreV1().Endpoints(endpoints.Namespace).Create(f.ctx, endpoints, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.client.ClearActions()
}

func (f *fixture) sync(namespace, name string) error {
	return f.controller.syncService(f.ctx, namespace+"/"+name)
}

func (f *fixture) mustSync(namespace, name string) {
	f.t.Helper()
	if err := f.sync(namespace, name); err != nil {
		f.t.Fatalf("syncing %s/%s: %v", namespace, name, err)
	}
}

// writes returns the Endpoints writes (create, update, delete) the controller made.
func (f *fixture) writes() []core.Action {
	var out []core.Action
	for _, action := range f.client.Actions() {
		if action.GetResource().Resource == "endpoints" && action.GetVerb() != "get" && action.GetVerb() != "list" && action.GetVerb() != "watch" {
			out = append(out, action)
		}
	}
	return out
}

// onlyWrite asserts that the controller made exactly one Endpoints write, of verb, and
// returns the object written (nil for a delete).
func (f *fixture) onlyWrite(verb string) *v1.Endpoints {
	f.t.Helper()
	writes := f.writes()
	if len(writes) != 1 || writes[0].GetVerb() != verb {
		f.t.Fatalf("want exactly one %s of endpoints, got %v", verb, describe(writes))
	}
	if obj, ok := writes[0].(core.CreateAction); ok {
		return obj.GetObject().(*v1.Endpoints)
	}
	return nil
}

func (f *fixture) noWrites() {
	f.t.Helper()
	if writes := f.writes(); len(writes) != 0 {
		f.t.Fatalf("want no endpoints writes, got %v", describe(writes))
	}
}

func (f *fixture) stored(namespace, name string) *v1.Endpoints {
	f.t.Helper()
	endpoints, err := f.client.CoreV1().Endpoints(namespace).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("getting endpoints %s/%s: %v", namespace, name, err)
	}
	return endpoints
}

func describe(actions []core.Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

// bumpResourceVersions makes the fake apiserver give every created or updated object a
// new resourceVersion, as a real one does; the fake keeps the client's otherwise.
func bumpResourceVersions(client *fake.Clientset) {
	var rv atomic.Int64
	rv.Store(1000)
	bump := func(action core.Action) (bool, runtime.Object, error) {
		if a, ok := action.(interface{ GetObject() runtime.Object }); ok {
			if obj, ok := a.GetObject().(metav1.Object); ok {
				obj.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
			}
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "*", bump)
	client.PrependReactor("update", "*", bump)
}

// testPod returns pod<id> labelled foo=bar, with nPorts container ports named port<j> on
// 8080+j, and one IP per family: 1.2.3.<4+id> and 2000::<4+id>.
func testPod(namespace string, id int, nPorts int, ready bool, families []v1.IPFamily) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       namespace,
			Name:            fmt.Sprintf("pod%d", id),
			Labels:          map[string]string{"foo": "bar"},
			ResourceVersion: strconv.Itoa(id),
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Ports: []v1.ContainerPort{}}}},
		Status: v1.PodStatus{
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		},
	}
	if !ready {
		pod.Status.Conditions[0].Status = v1.ConditionFalse
	}
	for j := range nPorts {
		pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports,
			v1.ContainerPort{Name: fmt.Sprintf("port%d", j), ContainerPort: int32(8080 + j)})
	}
	for _, family := range families {
		ip := fmt.Sprintf("2000::%x", 4+id)
		if family == v1.IPv4Protocol {
			ip = fmt.Sprintf("1.2.%d.%d", 3+(4+id)/256, (4+id)%256)
		}
		pod.Status.PodIPs = append(pod.Status.PodIPs, v1.PodIP{IP: ip})
	}
	pod.Status.PodIP = pod.Status.PodIPs[0].IP
	return pod
}

// testPods returns nReady ready and nNotReady not-ready pods (ids 0, 1, ...).
func testPods(namespace string, nReady, nNotReady, nPorts int, families []v1.IPFamily) []*v1.Pod {
	var pods []*v1.Pod
	for i := range nReady + nNotReady {
		pods = append(pods, testPod(namespace, i, nPorts, i < nReady, families))
	}
	return pods
}

// testService returns Service foo selecting foo=bar with one TCP port 80 → 8080.
func testService(namespace string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: namespace},
		Spec: v1.ServiceSpec{
			Selector:   map[string]string{"foo": "bar"},
			ClusterIP:  "10.0.0.1",
			Ports:      []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
			IPFamilies: ipv4only,
		},
	}
}

// address returns the Endpoints address of testPod(namespace, id) for IPv4.
func address(namespace string, id int) v1.EndpointAddress {
	return v1.EndpointAddress{
		IP:        fmt.Sprintf("1.2.%d.%d", 3+(4+id)/256, (4+id)%256),
		NodeName:  new(""),
		TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("pod%d", id)},
	}
}

func managedLabels(extra ...string) map[string]string {
	labels := map[string]string{LabelManagedBy: ComponentName}
	for i := 0; i+1 < len(extra); i += 2 {
		labels[extra[i]] = extra[i+1]
	}
	return labels
}
