package deployment

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// rollback handles the deprecated rollback request (the annotation
// deprecated.deployment.rollback.to, which apps/v1 keeps for extensions/v1beta1's
// spec.rollbackTo): it copies the template of the requested revision (0 means the
// previous one) into the Deployment. Whatever the outcome, the request is cleared, so a
// rollback is attempted once.
func (c *Controller) rollback(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	logger := klog.FromContext(ctx)
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := allReplicaSets(newRS, oldRSs)

	revision := *rollbackTo(d)
	if revision == 0 {
		if revision = rollout.LastRevision(allRSs); revision == 0 {
			c.recorder.Eventf(d, corev1.EventTypeWarning, rollout.ReasonRollbackRevisionNotFound, "Unable to find last revision.")
			return c.updateDeploymentAndClearRollbackTo(ctx, d)
		}
	}
	for _, rs := range allRSs {
		v, err := rollout.Revision(rs)
		if err != nil {
			logger.V(4).Info("Unable to extract revision from replica set", "replicaSet", klog.KObj(rs), "err", err)
			continue
		}
		if v != revision {
			continue
		}
		logger.V(4).Info("Found replica set with desired revision", "replicaSet", klog.KObj(rs), "revision", v)
		// The revision number moves to max+1 on the next sync, when this ReplicaSet is
		// found to be the new one again.
		performed, err := c.rollbackToTemplate(ctx, d, rs)
		if performed && err == nil {
			c.recorder.Eventf(d, corev1.EventTypeNormal, rollout.ReasonRollbackDone, "Rolled back deployment %q to revision %d", d.Name, revision)
		}
		return err
	}
	c.recorder.Eventf(d, corev1.EventTypeWarning, rollout.ReasonRollbackRevisionNotFound, "Unable to find the revision to rollback to.")
	return c.updateDeploymentAndClearRollbackTo(ctx, d)
}

// rollbackToTemplate copies the ReplicaSet's template and annotations into the
// Deployment unless the templates already match, and clears the rollback request. It
// reports whether the template changed.
//
// The annotations come along so that, for instance, kubernetes.io/change-cause describes
// the template it belongs to; otherwise the current one would be copied onto the
// ReplicaSet we roll back to.
func (c *Controller) rollbackToTemplate(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet) (bool, error) {
	logger := klog.FromContext(ctx)
	performed := false
	if !rollout.EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
		logger.V(4).Info("Rolling back deployment to an old template", "replicaSet", klog.KObj(rs))
		rollout.SetFromReplicaSetTemplate(d, rs.Spec.Template)
		rollout.SetDeploymentAnnotationsTo(d, rs)
		performed = true
	} else {
		logger.V(4).Info("Rollback target has the current template, skipping rollback", "replicaSet", klog.KObj(rs))
		c.recorder.Eventf(d, corev1.EventTypeWarning, rollout.ReasonRollbackTemplateUnchanged,
			"The rollback revision contains the same template as current deployment %q", d.Name)
	}
	return performed, c.updateDeploymentAndClearRollbackTo(ctx, d)
}

// updateDeploymentAndClearRollbackTo removes the rollback request and writes the
// Deployment (spec and metadata), which also carries any template change made before.
func (c *Controller) updateDeploymentAndClearRollbackTo(ctx context.Context, d *appsv1.Deployment) error {
	klog.FromContext(ctx).V(4).Info("Clearing the rollback request")
	delete(d.Annotations, appsv1.DeprecatedRollbackTo)
	if _, err := c.client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating deployment %s to clear its rollback request: %w", klog.KObj(d), err)
	}
	return nil
}

// rollbackTo returns the revision requested by the rollback annotation, or nil if there
// is none. An unparsable value is ignored, as upstream does.
func rollbackTo(d *appsv1.Deployment) *int64 {
	value := d.Annotations[appsv1.DeprecatedRollbackTo]
	if value == "" {
		return nil
	}
	revision, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return nil
	}
	return &revision
}
