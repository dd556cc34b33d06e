package podcontrol

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func newOwner(name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "rs-uid"}}
}

func newTemplate() *v1.PodTemplateSpec {
	return &v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"note": "copied"},
			Finalizers:  []string{"example.com/keep"},
			// Name and namespace of a template are never copied.
			Name: "ignored",
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
	}
}

// clientNamingPods returns a fake clientset that assigns names from generateName like
// the apiserver does, optionally failing every create with createErr.
func clientNamingPods(createErr error) *fake.Clientset {
	client := fake.NewClientset()
	n := 0
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if createErr != nil {
			return true, nil, createErr
		}
		pod := action.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		if pod.Name == "" {
			n++
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, n)
		}
		return false, nil, nil
	})
	return client
}

func drain(recorder *record.FakeRecorder) []string {
	var events []string
	for {
		select {
		case e := <-recorder.Events:
			events = append(events, e)
		default:
			return events
		}
	}
}

func TestCreatePodCopiesTheTemplateAndRecordsAnEvent(t *testing.T) {
	client := clientNamingPods(nil)
	recorder := record.NewFakeRecorder(10)
	var written []string
	control := &Real{Client: client, Recorder: recorder, OnWrite: func(pod *v1.Pod, ref *metav1.OwnerReference) {
		written = append(written, pod.Name+" of "+ref.Name)
	}}
	owner := newOwner("web")
	ref := metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))

	if err := control.CreatePod(context.Background(), "default", newTemplate(), owner, ref); err != nil {
		t.Fatalf("CreatePod: %v", err)
	}
	pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("listed %d pods (err %v), want 1", len(pods.Items), err)
	}
	pod := pods.Items[0]
	if pod.GenerateName != "web-" || pod.Name != "web-00001" {
		t.Errorf("name %q generateName %q, want web-00001 from web-", pod.Name, pod.GenerateName)
	}
	template := newTemplate()
	if !reflect.DeepEqual(pod.Labels, template.Labels) || !reflect.DeepEqual(pod.Annotations, template.Annotations) ||
		!reflect.DeepEqual(pod.Finalizers, template.Finalizers) || !reflect.DeepEqual(pod.Spec, template.Spec) {
		t.Errorf("pod metadata/spec not copied from the template: %+v", pod)
	}
	if !reflect.DeepEqual(pod.OwnerReferences, []metav1.OwnerReference{*ref}) {
		t.Errorf("ownerReferences %+v, want only the controllerRef", pod.OwnerReferences)
	}
	if got := drain(recorder); !reflect.DeepEqual(got, []string{"Normal SuccessfulCreate Created pod: web-00001"}) {
		t.Errorf("events %q", got)
	}
	if !reflect.DeepEqual(written, []string{"web-00001 of web"}) {
		t.Errorf("OnWrite calls %q", written)
	}
}

func TestCreatePodRefusesBadInput(t *testing.T) {
	owner := newOwner("web")
	good := metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	noBlock := good.DeepCopy()
	noBlock.BlockOwnerDeletion = nil
	notController := good.DeepCopy()
	notController.Controller = new(false)
	noKind := good.DeepCopy()
	noKind.Kind = ""
	noLabels := newTemplate()
	noLabels.Labels = nil

	tests := []struct {
		name     string
		template *v1.PodTemplateSpec
		ref      *metav1.OwnerReference
		wantErr  string
	}{
		{"template without labels", noLabels, good, "unable to create pods, no labels"},
		{"nil controllerRef", newTemplate(), nil, "controllerRef is nil"},
		{"controllerRef without kind", newTemplate(), noKind, "empty Kind"},
		{"controllerRef that is not a controller", newTemplate(), notController, "Controller is not set to true"},
		{"controllerRef without blockOwnerDeletion", newTemplate(), noBlock, "BlockOwnerDeletion is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := clientNamingPods(nil)
			recorder := record.NewFakeRecorder(10)
			control := &Real{Client: client, Recorder: recorder}
			err := control.CreatePod(context.Background(), "default", tt.template, owner, tt.ref)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if len(client.Actions()) != 0 {
				t.Errorf("bad input reached the API: %v", client.Actions())
			}
		})
	}
}

