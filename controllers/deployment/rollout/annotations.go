package rollout

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	// RevisionAnnotation records a ReplicaSet's place in the rollout sequence; the
	// Deployment carries the revision of its current new ReplicaSet.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists, comma-separated, the earlier revisions a
	// ReplicaSet served before a rollback made it current again.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation records the spec.replicas a ReplicaSet was last sized
	// for. A mismatch with the Deployment marks a scaling event, as opposed to a rollout.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation records spec.replicas+maxSurge at the last sizing; it is the
	// base of the ReplicaSet's share in proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"

	// MaxRevisionHistoryLength bounds the revision-history annotation (about 100
	// entries), so that rollbacks cannot grow a ReplicaSet without limit.
	MaxRevisionHistoryLength = 2000
)

// annotationsToSkip are Deployment annotations that are never copied to a ReplicaSet (and
// never copied back on rollback): the controller owns the revision and sizing ones, the
// last-applied configuration belongs to the Deployment object alone, and the rollback
// request must not outlive the rollback.
var annotationsToSkip = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:                 true,
	RevisionHistoryAnnotation:          true,
	DesiredReplicasAnnotation:          true,
	MaxReplicasAnnotation:              true,
	appsv1.DeprecatedRollbackTo:        true,
}

// SkipCopyAnnotation reports whether an annotation stays on the Deployment only.
func SkipCopyAnnotation(key string) bool {
	return annotationsToSkip[key]
}

// CopyDeploymentAnnotationsToReplicaSet copies the Deployment's annotations, minus the
// skip list, onto the ReplicaSet, and reports whether that changed it. It only adds or
// overwrites: an annotation removed from the Deployment stays on the ReplicaSet.
func CopyDeploymentAnnotationsToReplicaSet(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if current, exists := rs.Annotations[k]; SkipCopyAnnotation(k) || (exists && current == v) {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// SetNewReplicaSetAnnotations brings the new ReplicaSet's annotations up to date: it
// copies the Deployment's annotations, raises the revision to newRevision if it is
// lower (recording the old one in revision-history, which happens on a rollback), and,
// for a ReplicaSet about to be created (exists=false), sets the sizing annotations. It
// reports whether anything changed.
//
// A ReplicaSet whose current revision is not a number is left at that revision and
// reported unchanged, like upstream, so that a hand edit is not silently overwritten.
func SetNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool, historyLimitInChars int) (bool, error) {
	changed := CopyDeploymentAnnotationsToReplicaSet(d, rs)
	oldRevision, hadRevision := rs.Annotations[RevisionAnnotation]
	oldRevisionInt, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return false, fmt.Errorf("replica set %s/%s has a non-numeric revision %q: %w", rs.Namespace, rs.Name, oldRevision, err)
		}
		oldRevisionInt = 0
	}
	newRevisionInt, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return false, fmt.Errorf("new revision %q is not a number: %w", newRevision, err)
	}
	if oldRevisionInt < newRevisionInt {
		rs.Annotations[RevisionAnnotation] = newRevision
		changed = true
		if hadRevision {
			appendRevisionHistory(rs, oldRevision, historyLimitInChars)
		}
	}
	if !exists && SetReplicasAnnotations(rs, DesiredReplicas(d), DesiredReplicas(d)+MaxSurge(d)) {
		changed = true
	}
	return changed, nil
}

// appendRevisionHistory appends oldRevision to the revision-history annotation, dropping
// the oldest entries to stay within limitInChars. If even that is not enough, the
// history is left unchanged.
func appendRevisionHistory(rs *appsv1.ReplicaSet, oldRevision string, limitInChars int) {
	history := rs.Annotations[RevisionHistoryAnnotation]
	if history == "" {
		rs.Annotations[RevisionHistoryAnnotation] = oldRevision
		return
	}
	entries := strings.Split(history, ",")
	totalLen := len(history) + len(oldRevision) + 1
	start := 0
	for totalLen > limitInChars && start < len(entries) {
		totalLen -= len(entries[start]) + 1
		start++
	}
	if totalLen <= limitInChars {
		rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(entries[start:], oldRevision), ",")
	}
}

// SetDeploymentAnnotationsTo replaces the Deployment's annotations with the ReplicaSet's,
// keeping the Deployment's own skip-list annotations. A rollback does this so that, for
// example, a change-cause annotation follows the template it described.
func SetDeploymentAnnotationsTo(d *appsv1.Deployment, rollbackTo *appsv1.ReplicaSet) {
	kept := map[string]string{}
	for k, v := range d.Annotations {
		if SkipCopyAnnotation(k) {
			kept[k] = v
		}
	}
	for k, v := range rollbackTo.Annotations {
		if !SkipCopyAnnotation(k) {
			kept[k] = v
		}
	}
	d.Annotations = kept
}

// SetFromReplicaSetTemplate copies a ReplicaSet's template into the Deployment, without
// the pod-template-hash label the Deployment's template never carries.
func SetFromReplicaSetTemplate(d *appsv1.Deployment, template corev1.PodTemplateSpec) {
	d.Spec.Template.ObjectMeta = template.ObjectMeta
	d.Spec.Template.Spec = template.Spec
	d.Spec.Template.Labels = cloneWithoutLabel(template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
}

// cloneWithoutLabel returns a copy of the labels without key, never nil.
func cloneWithoutLabel(in map[string]string, key string) map[string]string {
	out := make(map[string]string, len(in))
	maps.Copy(out, in)
	delete(out, key)
	return out
}

// SetReplicasAnnotations sets desired-replicas and max-replicas and reports whether
// either changed.
func SetReplicasAnnotations(rs *appsv1.ReplicaSet, desiredReplicas, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for key, value := range map[string]string{
		DesiredReplicasAnnotation: strconv.FormatInt(int64(desiredReplicas), 10),
		MaxReplicasAnnotation:     strconv.FormatInt(int64(maxReplicas), 10),
	} {
		if rs.Annotations[key] != value {
			rs.Annotations[key] = value
			changed = true
		}
	}
	return changed
}

// ReplicasAnnotationsNeedUpdate reports whether SetReplicasAnnotations would change rs.
func ReplicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desiredReplicas, maxReplicas int32) bool {
	return rs.Annotations == nil ||
		rs.Annotations[DesiredReplicasAnnotation] != strconv.FormatInt(int64(desiredReplicas), 10) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.FormatInt(int64(maxReplicas), 10)
}

// DesiredReplicasFromAnnotation returns the desired-replicas annotation; ok is false if it
// is missing or is not a non-negative int32.
func DesiredReplicasFromAnnotation(rs *appsv1.ReplicaSet) (value int32, ok bool) {
	value, ok, _ = nonNegativeInt32Annotation(rs, DesiredReplicasAnnotation)
	return value, ok
}

// nonNegativeInt32Annotation parses an annotation as a non-negative int32. ok is false
// when the annotation is missing; err explains a value that does not parse.
func nonNegativeInt32Annotation(rs *appsv1.ReplicaSet, key string) (value int32, ok bool, err error) {
	raw, found := rs.Annotations[key]
	if !found {
		return 0, false, nil
	}
	parsed, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("annotation %s=%q of replica set %s/%s: %w", key, raw, rs.Namespace, rs.Name, err)
	}
	if parsed > math.MaxInt32 {
		return 0, false, fmt.Errorf("annotation %s=%q of replica set %s/%s is larger than %d", key, raw, rs.Namespace, rs.Name, math.MaxInt32)
	}
	return int32(parsed), true, nil
}
