package rollout

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Revision returns the revision annotation of a Deployment or ReplicaSet; an object
// without one is revision 0.
func Revision(obj runtime.Object) (int64, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	v, ok := accessor.GetAnnotations()[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// MaxRevision returns the highest revision among the ReplicaSets. Unparsable revisions
// are skipped, so one hand-edited annotation cannot stop every rollout.
func MaxRevision(rsList []*appsv1.ReplicaSet) int64 {
	var highest int64
	for _, rs := range rsList {
		if v, err := Revision(rs); err == nil && v > highest {
			highest = v
		}
	}
	return highest
}

// LastRevision returns the second-highest revision among the ReplicaSets: the one a
// rollback to "revision 0" means. It is 0 when there is no such revision.
func LastRevision(rsList []*appsv1.ReplicaSet) int64 {
	var highest, second int64
	for _, rs := range rsList {
		v, err := Revision(rs)
		if err != nil {
			continue
		}
		if v >= highest {
			second = highest
			highest = v
		} else if v > second {
			second = v
		}
	}
	return second
}

// SetDeploymentRevision stores revision in the Deployment's revision annotation and
// reports whether that changed it.
func SetDeploymentRevision(d *appsv1.Deployment, revision string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[RevisionAnnotation] == revision {
		return false
	}
	d.Annotations[RevisionAnnotation] = revision
	return true
}
