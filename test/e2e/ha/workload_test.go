package ha

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// podTemplate is a pod that KWOK runs: any image will do, no container ever starts.
func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			// KWOK finishes a deletion at once anyway; a zero grace period keeps the
			// apiserver from waiting for it.
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// newReplicaSet returns a ReplicaSet whose pods carry app=<name> and the extra labels.
func newReplicaSet(name string, replicas int32, extraLabels map[string]string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(labels),
		},
	}
}

// newDeployment returns a RollingUpdate Deployment whose pods carry app=<name> and the
// extra labels.
func newDeployment(name string, replicas int32, extraLabels map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(labels),
		},
	}
}

// newService returns a Service selecting selector on port 80.
func newService(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// isActive is upstream's IsPodActive: the pod counts against its owner's replicas.
func isActive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podCensus watches the pods of one namespace and checks, at every change it sees (each
// watch event is a consistent state of the cluster, in resourceVersion order), that no
// owner has more active pods than allowed. Owners are ReplicaSets, or Deployments for
// the pods of their ReplicaSets (summed over all of them). It also watches the
// namespace's ReplicaSets and checks, at every change of them, that a Deployment's
// ReplicaSets together are no bigger than allowed: the bound a rolling update keeps.
type podCensus struct {
	t       testing.TB
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	// replicaSets tells a pod's real owner from a stale reference to an older
	// ReplicaSet of the same name.
	replicaSets cache.SharedIndexInformer

	mu sync.Mutex
	// limits maps an owner key ("ReplicaSet/x", "Deployment/y") to its allowed number of
	// active pods.
	limits map[string]int
	// active maps an owner key to its active pods.
	active map[string]sets.Set[types.UID]
	// peak is the highest number of active pods seen per owner key.
	peak map[string]int
	// refs holds the controller reference of every active pod, to re-key pods whose
	// ReplicaSet the census learns about after the pod.
	refs map[types.UID]metav1.OwnerReference
	// seen is every pod UID ever observed, to count pods created over the test.
	seen sets.Set[types.UID]
	// seenBy is every pod UID ever observed per owner key it had.
	seenBy map[string]sets.Set[types.UID]
	// sizeLimits maps a Deployment's name to the most replicas its ReplicaSets may ask
	// for together (the sum of their spec.replicas).
	sizeLimits map[string]int
	// violations describes every moment an owner exceeded its limit.
	violations []string
}

// watchPods starts a census of namespace ns; it stops when the test ends.
func watchPods(t testing.TB, client kubernetes.Interface, ns string) *podCensus {
	t.Helper()
	c := &podCensus{
		t:      t,
		limits: map[string]int{},
		active: map[string]sets.Set[types.UID]{},
		peak:   map[string]int{},
		seen:   sets.New[types.UID](),
		seenBy: map[string]sets.Set[types.UID]{},
		refs:   map[types.UID]metav1.OwnerReference{},

		sizeLimits: map[string]int{},
	}
	c.factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	c.pods = c.factory.Core().V1().Pods().Informer()
	c.replicaSets = c.factory.Apps().V1().ReplicaSets().Informer()
	_, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { c.observe(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				c.forget(pod)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.replicaSets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.replicaSetSeen(obj.(*appsv1.ReplicaSet))
			c.replicaSetSized(obj.(*appsv1.ReplicaSet))
		},
		UpdateFunc: func(_, obj any) { c.replicaSetSized(obj.(*appsv1.ReplicaSet)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		c.factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced, c.replicaSets.HasSynced) {
		t.Fatal("pod census did not sync")
	}
	return c
}

// limit sets the most active pods the owner (kind "ReplicaSet" or "Deployment") may
// ever have from now on.
func (c *podCensus) limit(kind, name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limits[kind+"/"+name] = n
}

// limitReplicaSets sets the most replicas the ReplicaSets of a Deployment may ask for
// together from now on: during a rolling update, replicas plus maxSurge. This is the
// bound the deployment controller keeps (upstream's NewRSNewReplicas sums the
// ReplicaSets' spec.replicas, not their pods), so a rolling update is judged by it
// rather than by limit: when the deployment controller shrinks an old ReplicaSet and
// grows the new one, the replicaset controller deletes and creates pods independently,
// and a deletion that has to wait (retried with backoff after an apiserver outage, or
// behind client-side throttling) leaves the pods above the bound for a moment, in
// kube-controller-manager as in mini-kcm. That no pod was created beyond what the
// ReplicaSets asked for is for the audit log to show.
func (c *podCensus) limitReplicaSets(deployment string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizeLimits[deployment] = n
}

// replicaSetSized checks, on an event of a ReplicaSet a Deployment controls, the
// Deployment's limit on the sum of its ReplicaSets' sizes. The sum is taken over the
// informer's store, not kept from the events: after a relist (the apiserver restarted)
// the handlers get one update per ReplicaSet, and a sum kept from them would mix the
// new size of one ReplicaSet with the size another had before the outage. The store is
// always one state of the cluster: a watch event at a time, or a relist replaced at
// once (client-go's AtomicFIFO, on by default since v0.36).
func (c *podCensus) replicaSetSized(rs *appsv1.ReplicaSet) {
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != "Deployment" {
		return
	}
	c.mu.Lock()
	limit, ok := c.sizeLimits[ref.Name]
	c.mu.Unlock()
	if !ok {
		return
	}
	total := 0
	var sizes []string
	for _, obj := range c.replicaSets.GetStore().List() {
		other := obj.(*appsv1.ReplicaSet)
		if owner := metav1.GetControllerOf(other); owner == nil || owner.Kind != "Deployment" || owner.Name != ref.Name {
			continue
		}
		n := ptr.Deref(other.Spec.Replicas, 1)
		total += int(n)
		sizes = append(sizes, fmt.Sprintf("%s=%d@%s", other.Name, n, other.ResourceVersion))
	}
	if total > limit {
		sort.Strings(sizes)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.violations = append(c.violations, fmt.Sprintf("Deployment/%s: its ReplicaSets ask for %d replicas together, limit %d (%s)",
			ref.Name, total, limit, strings.Join(sizes, ", ")))
	}
}

// ownerKey names the owner a pod counts against: its controlling ReplicaSet, or the
// Deployment of that ReplicaSet (derived from the name, which is the Deployment's name
// and the pod-template-hash, so that a ReplicaSet the census has not seen yet does not
// matter). A reference to a ReplicaSet of the right name but another UID is stale and
// counts against no one.
func (c *podCensus) ownerKey(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "orphan"
	}
	if ref.Kind != "ReplicaSet" {
		return ref.Kind + "/" + ref.Name
	}
	if obj, ok, _ := c.replicaSets.GetStore().GetByKey(pod.Namespace + "/" + ref.Name); ok && obj.(*appsv1.ReplicaSet).UID != ref.UID {
		return "stale/" + ref.Name + "/" + string(ref.UID)
	}
	if hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; hash != "" {
		if deployment, ok := strings.CutSuffix(ref.Name, "-"+hash); ok {
			return "Deployment/" + deployment
		}
	}
	return "ReplicaSet/" + ref.Name
}

// replicaSetSeen moves pods counted against rs by name, but whose reference carries
// another UID, to a stale key of their own.
func (c *podCensus) replicaSetSeen(rs *appsv1.ReplicaSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.active["ReplicaSet/"+rs.Name] {
		if ref := c.refs[uid]; ref.UID != rs.UID {
			c.active["ReplicaSet/"+rs.Name].Delete(uid)
			key := "stale/" + ref.Name + "/" + string(ref.UID)
			if c.active[key] == nil {
				c.active[key] = sets.New[types.UID]()
			}
			c.active[key].Insert(uid)
		}
	}
}

func (c *podCensus) observe(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen.Insert(pod.UID)
	// A pod's owner can change (adoption, release): take it out of every other set.
	key := c.ownerKey(pod)
	if c.seenBy[key] == nil {
		c.seenBy[key] = sets.New[types.UID]()
	}
	c.seenBy[key].Insert(pod.UID)
	for k, pods := range c.active {
		if k != key {
			pods.Delete(pod.UID)
		}
	}
	if !isActive(pod) {
		if pods := c.active[key]; pods != nil {
			pods.Delete(pod.UID)
		}
		delete(c.refs, pod.UID)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		c.refs[pod.UID] = *ref
	}
	if c.active[key] == nil {
		c.active[key] = sets.New[types.UID]()
	}
	c.active[key].Insert(pod.UID)
	n := c.active[key].Len()
	c.peak[key] = max(c.peak[key], n)
	if limit, ok := c.limits[key]; ok && n > limit {
		c.violations = append(c.violations, fmt.Sprintf("%s: %d active pods at resourceVersion %s, limit %d (pod %s)",
			key, n, pod.ResourceVersion, limit, pod.Name))
	}
}

func (c *podCensus) forget(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pods := range c.active {
		pods.Delete(pod.UID)
	}
	delete(c.refs, pod.UID)
}

// activeCount returns the number of active pods of an owner key, or of all owners if key
// is "".
func (c *podCensus) activeCount(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key != "" {
		return c.active[key].Len()
	}
	n := 0
	for _, pods := range c.active {
		n += pods.Len()
	}
	return n
}

// podsSeen returns how many distinct pods the census has seen.
func (c *podCensus) podsSeen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen.Len()
}

// podsSeenBy returns how many distinct pods the census has seen with owner key.
func (c *podCensus) podsSeenBy(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seenBy[key].Len()
}

// peaks returns the highest active count per owner key, sorted, for logs.
func (c *podCensus) peaks() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.peak))
	for k := range c.peak {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if limit, ok := c.limits[k]; ok {
			fmt.Fprintf(&b, "%s=%d(limit %d) ", k, c.peak[k], limit)
		} else {
			fmt.Fprintf(&b, "%s=%d ", k, c.peak[k])
		}
	}
	return b.String()
}

