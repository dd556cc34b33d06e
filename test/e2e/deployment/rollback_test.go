package deployment

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const changeCause = "kubernetes.io/change-cause"

// Rolling back is rolling out an earlier template again. Whether the user restores the
// template or asks for a revision with the deprecated rollback annotation, the
// ReplicaSet of that template is reused: it gets the next revision number and keeps
// its former ones in revision-history (sync.go getNewReplicaSet, rollback.go).
func TestRollbackReusesTheReplicaSetOfTheEarlierTemplate(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 2)
	d.Annotations = map[string]string{changeCause: "v1"}
	web := createDeployment(t, f, d)
	_, first := web.waitForRollout("1", image(1))

	web.update(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image(2)
		d.Annotations[changeCause] = "v2"
	})
	_, second := web.waitForRollout("2", image(2))

	// Back to the first template by hand: no third ReplicaSet.
	web.update(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image(1)
		d.Annotations[changeCause] = "back to v1"
	})
	_, rs := web.waitForRollout("3", image(1))
	expectReusedReplicaSet(t, web, rs, first, "3", "1", "back to v1")
	if n := len(web.mustReplicaSets()); n != 2 {
		t.Fatalf("rolling back made a new replica set: %d replica sets, want 2\n%s", n, web.describe())
	}

	// The rollback annotation asks for revision 2. The apiserver still stores it (as the
	// internal spec.rollbackTo); the controller copies that revision's template and
	// annotations into the Deployment and clears the request.
	web.update(func(d *appsv1.Deployment) { d.Annotations[appsv1.DeprecatedRollbackTo] = "2" })
	rolledBack, rs := web.waitForRollout("4", image(2))
	expectReusedReplicaSet(t, web, rs, second, "4", "2", "v2")
	expectRollbackCleared(t, rolledBack, "v2")
	web.expectEvent(corev1.EventTypeNormal, "DeploymentRollback", `Rolled back deployment "web" to revision 2`)

	// Revision 0 means the one before the current: 3, the first ReplicaSet again.
	web.update(func(d *appsv1.Deployment) { d.Annotations[appsv1.DeprecatedRollbackTo] = "0" })
	rolledBack, rs = web.waitForRollout("5", image(1))
	expectReusedReplicaSet(t, web, rs, first, "5", "1,3", "back to v1")
	expectRollbackCleared(t, rolledBack, "back to v1")
	web.expectEvent(corev1.EventTypeNormal, "DeploymentRollback", `Rolled back deployment "web" to revision 3`)

	// A revision that never existed changes nothing but the request, which is cleared.
	web.update(func(d *appsv1.Deployment) { d.Annotations[appsv1.DeprecatedRollbackTo] = "99" })
	web.expectEvent(corev1.EventTypeWarning, "DeploymentRollbackRevisionNotFound", "Unable to find the revision to rollback to.")
	web.eventually(30*time.Second, "unknown rollback revision cleared", func() error {
		d := web.get()
		if _, ok := d.Annotations[appsv1.DeprecatedRollbackTo]; ok {
			return fmt.Errorf("rollback request still there")
		}
		if d.Status.ObservedGeneration < d.Generation {
			return fmt.Errorf("generation %d not observed yet", d.Generation)
		}
		return nil
	})
	web.waitForRollout("5", image(1))
	if n := len(web.mustReplicaSets()); n != 2 {
		t.Fatalf("a rollback to an unknown revision made a new replica set\n%s", web.describe())
	}
}

// expectReusedReplicaSet checks that rs is the earlier ReplicaSet want, now at
// revision with the given revision-history and the Deployment's change cause.
func expectReusedReplicaSet(t *testing.T, web *deploymentTester, rs, want *appsv1.ReplicaSet, revision, history, cause string) {
	t.Helper()
	if rs.UID != want.UID {
		t.Fatalf("revision %s runs on replica set %s, want the earlier %s reused\n%s", revision, rs.Name, want.Name, web.describe())
	}
	if got := rs.Annotations[revisionHistoryAnnotation]; got != history {
		t.Errorf("replica set %s has revision-history %q, want %q", rs.Name, got, history)
	}
	if got := rs.Annotations[changeCause]; got != cause {
		t.Errorf("replica set %s has change cause %q, want %q", rs.Name, got, cause)
	}
}

// expectRollbackCleared checks that the controller removed the rollback request and
// replaced the Deployment's annotations with those of the revision rolled back to.
func expectRollbackCleared(t *testing.T, d *appsv1.Deployment, cause string) {
	t.Helper()
	if v, ok := d.Annotations[appsv1.DeprecatedRollbackTo]; ok {
		t.Errorf("rollback request %q still on the deployment", v)
	}
	if got := d.Annotations[changeCause]; got != cause {
		t.Errorf("deployment change cause is %q after the rollback, want %q from the replica set", got, cause)
	}
}

// Old ReplicaSets beyond revisionHistoryLimit are deleted once a rollout completes,
// the oldest revisions first (sync.go cleanupDeployment).
func TestRevisionHistoryLimitDeletesTheOldestReplicaSets(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 1)
	d.Spec.RevisionHistoryLimit = ptr.To(int32(1))
	web := createDeployment(t, f, d)

	var names []string
	for revision := 1; revision <= 4; revision++ {
		if revision > 1 {
			web.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image(revision) })
		}
		_, rs := web.waitForRollout(fmt.Sprint(revision), image(revision))
		names = append(names, rs.Name)
		// The new ReplicaSet and at most one old one: the previous revision.
		web.expectReplicaSets(names[max(0, len(names)-2):]...)
	}

	web.update(func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To(int32(0)) })
	web.expectReplicaSets(names[3])
	for _, name := range names[:3] {
		if _, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Get(f.Context(), name, metav1.GetOptions{}); err == nil {
			t.Errorf("replica set %s of an old revision still exists", name)
		}
	}
}

// expectReplicaSets waits until the Deployment controls exactly the named ReplicaSets.
func (dt *deploymentTester) expectReplicaSets(names ...string) {
	dt.t.Helper()
	dt.eventually(rolloutTimeout, fmt.Sprintf("replica sets %v", names), func() error {
		rsList, err := dt.replicaSets()
		if err != nil {
			return err
		}
		var got []string
		for _, rs := range rsList {
			got = append(got, rs.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			return fmt.Errorf("replica sets are %v", got)
		}
		return nil
	})
}
