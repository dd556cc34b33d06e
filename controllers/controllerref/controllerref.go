// Package controllerref decides which objects a controller owns, the way upstream's
// ControllerRefManager does: a controller owns exactly the objects whose controller
// ownerReference points to its UID. Matching orphans are adopted and owned objects that
// stopped matching are released, each with a strategic-merge patch that carries the
// child's UID as a precondition, so that a child deleted and recreated under the same
// name is never touched by mistake.
//
// One generic Manager serves every kind of child (Pods for the ReplicaSet controller,
// ReplicaSets for the Deployment controller).
package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
)

// Manager claims children for one owner during one sync. Build a new Manager per sync:
// canAdopt runs at most once per Manager, so its answer is only fresh for one pass.
type Manager[T metav1.Object] struct {
	// owner is the would-be controller of the children.
	owner metav1.Object
	// ownerKind is written into the controller ownerReference of adopted children.
	ownerKind schema.GroupVersionKind
	// selector decides whether a child belongs to the owner.
	selector labels.Selector
	// patch applies a strategic-merge patch to one child through the API.
	patch func(ctx context.Context, child T, patch []byte) error

	// canAdopt is an expensive check (typically a live GET of the owner) run lazily
	// before the first adoption; its result, canAdoptErr, is reused for the rest of
	// the sync.
	canAdopt     func(ctx context.Context) error
	canAdoptOnce sync.Once
	canAdoptErr  error
}

// NewManager returns a Manager for owner, whose kind is ownerKind and whose children
// match selector. canAdopt (may be nil) is called once, lazily, before the first
// adoption; if it fails, every adoption in this sync fails with its error. patch applies
// a strategic-merge patch to one child.
func NewManager[T metav1.Object](owner metav1.Object, ownerKind schema.GroupVersionKind, selector labels.Selector,
	canAdopt func(ctx context.Context) error, patch func(ctx context.Context, child T, patch []byte) error) *Manager[T] {
	return &Manager[T]{
		owner:     owner,
		ownerKind: ownerKind,
		selector:  selector,
		canAdopt:  canAdopt,
		patch:     patch,
	}
}

// Claim returns the children this owner now owns. On the way it adopts orphans that
// match the selector (and pass every filter) and releases children it owns that no
// longer match. As upstream, the filters are part of "matching": an owned child that
// fails a filter is released too.
//
// Children controlled by another owner are ignored. Children the owner already controls
// and that match are claimed even while the owner is being deleted, because that takes
// no action; adoption and release are not attempted while it is being deleted.
//
// The error aggregates every failed adoption or release; the children it lists are not
// in the result, and the caller should retry later.
func (m *Manager[T]) Claim(ctx context.Context, children []T, filters ...func(T) bool) ([]T, error) {
	var claimed []T
	var errs []error
	for _, child := range children {
		ok, err := m.claim(ctx, child, filters)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			claimed = append(claimed, child)
		}
	}
	return claimed, utilerrors.NewAggregate(errs)
}

func (m *Manager[T]) matches(child T, filters []func(T) bool) bool {
	// The selector goes first so that filters only run on children that could match.
	if !m.selector.Matches(labels.Set(child.GetLabels())) {
		return false
	}
	for _, filter := range filters {
		if !filter(child) {
			return false
		}
	}
	return true
}

