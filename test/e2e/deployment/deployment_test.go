package deployment

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/dump"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// dumpEnv names a directory where every test writes what its Deployments ended up as
// (see dumpFinalState), so that a mini-kcm run and an upstream run can be diffed.
const dumpEnv = "MINI_KCM_E2E_DUMP_DIR"

// Annotations and condition reasons exactly as upstream writes them
// (pkg/controller/deployment/util/deployment_util.go).
const (
	revisionAnnotation        = "deployment.kubernetes.io/revision"
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	maxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"

	reasonNewRSAvailable     = "NewReplicaSetAvailable"
	reasonMinimumAvailable   = "MinimumReplicasAvailable"
	reasonMinimumUnavailable = "MinimumReplicasUnavailable"
	reasonPaused             = "DeploymentPaused"
	reasonResumed            = "DeploymentResumed"
	reasonDeadlineExceeded   = "ProgressDeadlineExceeded"

	// controllerComponent is the event source of the Deployment controller.
	controllerComponent = "deployment-controller"
)

// Timeouts are generous for a loaded 2-core machine running race-detector builds; a
// passing run needs a fraction of them. No test asserts how fast anything happens.
const (
	leaderTimeout  = time.Minute
	rolloutTimeout = 2 * time.Minute
)

// startControllers gives a test its namespace and the controllers under test: a
// mini-kcm replica that runs only the ReplicaSet and Deployment controllers, leading
// on the test's own Lease.
func startControllers(t *testing.T) *framework.Framework {
	t.Helper()
	f := framework.New(t)
	if framework.AgainstUpstream() {
		framework.StartKubeControllerManager(t, f.ControlPlane, "kube-controller-manager-"+f.Namespace, "replicaset,deployment")
		return f
	}
	f.StartReplica(framework.ReplicaOptions{Args: []string{"--controllers=replicaset,deployment"}})
	f.WaitForLeader(leaderTimeout)
	return f
}

// image returns the n-th image of the test workload. KWOK never pulls it.
func image(n int) string { return fmt.Sprintf("registry.example/web:v%d", n) }

// newDeployment returns a Deployment whose pods are labelled app=<name> and run one
// container; the apiserver fills in every default (RollingUpdate 25%/25%,
// revisionHistoryLimit 10, progressDeadlineSeconds 600).
func newDeployment(name string, replicas int32) *appsv1.Deployment {
	podLabels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: image(1)}},
				},
			},
		},
	}
}

// unschedulable makes pods of the template wait for a node that does not exist, so a
// rollout to it never gets an available pod.
func unschedulable(d *appsv1.Deployment) {
	d.Spec.Template.Spec.NodeSelector = map[string]string{"e2e.mini-kcm.io/pool": "does-not-exist"}
}

// deploymentTester drives one Deployment and reads back what the controllers made of
// it; on failure it prints the Deployment, its ReplicaSets, pods and events.
type deploymentTester struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	ns     string
	name   string
	// uid identifies the Deployment: a ReplicaSet is its when the controllerRef names
	// this UID.
	uid types.UID
}

// createDeployment creates d in the test's namespace.
func createDeployment(t *testing.T, f *framework.Framework, d *appsv1.Deployment) *deploymentTester {
	t.Helper()
	created, err := f.Client.AppsV1().Deployments(f.Namespace).Create(f.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating deployment %s: %v", d.Name, err)
	}
	dt := &deploymentTester{t: t, ctx: f.Context(), client: f.Client, ns: f.Namespace, name: d.Name, uid: created.UID}
	if dir := os.Getenv(dumpEnv); dir != "" {
		// Cleanups run last-in first-out, so this runs before the framework deletes
		// the namespace's objects.
		t.Cleanup(func() { dt.dumpFinalState(dir) })
	}
	return dt
}

