package endpoints

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// refusal is the message of the admission policy that refuses the controller's writes.
const refusal = "refused by the e2e test"

// When the apiserver refuses a write, the controller reports it with upstream's Warning
// events from endpoint-controller, FailedToCreateEndpoint or FailedToUpdateEndpoint,
// and keeps retrying with backoff, so that the Endpoints catch up once the cause is
// gone. A ValidatingAdmissionPolicy plays the refusing apiserver.
//
// One deliberate difference: upstream builds the Endpoints it creates without a
// namespace, so its FailedToCreateEndpoint event lands in the default namespace; ours
// is recorded next to the Service, where its owner looks.
func TestRefusedWritesAreReportedAsWarningEvents(t *testing.T) {
	e := start(t)
	web := map[string]string{"app": "web"}
	http := servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)
	e.createService(e.newService("frozen", web, http))
	e.runPods(e.newPod("web-0", web))
	e.waitForEndpoints("frozen", "ready web-0 http:8080/TCP")

	lift := e.refuseEndpointsWrites(`object.metadata.name != 'blocked' && !(request.operation == 'UPDATE' && object.metadata.name == 'frozen')`)
	e.createService(e.newService("blocked", web, http))
	e.setReady("web-0", false)

	e.waitForWarning("blocked", "FailedToCreateEndpoint",
		fmt.Sprintf("Failed to create endpoint for service %s/blocked: ", e.Namespace))
	e.waitForWarning("frozen", "FailedToUpdateEndpoint",
		fmt.Sprintf("Failed to update endpoint %s/frozen: ", e.Namespace))

	t.Log("the policy is lifted; the retries go through")
	lift()
	e.waitForEndpoints("blocked", "notReady web-0 http:8080/TCP")
	e.waitForEndpoints("frozen", "notReady web-0 http:8080/TCP")
}

// refuseEndpointsWrites makes the apiserver refuse creates and updates of Endpoints in
// the test's namespace for which the CEL expression allow is false, and returns a
// function that lifts the refusal. It returns once the policy is in force.
func (e *env) refuseEndpointsWrites(allow string) (lift func()) {
	e.t.Helper()
	name := "e2e-refuse-endpoints-" + e.Namespace
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: e.Namespace}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule: admissionv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"endpoints"},
						},
					},
				}},
			},
			Validations: []admissionv1.Validation{{Expression: allow, Message: refusal}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	admission := e.Client.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(e.ctx, policy, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	lift = func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		for _, err := range []error{
			admission.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}),
			admission.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				e.t.Errorf("lifting the admission policy: %v", err)
			}
		}
	}
	e.t.Cleanup(lift)

	// The apiserver loads policies asynchronously; a dry run shows when it enforces this
	// one.
	probe := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "blocked"}}
	framework.EventuallyEvery(e.t, convergeTimeout, 200*time.Millisecond, func() error {
		_, err := e.Client.CoreV1().Endpoints(e.Namespace).Create(e.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), refusal) {
			return nil
		}
		return fmt.Errorf("the admission policy is not in force yet (dry-run create: %v)", err)
	})
	return lift
}

// waitForWarning waits for a Warning event with reason about the Endpoints named name,
// from endpoint-controller, whose message starts with prefix and carries the
// apiserver's refusal.
func (e *env) waitForWarning(name, reason, prefix string) {
	e.t.Helper()
	framework.EventuallyEvery(e.t, convergeTimeout, 500*time.Millisecond, func() error {
		events, err := e.Client.CoreV1().Events(e.Namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind != "Endpoints" || ev.InvolvedObject.Name != name || ev.Reason != reason {
				continue
			}
			if ev.Type == corev1.EventTypeWarning && ev.Source.Component == "endpoint-controller" &&
				strings.HasPrefix(ev.Message, prefix) && strings.Contains(ev.Message, refusal) {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s %s from %s: %s", ev.Type, ev.Reason, ev.Source.Component, ev.Message))
		}
		return fmt.Errorf("no Warning %s event for Endpoints %s with message %q...; similar events: %v", reason, name, prefix, seen)
	})
}
