// Package podcontrol creates, deletes and patches pods on behalf of a workload
// controller and records the events a user sees on the owner, with upstream's reasons
// and messages (kubectl describe rs shows the same lines as with kube-controller-manager).
//
// Controllers depend on Interface, so unit tests can use Fake instead of an apiserver.
package podcontrol

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Event reasons, shared with the ReplicaFailure condition of the owner.
const (
	// FailedCreateReason is used when a pod could not be created.
	FailedCreateReason = "FailedCreate"
	// SuccessfulCreateReason is used when a pod was created.
	SuccessfulCreateReason = "SuccessfulCreate"
	// FailedDeleteReason is used when a pod could not be deleted.
	FailedDeleteReason = "FailedDelete"
	// SuccessfulDeleteReason is used when a pod was deleted.
	SuccessfulDeleteReason = "SuccessfulDelete"
)

// ErrNoLabels is returned for a template without labels: the pod could never be
// selected by its owner, so it would be orphaned at birth.
var ErrNoLabels = errors.New("unable to create pods, no labels")

// Interface is what a controller needs to manage its pods.
type Interface interface {
	// CreatePod creates one pod from template in namespace, named "<owner>-<random>",
	// with controllerRef as its only ownerReference, and records an event on owner.
	CreatePod(ctx context.Context, namespace string, template *v1.PodTemplateSpec, owner runtime.Object, controllerRef *metav1.OwnerReference) error
	// DeletePod deletes the named pod and records an event on owner. A pod that is
	// already gone yields a NotFound error and no event.
	DeletePod(ctx context.Context, namespace, name string, owner runtime.Object) error
	// PatchPod applies a strategic-merge patch to the named pod.
	PatchPod(ctx context.Context, namespace, name string, patch []byte) error
}

// Real is the Interface backed by the API.
type Real struct {
	// Client writes the pods.
	Client kubernetes.Interface
	// Recorder records events on the owner.
	Recorder record.EventRecorder
	// OnWrite, if set, is called with every pod this controller created or patched and
	// the pod's controller reference (nil if it has none), so that the caller can wait
	// for its informer to catch up with its own writes.
	OnWrite func(pod *v1.Pod, controllerRef *metav1.OwnerReference)
}

var _ Interface = &Real{}

// CreatePod implements Interface.
func (r *Real) CreatePod(ctx context.Context, namespace string, template *v1.PodTemplateSpec, owner runtime.Object, controllerRef *metav1.OwnerReference) error {
	if err := validateControllerRef(controllerRef); err != nil {
		return err
	}
	ownerMeta, err := meta.Accessor(owner)
	if err != nil {
		return fmt.Errorf("owner of the pods has no metadata: %w", err)
	}
	pod := PodFromTemplate(template, ownerMeta.GetName(), controllerRef)
	if len(pod.Labels) == 0 {
		return ErrNoLabels
	}
	created, err := r.Client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		// Every create fails while the namespace is terminating; an event per attempt
		// would only add noise to a namespace that is going away.
		if !apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			r.Recorder.Eventf(owner, v1.EventTypeWarning, FailedCreateReason, "Error creating: %v", err)
		}
		return err
	}
	if r.OnWrite != nil {
		r.OnWrite(created, controllerRef)
	}
	klog.FromContext(ctx).V(4).Info("Controller created pod", "controller", ownerMeta.GetName(), "pod", klog.KObj(created))
	r.Recorder.Eventf(owner, v1.EventTypeNormal, SuccessfulCreateReason, "Created pod: %v", created.Name)
	return nil
}

// DeletePod implements Interface.
func (r *Real) DeletePod(ctx context.Context, namespace, name string, owner runtime.Object) error {
	ownerMeta, err := meta.Accessor(owner)
	if err != nil {
		return fmt.Errorf("owner of the pods has no metadata: %w", err)
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Deleting pod", "controller", ownerMeta.GetName(), "pod", klog.KRef(namespace, name))
	if err := r.Client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			// Someone else deleted it first: that is what we wanted, so no event.
			logger.V(4).Info("Pod has already been deleted", "pod", klog.KRef(namespace, name))
			return err
		}
		r.Recorder.Eventf(owner, v1.EventTypeWarning, FailedDeleteReason, "Error deleting: %v", err)
		return fmt.Errorf("unable to delete pods: %w", err)
	}
	r.Recorder.Eventf(owner, v1.EventTypeNormal, SuccessfulDeleteReason, "Deleted pod: %v", name)
	return nil
}

// PatchPod implements Interface.
func (r *Real) PatchPod(ctx context.Context, namespace, name string, patch []byte) error {
	pod, err := r.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	if r.OnWrite != nil {
		r.OnWrite(pod, metav1.GetControllerOfNoCopy(pod))
	}
	return nil
}

// PodFromTemplate builds the pod an owner named ownerName creates from template: the
// template's labels, annotations, finalizers and spec (copied, so the template, usually
// from a cache, is never shared), generateName "<ownerName>-", and controllerRef as
// its only ownerReference (if not nil).
func PodFromTemplate(template *v1.PodTemplateSpec, ownerName string, controllerRef *metav1.OwnerReference) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Labels:       copyMap(template.Labels),
			Annotations:  copyMap(template.Annotations),
			GenerateName: generateNamePrefix(ownerName),
			Finalizers:   append([]string{}, template.Finalizers...),
		},
		Spec: *template.Spec.DeepCopy(),
	}
	if controllerRef != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*controllerRef}
	}
	return pod
}

// generateNamePrefix returns "<owner>-", which makes pod names readable, unless that is
// not a valid name prefix (the owner name is at the length limit); then the bare owner
// name, as upstream.
func generateNamePrefix(ownerName string) string {
	prefix := ownerName + "-"
	if len(apimachineryvalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return ownerName
	}
	return prefix
}

func copyMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// validateControllerRef refuses references that would create pods the owner cannot
// find (no kind) or that the garbage collector would not protect.
func validateControllerRef(ref *metav1.OwnerReference) error {
	switch {
	case ref == nil:
		return errors.New("controllerRef is nil")
	case ref.APIVersion == "":
		return errors.New("controllerRef has empty APIVersion")
	case ref.Kind == "":
		return errors.New("controllerRef has empty Kind")
	case ref.Controller == nil || !*ref.Controller:
		return errors.New("controllerRef.Controller is not set to true")
	case ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion:
		return errors.New("controllerRef.BlockOwnerDeletion is not set")
	}
	return nil
}