// dumpFinalState writes the Deployment, its ReplicaSets and the distinct events about
// it to dir as JSON, without what differs from run to run (UIDs, resource versions,
// timestamps, the namespace), for a diff against a run with the other controller.
func (dt *deploymentTester) dumpFinalState(dir string) {
	// The test's context is over by now.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at := *dt
	at.ctx = ctx
	dt = &at
	var state struct {
		Deployment  any
		ReplicaSets []any
		Events      []string
	}
	d, err := dt.client.AppsV1().Deployments(dt.ns).Get(ctx, dt.name, metav1.GetOptions{})
	if err != nil {
		dt.t.Errorf("dumping deployment %s: %v", dt.name, err)
		return
	}
	state.Deployment = normalized(d)
	rsList, err := dt.replicaSets()
	if err != nil {
		dt.t.Errorf("dumping replica sets: %v", err)
		return
	}
	for _, rs := range rsList {
		state.ReplicaSets = append(state.ReplicaSets, normalized(rs))
	}
	events, err := dt.events()
	if err != nil {
		dt.t.Errorf("dumping events: %v", err)
		return
	}
	for _, e := range events {
		state.Events = append(state.Events, fmt.Sprintf("%s %s %s: %s", e.Source.Component, e.Type, e.Reason, e.Message))
	}
	slices.Sort(state.Events)
	state.Events = slices.Compact(state.Events)
	data, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		dt.t.Errorf("dumping %s: %v", dt.name, err)
		return
	}
	name := invalidFileChars.ReplaceAllString(dt.t.Name(), "_") + "-" + dt.name + ".json"
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		dt.t.Errorf("dumping %s: %v", dt.name, err)
	}
}

var invalidFileChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// volatileFields differ between two runs of the same test whatever the controller.
var volatileFields = map[string]bool{
	"uid": true, "resourceVersion": true, "creationTimestamp": true, "managedFields": true,
	"namespace": true, "lastUpdateTime": true, "lastTransitionTime": true,
}

// normalized returns obj as generic JSON without volatileFields.
func normalized(obj any) any {
	data, err := json.Marshal(obj)
	if err != nil {
		return err.Error()
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return err.Error()
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if volatileFields[k] {
					delete(v, k)
					continue
				}
				strip(child)
			}
		case []any:
			for _, child := range v {
				strip(child)
			}
		}
	}
	strip(generic)
	return generic
}

func (dt *deploymentTester) get() *appsv1.Deployment {
	dt.t.Helper()
	d, err := dt.client.AppsV1().Deployments(dt.ns).Get(dt.ctx, dt.name, metav1.GetOptions{})
	if err != nil {
		dt.t.Fatalf("getting deployment %s: %v", dt.name, err)
	}
	return d
}