func TestCreatePodFailureEventIsSuppressedWhileTheNamespaceTerminates(t *testing.T) {
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: "namespace default is being terminated",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}},
	}}
	tests := []struct {
		name       string
		createErr  error
		wantEvents []string
	}{
		{"quota error is reported", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("exceeded quota")),
			[]string{`Warning FailedCreate Error creating: pods is forbidden: exceeded quota`}},
		{"terminating namespace is silent", terminating, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recorder := record.NewFakeRecorder(10)
			control := &Real{Client: clientNamingPods(tt.createErr), Recorder: recorder}
			owner := newOwner("web")
			err := control.CreatePod(context.Background(), "default", newTemplate(), owner,
				metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")))
			if err == nil {
				t.Fatal("want the create error returned")
			}
			if got := drain(recorder); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events %q, want %q", got, tt.wantEvents)
			}
		})
	}
}

func TestDeletePodReportsEventsAndAllowsMissingPods(t *testing.T) {
	tests := []struct {
		name        string
		existing    bool
		deleteErr   error
		wantErr     func(error) bool
		wantEvents  []string
		wantDeleted bool
	}{
		{"existing pod", true, nil, func(err error) bool { return err == nil },
			[]string{"Normal SuccessfulDelete Deleted pod: web-1"}, true},
		{"missing pod is NotFound without an event", false, nil, apierrors.IsNotFound, nil, false},
		{"failed delete is reported", true, errors.New("etcd timeout"),
			func(err error) bool {
				return err != nil && strings.Contains(err.Error(), "unable to delete pods: etcd timeout")
			},
			[]string{"Warning FailedDelete Error deleting: etcd timeout"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.existing {
				client = fake.NewClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}})
			}
			if tt.deleteErr != nil {
				client.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.deleteErr
				})
			}
			recorder := record.NewFakeRecorder(10)
			control := &Real{Client: client, Recorder: recorder}
			err := control.DeletePod(context.Background(), "default", "web-1", newOwner("web"))
			if !tt.wantErr(err) {
				t.Errorf("unexpected err %v", err)
			}
			if got := drain(recorder); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events %q, want %q", got, tt.wantEvents)
			}
			_, getErr := client.CoreV1().Pods("default").Get(context.Background(), "web-1", metav1.GetOptions{})
			if deleted := apierrors.IsNotFound(getErr); deleted != (tt.wantDeleted || !tt.existing) {
				t.Errorf("pod deleted = %v", deleted)
			}
		})
	}
}

func TestPatchPodReportsTheWriteWithTheNewControllerRef(t *testing.T) {
	client := fake.NewClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", UID: "p"}})
	var written []*metav1.OwnerReference
	control := &Real{Client: client, Recorder: record.NewFakeRecorder(1), OnWrite: func(_ *v1.Pod, ref *metav1.OwnerReference) {
		written = append(written, ref)
	}}
	patch := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}],"uid":"p"}}`
	if err := control.PatchPod(context.Background(), "default", "orphan", []byte(patch)); err != nil {
		t.Fatalf("PatchPod: %v", err)
	}
	if len(written) != 1 || written[0] == nil || written[0].UID != "rs-uid" {
		t.Fatalf("OnWrite got %v, want the new controller reference", written)
	}
	if err := control.PatchPod(context.Background(), "default", "missing", []byte(patch)); !apierrors.IsNotFound(err) {
		t.Fatalf("patching a missing pod: err = %v, want NotFound", err)
	}
	if len(written) != 1 {
		t.Fatal("a failed patch must not be reported as a write")
	}
}

func TestGenerateNamePrefixFallsBackToTheOwnerNameWhenTooLong(t *testing.T) {
	tests := []struct {
		owner string
		want  string
	}{
		{"web", "web-"},
		// Upstream's prefix check masks the trailing dash and one more character, so
		// even a 253-character name (the longest valid one) gets its dash.
		{strings.Repeat("a", 253), strings.Repeat("a", 253) + "-"},
		{strings.Repeat("a", 254), strings.Repeat("a", 254)},
	}
	for _, tt := range tests {
		if got := generateNamePrefix(tt.owner); got != tt.want {
			t.Errorf("generateNamePrefix(%d chars) = %d chars, want %d", len(tt.owner), len(got), len(tt.want))
		}
	}
}

func TestPodFromTemplateDoesNotShareTheTemplate(t *testing.T) {
	template := newTemplate()
	pod := PodFromTemplate(template, "web", nil)
	pod.Labels["extra"] = "x"
	pod.Annotations["extra"] = "x"
	pod.Finalizers[0] = "changed"
	pod.Spec.Containers[0].Image = "changed"
	if !reflect.DeepEqual(template, newTemplate()) {
		t.Error("modifying the pod changed the template")
	}
	if len(pod.OwnerReferences) != 0 {
		t.Error("nil controllerRef must add no ownerReference")
	}
}
