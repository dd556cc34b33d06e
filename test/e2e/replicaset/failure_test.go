package replicaset

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
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

// A ValidatingAdmissionPolicy forbids deleting the pods of the namespace, and the
// ReplicaSet is scaled down: the controller reports the refused deletes with a
// ReplicaFailure condition of reason FailedDelete and Warning events, keeps retrying,
// and finishes the scale-down once the policy is gone.
func TestRefusedPodDeletionsSetReplicaFailureUntilTheCauseIsRemoved(t *testing.T) {
	e := startEnv(t)
	rs := e.createReplicaSet(newReplicaSet("web", 3))
	e.waitForStatus("web", settled(3))
	pods := e.activePodsOf(rs)

	removePolicy := e.forbidPodDeletion("pods of this namespace are protected")
	refused := regexp.MustCompile(`^pods "web-[a-z0-9]{5}" is forbidden: ValidatingAdmissionPolicy '.+' with binding '.+' denied request: pods of this namespace are protected$`)

	e.scale("web", 1)
	var failure appsv1.ReplicaSetCondition
	e.waitFor(func() error {
		rs := e.getReplicaSet("web")
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && rs.Status.ObservedGeneration == rs.Generation {
				failure = c
				return nil
			}
		}
		return fmt.Errorf("no ReplicaFailure condition for generation %d: %+v", rs.Generation, rs.Status)
	})
	// Upstream's calculateStatus: reason FailedDelete because there are too many pods;
	// the message is RealPodControl.DeletePod's error, which wraps the apiserver's.
	if err, ok := strings.CutPrefix(failure.Message, "unable to delete pods: "); failure.Status != v1.ConditionTrue ||
		failure.Reason != "FailedDelete" || !ok || !refused.MatchString(err) {
		t.Errorf("ReplicaFailure condition %+v, want status True, reason FailedDelete and a message %q + an error matching %q",
			failure, "unable to delete pods: ", refused)
	}
	if got := countsOf(e.getReplicaSet("web")); got != settled(3) {
		t.Errorf("status %+v while no delete succeeds, want %+v", got, settled(3))
	}
	e.waitFor(func() error {
		messages := e.eventMessages("web", v1.EventTypeWarning, "FailedDelete")
		for _, message := range messages {
			message = strings.TrimPrefix(message, "(combined from similar events): ")
			if err, ok := strings.CutPrefix(message, "Error deleting: "); !ok || !refused.MatchString(err) {
				return fmt.Errorf("Warning FailedDelete event %q, want %q and an error matching %q", message, "Error deleting: ", refused)
			}
		}
		if len(messages) < 2 {
			return fmt.Errorf("%d Warning FailedDelete events, want at least 2", len(messages))
		}
		return nil
	})

	t.Log("remove the policy")
	removePolicy()
	rs = e.waitForStatus("web", settled(1))
	if len(rs.Status.Conditions) != 0 {
		t.Errorf("conditions = %+v after recovery, want none", rs.Status.Conditions)
	}
	remaining := e.activePodsOf(rs)
	deleted := sets.List(sets.New(podNames(pods)...).Delete(podNames(remaining)...))
	e.waitForEvents("web", v1.EventTypeNormal, "SuccessfulDelete", prefixed("Deleted pod: ", deleted))
}

// forbidPodDeletion installs a ValidatingAdmissionPolicy that refuses every pod
// deletion in the test's namespace with message, waits until the apiserver enforces
// it, and returns a function that removes it (also called when the test ends).
func (e *env) forbidPodDeletion(message string) (remove func()) {
	e.t.Helper()
	name := "forbid-pod-deletion-" + e.ns
	admission := e.client.AdmissionregistrationV1()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
			},
		},
	}
	if _, err := admission.ValidatingAdmissionPolicies().Create(e.ctx(), policy, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating ValidatingAdmissionPolicy: %v", err)
	}
	var once sync.Once
	remove = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = admission.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_ = admission.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
	e.t.Cleanup(remove)
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(e.ctx(), binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating ValidatingAdmissionPolicyBinding: %v", err)
	}
	// The apiserver loads policies through an informer; a dry-run delete goes through
	// admission without deleting anything.
	probe := e.createPod(newPod("policy-probe", map[string]string{"app": "probe"}))
	e.waitFor(func() error {
		err := e.client.CoreV1().Pods(e.ns).Delete(e.ctx(), probe.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), message) {
			return fmt.Errorf("a dry-run delete returned %v, want the policy to refuse it", err)
		}
		return nil
	})
	return remove
}

// A namespace is being deleted (nothing removes its content here, as no namespace
// controller runs) and a pod of a ReplicaSet goes: the apiserver refuses the
// replacement because the namespace is terminating. Upstream's manageReplicas treats
// that as done rather than as a failure: no ReplicaFailure condition, no FailedCreate
// event, and no retry, since the creation it expects is never observed.
func TestAReplicaSetInATerminatingNamespaceDoesNotReportOrRetryRefusedCreates(t *testing.T) {
	e := startEnv(t)
	rs := e.createReplicaSet(newReplicaSet("web", 2))
	e.waitForStatus("web", settled(2))
	pods := podNames(e.activePodsOf(rs))

	if err := e.client.CoreV1().Namespaces().Delete(e.ctx(), e.ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(func() error {
		ns, err := e.client.CoreV1().Namespaces().Get(e.ctx(), e.ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ns.Status.Phase != v1.NamespaceTerminating {
			return fmt.Errorf("namespace %s is %s, want Terminating", e.ns, ns.Status.Phase)
		}
		return nil
	})

	deletedAt := time.Now()
	e.deletePod(pods[0])
	e.waitForStatus("web", settled(1))
	creates := func() []auditEvent {
		return e.controllerRequests(deletedAt, func(ev *auditEvent) bool {
			return ev.ObjectRef.Resource == "pods" && ev.Verb == "create"
		})
	}
	e.waitFor(func() error {
		if len(creates()) == 0 {
			return fmt.Errorf("the controller has not tried to replace pod %s", pods[0])
		}
		return nil
	})
	// Further syncs (the status write above wakes the controller) get a moment to
	// show that they do not try again.
	time.Sleep(2 * time.Second)

	if got := creates(); len(got) != 1 || got[0].Code() != http.StatusForbidden {
		t.Errorf("pod creations by the controller: %v, want one, refused with 403", verbs(got))
	}
	if got := e.getReplicaSet("web"); len(got.Status.Conditions) != 0 {
		t.Errorf("conditions = %+v, want none", got.Status.Conditions)
	}
	// The apiserver would refuse the events too, so look for attempts to write them.
	if writes := e.controllerProcessRequests(deletedAt, func(ev *auditEvent) bool {
		return ev.ObjectRef.Resource == "events" && ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch"
	}); len(writes) != 0 {
		t.Errorf("the controller tried to record events: %v", verbs(writes))
	}
}