// update applies mutate to the current Deployment and writes it, retrying on
// conflicts with the controller's own writes.
func (dt *deploymentTester) update(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	dt.t.Helper()
	var updated *appsv1.Deployment
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := dt.client.AppsV1().Deployments(dt.ns).Get(dt.ctx, dt.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(d)
		updated, err = dt.client.AppsV1().Deployments(dt.ns).Update(dt.ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		dt.t.Fatalf("updating deployment %s: %v", dt.name, err)
	}
	return updated
}

// replicaSets returns the ReplicaSets the Deployment controls, by revision.
func (dt *deploymentTester) replicaSets() ([]*appsv1.ReplicaSet, error) {
	list, err := dt.client.AppsV1().ReplicaSets(dt.ns).List(dt.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing replica sets: %w", err)
	}
	var owned []*appsv1.ReplicaSet
	for i := range list.Items {
		rs := &list.Items[i]
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == dt.uid {
			owned = append(owned, rs)
		}
	}
	slices.SortFunc(owned, func(a, b *appsv1.ReplicaSet) int {
		if c := revisionOf(a) - revisionOf(b); c != 0 {
			return int(c)
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return owned, nil
}

// mustReplicaSets is replicaSets for the test goroutine.
func (dt *deploymentTester) mustReplicaSets() []*appsv1.ReplicaSet {
	dt.t.Helper()
	rsList, err := dt.replicaSets()
	if err != nil {
		dt.t.Fatal(err)
	}
	return rsList
}

// pods returns every pod with the Deployment's labels, terminating ones included.
func (dt *deploymentTester) pods() ([]corev1.Pod, error) {
	list, err := dt.client.CoreV1().Pods(dt.ns).List(dt.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{"app": dt.name}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return list.Items, nil
}

// events returns the events about the Deployment.
func (dt *deploymentTester) events() ([]corev1.Event, error) {
	list, err := dt.client.CoreV1().Events(dt.ns).List(dt.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(dt.uid)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
	return list.Items, nil
}

// eventually polls check every 100ms until it returns nil, and fails the test with
// the last error and a dump of the Deployment's world if it does not within timeout.
func (dt *deploymentTester) eventually(timeout time.Duration, what string, check func() error) {
	dt.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			dt.t.Fatalf("%s: still failing after %v: %v\n%s", what, timeout, err, dt.describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// expectEvent waits for an event about the Deployment from the Deployment controller.
// Events are aggregated and deduplicated, so it asks for at least one.
func (dt *deploymentTester) expectEvent(eventType, reason, message string) {
	dt.t.Helper()
	dt.eventually(30*time.Second, fmt.Sprintf("event %s %s %q", eventType, reason, message), func() error {
		events, err := dt.events()
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Type == eventType && e.Reason == reason && e.Message == message && e.Source.Component == controllerComponent {
				return nil
			}
		}
		return errors.New("no such event yet")
	})
}

// snapshot is what a user sees of a Deployment at one moment: its pods, its
// ReplicaSets and the Deployment, read in that order.
type snapshot struct {
	at     time.Time
	pods   []corev1.Pod
	rsList []*appsv1.ReplicaSet
	d      *appsv1.Deployment
}

func (dt *deploymentTester) snapshot() (snapshot, error) {
	s := snapshot{at: time.Now()}
	var err error
	if s.pods, err = dt.pods(); err != nil {
		return s, err
	}
	if s.rsList, err = dt.replicaSets(); err != nil {
		return s, err
	}
	s.d, err = dt.client.AppsV1().Deployments(dt.ns).Get(dt.ctx, dt.name, metav1.GetOptions{})
	return s, err
}

// waitForRollout waits until the Deployment is at revision with the given image and
// its rollout is complete in every way a user can see: status counts, conditions, old
// ReplicaSets scaled to 0 and only the new ReplicaSet's pods active. It returns the
// Deployment and its new ReplicaSet.
func (dt *deploymentTester) waitForRollout(revision, wantImage string) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	dt.t.Helper()
	var s snapshot
	var newRS *appsv1.ReplicaSet
	dt.eventually(rolloutTimeout, fmt.Sprintf("rollout of revision %s (%s)", revision, wantImage), func() error {
		var err error
		if s, err = dt.snapshot(); err != nil {
			return err
		}
		newRS, err = s.complete(revision, wantImage)
		return err
	})
	return s.d, newRS
}

// complete returns the new ReplicaSet if the snapshot shows a finished rollout of
// revision with wantImage, or says what is missing.
func (s snapshot) complete(revision, wantImage string) (*appsv1.ReplicaSet, error) {
	d := s.d
	replicas := *d.Spec.Replicas
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		return nil, fmt.Errorf("generation %d not observed yet (%d)", d.Generation, d.Status.ObservedGeneration)
	case d.Annotations[revisionAnnotation] != revision:
		return nil, fmt.Errorf("deployment revision is %q, want %q", d.Annotations[revisionAnnotation], revision)
	case d.Spec.Template.Spec.Containers[0].Image != wantImage:
		return nil, fmt.Errorf("deployment image is %s, want %s", d.Spec.Template.Spec.Containers[0].Image, wantImage)
	case d.Status.Replicas != replicas || d.Status.UpdatedReplicas != replicas || d.Status.ReadyReplicas != replicas ||
		d.Status.AvailableReplicas != replicas || d.Status.UnavailableReplicas != 0:
		return nil, fmt.Errorf("status %s, want %d replicas all updated and available", statusCounts(d.Status), replicas)
	}
	if err := expectCondition(d, appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable); err != nil {
		return nil, err
	}
	if err := expectCondition(d, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable); err != nil {
		return nil, err
	}

	var newRS *appsv1.ReplicaSet
	for _, rs := range s.rsList {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = rs
			continue
		}
		if *rs.Spec.Replicas != 0 || rs.Status.Replicas != 0 {
			return nil, fmt.Errorf("old replica set %s still has %d/%d replicas", rs.Name, rs.Status.Replicas, *rs.Spec.Replicas)
		}
	}
	if newRS == nil {
		return nil, errors.New("no replica set has the deployment's template")
	}
	if newRS.Annotations[revisionAnnotation] != revision {
		return nil, fmt.Errorf("new replica set %s has revision %q, want %q", newRS.Name, newRS.Annotations[revisionAnnotation], revision)
	}
	if *newRS.Spec.Replicas != replicas || newRS.Status.AvailableReplicas != replicas {
		return nil, fmt.Errorf("new replica set %s has %d/%d available replicas, want %d", newRS.Name, newRS.Status.AvailableReplicas, *newRS.Spec.Replicas, replicas)
	}

	// Terminating pods are no longer part of the rollout; a test that holds some
	// checks them itself.
	active := 0
	for _, pod := range s.pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		active++
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.UID != newRS.UID {
			return nil, fmt.Errorf("pod %s is not controlled by the new replica set %s", pod.Name, newRS.Name)
		}
	}
	if active != int(replicas) {
		return nil, fmt.Errorf("%d active pods, want %d", active, replicas)
	}
	return newRS, nil
}

// describe dumps the Deployment, its ReplicaSets, pods and events for a failure
// message.
func (dt *deploymentTester) describe() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	d, err := dt.client.AppsV1().Deployments(dt.ns).Get(ctx, dt.name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(&b, "deployment %s/%s: %v\n", dt.ns, dt.name, err)
	} else {
		fmt.Fprintf(&b, "deployment %s/%s: generation %d, observed %d, replicas %d, paused %v, revision %q, collisionCount %v\n",
			dt.ns, dt.name, d.Generation, d.Status.ObservedGeneration, *d.Spec.Replicas, d.Spec.Paused,
			d.Annotations[revisionAnnotation], ptrString(d.Status.CollisionCount))
		fmt.Fprintf(&b, "  status: %s\n", statusCounts(d.Status))
		for _, c := range d.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s %s %q (updated %s, transition %s)\n", c.Type, c.Status, c.Reason, c.Message,
				c.LastUpdateTime.Format(time.TimeOnly), c.LastTransitionTime.Format(time.TimeOnly))
		}
	}
	rsList, err := dt.replicaSets()
	if err != nil {
		fmt.Fprintf(&b, "replica sets: %v\n", err)
	}
	for _, rs := range rsList {
		fmt.Fprintf(&b, "replica set %s: revision %q (history %q), spec %d, status replicas %d ready %d available %d, desired %q, max %q, image %s\n",
			rs.Name, rs.Annotations[revisionAnnotation], rs.Annotations[revisionHistoryAnnotation], *rs.Spec.Replicas,
			rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas,
			rs.Annotations[desiredReplicasAnnotation], rs.Annotations[maxReplicasAnnotation], rs.Spec.Template.Spec.Containers[0].Image)
	}
	pods, err := dt.pods()
	if err != nil {
		fmt.Fprintf(&b, "pods: %v\n", err)
	}
	byOwner := map[string][]string{}
	var owners []string
	for _, pod := range pods {
		owner := "<no controller>"
		if ref := metav1.GetControllerOf(&pod); ref != nil {
			owner = ref.Name
		}
		if _, ok := byOwner[owner]; !ok {
			owners = append(owners, owner)
		}
		state := string(pod.Status.Phase)
		if isPodReady(&pod) {
			state += ",Ready"
		}
		if pod.DeletionTimestamp != nil {
			state += ",Terminating"
		}
		if pod.Spec.NodeName == "" {
			state += ",Unscheduled"
		}
		byOwner[owner] = append(byOwner[owner], pod.Name+"("+state+")")
	}
	slices.Sort(owners)
	for _, owner := range owners {
		fmt.Fprintf(&b, "pods of %s: %s\n", owner, strings.Join(byOwner[owner], " "))
	}
	events, err := dt.events()
	if err != nil {
		fmt.Fprintf(&b, "events: %v\n", err)
	}
	for _, e := range events {
		fmt.Fprintf(&b, "event %s %s %q ×%d from %s\n", e.Type, e.Reason, e.Message, e.Count, e.Source.Component)
	}
	return b.String()
}

