package replicaset

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ResourceQuota allows 2 pods and a ReplicaSet wants 4: the apiserver refuses the
// rest, and the controller says so on the ReplicaSet (a ReplicaFailure condition with
// reason FailedCreate and the apiserver's message) and in Warning events. Once the
// quota is gone, the controller creates the missing pods and removes the condition.
func TestRefusedPodCreationsSetReplicaFailureUntilTheCauseIsRemoved(t *testing.T) {
	e := startEnv(t)
	e.createPodQuota("pods", 2)
	e.createReplicaSet(newReplicaSet("web", 4))

	// The apiserver's admission error, which names the refused pod (its name is
	// generated before admission).
	refused := regexp.MustCompile(`^pods "web-[a-z0-9]{5}" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2$`)
	var failure appsv1.ReplicaSetCondition
	e.waitFor(func() error {
		rs := e.getReplicaSet("web")
		if got := countsOf(rs); got != settled(2) {
			return fmt.Errorf("status %+v, want %+v", got, settled(2))
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				failure = c
				return nil
			}
		}
		return fmt.Errorf("no ReplicaFailure condition: %+v", rs.Status.Conditions)
	})
	// Upstream's calculateStatus: status True, reason FailedCreate (too few pods), the
	// error of the failed create as the message.
	if failure.Status != v1.ConditionTrue || failure.Reason != "FailedCreate" || !refused.MatchString(failure.Message) || failure.LastTransitionTime.IsZero() {
		t.Errorf("ReplicaFailure condition %+v, want status True, reason FailedCreate, a message matching %q and a transition time", failure, refused)
	}
	// Upstream's RealPodControl: Warning FailedCreate "Error creating: <err>". After
	// ten alike the event correlator combines them, prefixing the message. The
	// controller retries (one pod per sync, slow start), so failures pile up.
	e.waitFor(func() error {
		messages := e.eventMessages("web", v1.EventTypeWarning, "FailedCreate")
		for _, message := range messages {
			message = strings.TrimPrefix(message, "(combined from similar events): ")
			if err, ok := strings.CutPrefix(message, "Error creating: "); !ok || !refused.MatchString(err) {
				return fmt.Errorf("Warning FailedCreate event %q, want %q and an error matching %q", message, "Error creating: ", refused)
			}
		}
		if len(messages) < 3 {
			return fmt.Errorf("%d Warning FailedCreate events, want at least 3", len(messages))
		}
		return nil
	})
	// Each retry fails with another pod name, but the condition keeps the first
	// failure: upstream's calculateStatus adds it only when there is none.
	for _, c := range e.getReplicaSet("web").Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && !reflect.DeepEqual(c, failure) {
			t.Errorf("ReplicaFailure condition changed while the failure went on: %+v, was %+v", c, failure)
		}
	}
	if created := e.eventMessages("web", v1.EventTypeNormal, "SuccessfulCreate"); len(created) != 2 {
		t.Errorf("SuccessfulCreate events %q, want the 2 pods the quota allows", created)
	}

	t.Log("delete the quota")
	if err := e.client.CoreV1().ResourceQuotas(e.ns).Delete(e.ctx(), "pods", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller retries with backoff (a ReplicaSet is never given up on), so the
	// recovery needs no further event.
	rs := e.waitForStatus("web", settled(4))
	if len(rs.Status.Conditions) != 0 {
		t.Errorf("conditions = %+v after recovery, want none", rs.Status.Conditions)
	}
	if created := e.eventMessages("web", v1.EventTypeNormal, "SuccessfulCreate"); len(created) != 4 {
		t.Errorf("SuccessfulCreate events %q, want 4", created)
	}
}

// createPodQuota creates a ResourceQuota of pods in the test's namespace. No quota
// controller runs, so the test writes the status that the quota admission plugin
// reads (it refuses everything while the usage is unknown); the plugin then counts the
// pods it admits itself.
func (e *env) createPodQuota(name string, pods int64) {
	e.t.Helper()
	hard := v1.ResourceList{v1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
	quota, err := e.client.CoreV1().ResourceQuotas(e.ns).Create(e.ctx(), &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating quota: %v", err)
	}
	quota.Status = v1.ResourceQuotaStatus{
		Hard: hard,
		Used: v1.ResourceList{v1.ResourcePods: *resource.NewQuantity(0, resource.DecimalSI)},
	}
	if _, err := e.client.CoreV1().ResourceQuotas(e.ns).UpdateStatus(e.ctx(), quota, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("writing quota status: %v", err)
	}
}