// claim reconciles the ownership of one child and reports whether the owner now owns it.
func (m *Manager[T]) claim(ctx context.Context, child T, filters []func(T) bool) (bool, error) {
	ownerDeleting := m.owner.GetDeletionTimestamp() != nil
	if ref := metav1.GetControllerOfNoCopy(child); ref != nil {
		if ref.UID != m.owner.GetUID() {
			return false, nil // Controlled by someone else.
		}
		if m.matches(child, filters) {
			return true, nil
		}
		// Owned but no longer matching. A deleting owner leaves it alone: the garbage
		// collector will deal with it, and a release would race with that.
		if ownerDeleting {
			return false, nil
		}
		return false, m.release(ctx, child)
	}

	// An orphan. Adopt it only if we are alive, it matches, it is not going away, and
	// it lives in our namespace (ownerReferences cannot cross namespaces).
	if ownerDeleting || !m.matches(child, filters) || child.GetDeletionTimestamp() != nil {
		return false, nil
	}
	if ns := m.owner.GetNamespace(); ns != "" && ns != child.GetNamespace() {
		return false, nil
	}
	// The owner is checked before the patch, and its failure is never read as the
	// child's: an owner that is gone (a NotFound from the live GET) must fail the sync,
	// or the caller would go on to create children for a deleted owner.
	if err := m.checkCanAdopt(ctx); err != nil {
		return false, fmt.Errorf("can't adopt %s %s/%s (%s): %w",
			kindOf(child), child.GetNamespace(), child.GetName(), child.GetUID(), err)
	}
	if err := m.adopt(ctx, child); err != nil {
		// A child that vanished needs no owner; anything else (someone else adopted it
		// first, a transient error) is worth a retry.
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// checkCanAdopt runs canAdopt once per Manager and returns its answer every time.
func (m *Manager[T]) checkCanAdopt(ctx context.Context) error {
	m.canAdoptOnce.Do(func() {
		if m.canAdopt != nil {
			m.canAdoptErr = m.canAdopt(ctx)
		}
	})
	return m.canAdoptErr
}

// adopt patches a controller reference to the owner into child.
func (m *Manager[T]) adopt(ctx context.Context, child T) error {
	patch, err := AdoptPatch(m.owner, m.ownerKind, child.GetUID())
	if err != nil {
		return err
	}
	// The apiserver rejects this patch if another controller reference exists, so a
	// concurrent adoption by someone else surfaces as an error here.
	return m.patch(ctx, child, patch)
}

func (m *Manager[T]) release(ctx context.Context, child T) error {
	klog.FromContext(ctx).V(2).Info("Patching object to remove its controllerRef",
		"kind", kindOf(child), "object", klog.KObj(child), "gvk", m.ownerKind, "controller", m.owner.GetName())
	patch, err := ReleasePatch(child.GetUID(), m.owner.GetUID())
	if err != nil {
		return err
	}
	err = m.patch(ctx, child, patch)
	// NotFound: the child is gone. Invalid: the child has no ownerReferences left or its
	// UID no longer matches (deleted and recreated). Either way there is nothing to release.
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// RecheckDeletionTimestamp returns a canAdopt function that fetches the owner live (not
// from a cache) and refuses adoption if that fails or the owner is being deleted. This
// closes the race where an owner is deleted after its children were listed (#42639):
// adopting then would leave orphans the garbage collector already skipped.
//
// get must fail if the owner is gone or was recreated under a new UID; LiveOwner wraps a
// typed GET that way.
func RecheckDeletionTimestamp(get func(ctx context.Context) (metav1.Object, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		obj, err := get(ctx)
		if err != nil {
			return fmt.Errorf("can't recheck DeletionTimestamp: %w", err)
		}
		if obj.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s/%s has just been deleted at %v", obj.GetNamespace(), obj.GetName(), obj.GetDeletionTimestamp())
		}
		return nil
	}
}

// LiveOwner adapts a typed live GET of owner for RecheckDeletionTimestamp: it fails if
// the object now under owner's name has a different UID, i.e. owner itself is gone.
func LiveOwner[O metav1.Object](owner metav1.Object, get func(ctx context.Context) (O, error)) func(ctx context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		fresh, err := get(ctx)
		if err != nil {
			return nil, err
		}
		if fresh.GetUID() != owner.GetUID() {
			return nil, fmt.Errorf("original %s %s/%s is gone: got uid %s, wanted %s",
				kindOf(fresh), owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		return fresh, nil
	}
}

// ErrNoOwner is returned by AdoptPatch for an owner without a name or UID, which
// would produce an ownerReference the apiserver rejects.
var ErrNoOwner = errors.New("owner has no name or uid")

// adoptPatch is the body of the adoption patch. Field order matters only for
// byte-for-byte parity with upstream's patch, which tests and audit logs compare.
type adoptPatch struct {
	Metadata struct {
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		UID             types.UID               `json:"uid"`
	} `json:"metadata"`
}

// AdoptPatch returns the strategic-merge patch that makes owner the controller of the
// child with childUID. ownerReferences merge by uid, so an existing non-controller
// reference to the same owner is upgraded in place; the child's uid acts as a
// precondition against a recreated child.
func AdoptPatch(owner metav1.Object, ownerKind schema.GroupVersionKind, childUID types.UID) ([]byte, error) {
	if owner.GetName() == "" || owner.GetUID() == "" {
		return nil, ErrNoOwner
	}
	var p adoptPatch
	p.Metadata.UID = childUID
	p.Metadata.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, ownerKind)}
	return json.Marshal(&p)
}

// releasePatch is the body of the release patch, in upstream's field order.
type releasePatch struct {
	Metadata struct {
		UID             types.UID           `json:"uid"`
		OwnerReferences []map[string]string `json:"ownerReferences"`
	} `json:"metadata"`
}

// ReleasePatch returns the strategic-merge patch that removes the ownerReference to
// ownerUID from the child with childUID.
func ReleasePatch(childUID, ownerUID types.UID) ([]byte, error) {
	var p releasePatch
	p.Metadata.UID = childUID
	p.Metadata.OwnerReferences = []map[string]string{{"$patch": "delete", "uid": string(ownerUID)}}
	return json.Marshal(&p)
}

// kindOf names the Go type of obj ("Pod", "ReplicaSet") for messages; the typed API
// objects leave TypeMeta empty, so it cannot be read from the object.
func kindOf(obj any) string {
	t := reflect.TypeOf(obj)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "object"
	}
	return t.Name()
}