func statusCounts(s appsv1.DeploymentStatus) string {
	return fmt.Sprintf("replicas %d, updated %d, ready %d, available %d, unavailable %d, terminating %s",
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas, ptrString(s.TerminatingReplicas))
}

func ptrString(p *int32) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.Itoa(int(*p))
}

// condition returns the Deployment's condition of the given type, or nil.
func condition(d *appsv1.Deployment, condType appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == condType {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func expectCondition(d *appsv1.Deployment, condType appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason string) error {
	c := condition(d, condType)
	if c == nil {
		return fmt.Errorf("no %s condition", condType)
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("condition %s=%s/%s %q, want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// revisionOf returns a ReplicaSet's revision annotation as a number, 0 if it has none.
func revisionOf(rs *appsv1.ReplicaSet) int64 {
	v, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
	return v
}

// podTemplateHash derives the pod-template-hash the way upstream's ComputeHash does
// (pkg/controller/controller_utils.go): FNV-32a over the deterministic dump of the
// template, then the collision count as a little-endian uint32 padded to 8 bytes,
// encoded with the apimachinery "safe" alphabet. The suite re-derives it rather than
// calling the controller's code, so that a ReplicaSet name differing from upstream's
// for the same template fails here.
func podTemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	hasher := fnv.New32a()
	fmt.Fprintf(hasher, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		hasher.Write(b)
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(hasher.Sum32()), 10))
}

// equalIgnoreHash reports whether two templates are the same once the
// pod-template-hash label is dropped: how upstream tells the new ReplicaSet from the
// old ones (deployment_util.go EqualIgnoreHash).
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

// checkHashAgreement checks that one hash names the ReplicaSet and labels it, its
// selector, its template and every one of its pods.
func checkHashAgreement(d *appsv1.Deployment, rs *appsv1.ReplicaSet, pods []corev1.Pod, wantHash string) error {
	const key = appsv1.DefaultDeploymentUniqueLabelKey
	if want := d.Name + "-" + wantHash; rs.Name != want {
		return fmt.Errorf("replica set is named %s, want %s", rs.Name, want)
	}
	for where, got := range map[string]string{
		"labels":          rs.Labels[key],
		"selector":        rs.Spec.Selector.MatchLabels[key],
		"template labels": rs.Spec.Template.Labels[key],
	} {
		if got != wantHash {
			return fmt.Errorf("replica set %s has %s=%q in its %s, want %q", rs.Name, key, got, where, wantHash)
		}
	}
	for _, pod := range pods {
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.UID != rs.UID {
			continue
		}
		if got := pod.Labels[key]; got != wantHash {
			return fmt.Errorf("pod %s has %s=%q, want %q", pod.Name, key, got, wantHash)
		}
	}
	return nil
}

// podCounts classifies pods the way the controllers count them.
type podCounts struct {
	// active pods are neither terminating nor finished; only they count towards a
	// ReplicaSet's replicas.
	active int
	// available pods are active and have been Ready for at least minReadySeconds, by
	// the Ready condition's lastTransitionTime: the controllers' own definition.
	available int
	// terminating pods have a deletionTimestamp and have not finished.
	terminating int
}

func countPods(pods []corev1.Pod, minReadySeconds int32, now time.Time) podCounts {
	var c podCounts
	for i := range pods {
		pod := &pods[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod.DeletionTimestamp != nil {
			c.terminating++
			continue
		}
		c.active++
		if ready := readyCondition(pod); ready != nil && ready.Status == corev1.ConditionTrue &&
			!ready.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).After(now) {
			c.available++
		}
	}
	return c
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func isPodReady(pod *corev1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}
