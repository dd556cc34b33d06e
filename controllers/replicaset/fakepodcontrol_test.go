package replicaset

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mini-kcm/mini-kcm/controllers/podcontrol"
)

// fakePodControl records the calls the controller makes instead of talking to an apiserver. It is
// safe for concurrent use (controllers create and delete in parallel).
type fakePodControl struct {
	mu sync.Mutex
	// Templates holds the template of every CreatePod call, in call order.
	Templates []v1.PodTemplateSpec
	// ControllerRefs holds the controllerRef of every CreatePod call.
	ControllerRefs []metav1.OwnerReference
	// DeletedPods holds the name of every DeletePod call.
	DeletedPods []string
	// Patches holds the body of every PatchPod call.
	Patches [][]byte
	// Err, if set, is returned by every call (after recording it).
	Err error
	// CreateLimit, if positive, makes every CreatePod call after the first
	// CreateLimit fail.
	CreateLimit int
	// CreateCalls counts CreatePod calls, including failed ones.
	CreateCalls int
}

var _ podcontrol.Interface = &fakePodControl{}

// CreatePod implements podcontrol.Interface.
func (f *fakePodControl) CreatePod(_ context.Context, _ string, template *v1.PodTemplateSpec, _ runtime.Object, controllerRef *metav1.OwnerReference) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.CreateCalls++
	if f.CreateLimit > 0 && f.CreateCalls > f.CreateLimit {
		return fmt.Errorf("not creating pod, limit %d already reached (create call %d)", f.CreateLimit, f.CreateCalls)
	}
	f.Templates = append(f.Templates, *template.DeepCopy())
	f.ControllerRefs = append(f.ControllerRefs, *controllerRef)
	return f.Err
}

// DeletePod implements podcontrol.Interface.
func (f *fakePodControl) DeletePod(_ context.Context, _, name string, _ runtime.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.DeletedPods = append(f.DeletedPods, name)
	return f.Err
}

// PatchPod implements podcontrol.Interface.
func (f *fakePodControl) PatchPod(_ context.Context, _, _ string, patch []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Patches = append(f.Patches, patch)
	return f.Err
}

// Counts returns how many pods were created, deleted and patched so far.
func (f *fakePodControl) Counts() (created, deleted, patched int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Templates), len(f.DeletedPods), len(f.Patches)
}

// Reset forgets every recorded call and the create limit.
func (f *fakePodControl) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Templates, f.ControllerRefs, f.DeletedPods, f.Patches = nil, nil, nil, nil
	f.CreateLimit, f.CreateCalls = 0, 0
}