// checkNoViolations fails the test if any owner ever had too many active pods, or any
// Deployment too big ReplicaSets.
func (c *podCensus) checkNoViolations() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.violations) > 0 {
		c.t.Errorf("owners had more active pods, or Deployments bigger ReplicaSets, than allowed %d times; first ones:\n%s",
			len(c.violations), strings.Join(c.violations[:min(10, len(c.violations))], "\n"))
	}
}

// replicaSetComplete reports why rs is not yet exactly at its desired state: status
// counts equal spec.replicas, the status observed the latest generation, and exactly
// spec.replicas active pods are controlled by it, all Ready.
func replicaSetComplete(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	rs, err := client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := *rs.Spec.Replicas
	s := rs.Status
	if s.ObservedGeneration < rs.Generation || s.Replicas != want || s.ReadyReplicas != want ||
		s.AvailableReplicas != want || s.FullyLabeledReplicas != want {
		return fmt.Errorf("replicaset %s: spec.replicas %d, generation %d, status %+v", name, want, rs.Generation, s)
	}
	pods, err := controlledPods(ctx, client, ns, rs.UID)
	if err != nil {
		return err
	}
	if int32(len(pods)) != want {
		return fmt.Errorf("replicaset %s: %d active pods controlled by it, want %d", name, len(pods), want)
	}
	for _, p := range pods {
		if !isReady(p) {
			return fmt.Errorf("replicaset %s: pod %s not ready", name, p.Name)
		}
	}
	return nil
}

