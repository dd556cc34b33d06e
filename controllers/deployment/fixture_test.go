package deployment

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// testNow is the fixed clock of every test.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a controller wired to a fake clientset, with informer caches filled
// directly by the test (the informers never run).
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	c        *Controller
}

// allFeatures has every gate the controller honours on, as in Kubernetes v1.37.
var allFeatures = featuresWithout()

// featuresWithout returns the gates of the controller's descriptor on, but those of off.
func featuresWithout(off ...controllers.FeatureGate) controllers.Features {
	f := controllers.Features{}
	for _, g := range Descriptor().FeatureGates {
		f[g.Name] = !slices.ContainsFunc(off, func(o controllers.FeatureGate) bool { return o.Name == g.Name })
	}
	return f
}

// newFixture puts every object both in the fake apiserver and in the caches.
func newFixture(t *testing.T, objects ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWithFeatures(t, allFeatures, objects...)
}

// newFixtureWithFeatures is newFixture with the given feature gates.
func newFixtureWithFeatures(t *testing.T, features controllers.Features, objects ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c, err := NewController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, recorder, features)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	c.now = func() time.Time { return testNow }
	t.Cleanup(c.queue.ShutDown)
	f := &fixture{t: t, ctx: ctx, client: client, factory: factory, recorder: recorder, c: c}
	for _, obj := range objects {
		f.addToCache(obj)
	}
	client.ClearActions()
	return f
}

func (f *fixture) addToCache(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		err = f.factory.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
	case *appsv1.ReplicaSet:
		err = f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
	case *corev1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	default:
		f.t.Fatalf("unexpected object %T", obj)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one sync of the Deployment and returns its error.
func (f *fixture) sync(d *appsv1.Deployment) error {
	return f.c.syncDeployment(f.ctx, d.Namespace+"/"+d.Name)
}

// writes returns the mutating actions as "verb resource[/subresource] name" strings.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		resource := a.GetResource().Resource
		if a.GetSubresource() != "" {
			resource += "/" + a.GetSubresource()
		}
		name := ""
		switch act := a.(type) {
		case clienttesting.DeleteAction:
			name = act.GetName()
		case clienttesting.PatchAction:
			name = act.GetName()
		case interface{ GetObject() runtime.Object }: // create and update
			if m, ok := act.GetObject().(metav1.Object); ok {
				name = m.GetName()
			}
		}
		out = append(out, strings.TrimSpace(a.GetVerb()+" "+resource+" "+name))
	}
	return out
}

// updatedReplicaSets returns the ReplicaSets written with Update, by name (last wins).
func (f *fixture) updatedReplicaSets() map[string]*appsv1.ReplicaSet {
	out := map[string]*appsv1.ReplicaSet{}
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetVerb() == "update" {
			if rs, ok := u.GetObject().(*appsv1.ReplicaSet); ok {
				out[rs.Name] = rs
			}
		}
	}
	return out
}

// createdReplicaSet returns the ReplicaSet written with Create, or nil.
func (f *fixture) createdReplicaSet() *appsv1.ReplicaSet {
	for _, a := range f.client.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok && a.GetVerb() == "create" {
			if rs, ok := c.GetObject().(*appsv1.ReplicaSet); ok {
				return rs
			}
		}
	}
	return nil
}

// lastStatusUpdate returns the Deployment of the last UpdateStatus, or nil.
func (f *fixture) lastStatusUpdate() *appsv1.Deployment {
	var last *appsv1.Deployment
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetVerb() == "update" && u.GetSubresource() == "status" {
			last = u.GetObject().(*appsv1.Deployment)
		}
	}
	return last
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// queued drains the queue without blocking.
func (f *fixture) queued() []string {
	var keys []string
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		keys = append(keys, key)
		f.c.queue.Done(key)
		f.c.queue.Forget(key)
	}
	return keys
}

// newDeployment returns a RollingUpdate Deployment "foo" selecting foo=bar.
func newDeployment(name string, replicas int32, maxSurge, maxUnavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: metav1.NamespaceDefault, UID: types.UID(name + "-uid"),
			Generation: 1, Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: new(maxSurge), MaxUnavailable: new(maxUnavailable),
				},
			},
			Template:                podTemplate("v1"),
			RevisionHistoryLimit:    new(int32(10)),
			ProgressDeadlineSeconds: new(int32(600)),
		},
	}
}

func newRecreateDeployment(name string, replicas int32) *appsv1.Deployment {
	d := newDeployment(name, replicas, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

func podTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"foo": "bar"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// ownedRS returns a ReplicaSet controlled by d running the given image, created age
// minutes after testNow-1h, with the given revision and a status of all pods available.
func ownedRS(d *appsv1.Deployment, image string, replicas int32, revision int, age int) *appsv1.ReplicaSet {
	tmpl := podTemplate(image)
	hash := rollout.ComputeHash(&tmpl, nil)
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              d.Name + "-" + hash,
			Namespace:         d.Namespace,
			UID:               types.UID(fmt.Sprintf("%s-%s-uid", d.Name, image)),
			Labels:            tmpl.Labels,
			CreationTimestamp: metav1.NewTime(testNow.Add(-time.Hour + time.Duration(age)*time.Minute)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
			Annotations: map[string]string{
				rollout.RevisionAnnotation:        fmt.Sprint(revision),
				rollout.DesiredReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas),
				rollout.MaxReplicasAnnotation:     fmt.Sprint(*d.Spec.Replicas + rollout.MaxSurge(d)),
			},
			Generation: 1,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar", appsv1.DefaultDeploymentUniqueLabelKey: hash}},
			Template: tmpl,
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			ObservedGeneration: 1, TerminatingReplicas: new(int32(0)),
		},
	}
	return rs
}

// withStatus sets a ReplicaSet's status counts.
func withStatus(rs *appsv1.ReplicaSet, replicas, available int32) *appsv1.ReplicaSet {
	rs.Status.Replicas = replicas
	rs.Status.ReadyReplicas = available
	rs.Status.AvailableReplicas = available
	return rs
}

// infinite is the MaxInt32 sentinel meaning "no limit".
var infinite = int32(math.MaxInt32)

// klogBackground is the logger handed to event handlers in tests.
var klogBackground = klog.Background()