// controlledPods lists the active pods whose controller has uid.
func controlledPods(ctx context.Context, client kubernetes.Interface, ns string, uid types.UID) ([]*corev1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == uid && isActive(p) {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// deploymentComplete reports why d is not yet complete: every replica updated and
// available, nothing else left (old ReplicaSets at zero), the status observed the latest
// generation, and Progressing says NewReplicaSetAvailable.
func deploymentComplete(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := *d.Spec.Replicas
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.Replicas != want || s.UpdatedReplicas != want ||
		s.ReadyReplicas != want || s.AvailableReplicas != want || s.UnavailableReplicas != 0 {
		return fmt.Errorf("deployment %s: spec.replicas %d, generation %d, status replicas=%d updated=%d ready=%d available=%d unavailable=%d observedGeneration=%d",
			name, want, d.Generation, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas, s.ObservedGeneration)
	}
	var progressing, available string
	for _, c := range s.Conditions {
		switch c.Type {
		case appsv1.DeploymentProgressing:
			progressing = string(c.Status) + "/" + c.Reason
		case appsv1.DeploymentAvailable:
			available = string(c.Status)
		}
	}
	if progressing != "True/NewReplicaSetAvailable" || available != "True" {
		return fmt.Errorf("deployment %s: Progressing %q, Available %q", name, progressing, available)
	}
	return nil
}

// endpointsMatchPods reports why the Endpoints of service svc do not list exactly the
// IPs of the ready pods it selects (and no not-ready addresses). It assumes at most
// 1000 pods, the Endpoints capacity.
func endpointsMatchPods(ctx context.Context, client kubernetes.Interface, ns, svc string, selector map[string]string) error {
	ep, err := client.CoreV1().Endpoints(ns).Get(ctx, svc, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector}),
	})
	if err != nil {
		return err
	}
	want := sets.New[string]()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && isReady(p) && p.Status.PodIP != "" {
			want.Insert(p.Status.PodIP)
		}
	}
	got := sets.New[string]()
	notReady := 0
	for _, subset := range ep.Subsets {
		for _, a := range subset.Addresses {
			got.Insert(a.IP)
		}
		notReady += len(subset.NotReadyAddresses)
	}
	if !got.Equal(want) || notReady != 0 {
		return fmt.Errorf("endpoints %s: %d ready addresses and %d not ready, want the %d ready pod IPs (missing %d, extra %d)",
			svc, got.Len(), notReady, want.Len(), want.Difference(got).Len(), got.Difference(want).Len())
	}
	return nil
}

// pollUntil calls check every interval until it returns nil or timeout passes.
func pollUntil(timeout, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		}
		time.Sleep(interval)
	}
}

// eventually is framework.Eventually with a poll interval suited to checks that list
// hundreds of pods.
func eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	if err := pollUntil(timeout, 500*time.Millisecond, check); err != nil {
		t.Fatal(err)
	}
}

// allOf runs every check and returns their errors joined, so a failure message shows
// everything that is not there yet.
func allOf(checks ...func() error) error {
	var errs []error
	for _, check := range checks {
		if err := check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
