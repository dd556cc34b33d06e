package sharding

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// fenceCheckTimeout bounds the list of bindings at start.
const fenceCheckTimeout = 30 * time.Second

// CheckFenceBindings checks, for --shards with --leader-elect-apiserver-fence,
// that the ValidatingAdmissionPolicy leaderelection.ShardFencePolicyName is bound to
// every shard Lease namespace/base-0 … base-(shards-1). A shard without its binding
// would be fenced in-process only, although the flag says both layers fence it: a
// replica started with too few bindings (deploy/sharded/fence/ generated for fewer
// shards, or for another Lease name) fails at start, naming the missing ones and the
// fix, instead of running with a hole in the fence. It cannot tell whether the policy
// itself matches this replica's users; deploy/sharded/ installs both.
func CheckFenceBindings(ctx context.Context, client kubernetes.Interface, namespace, base string, shards int) error {
	ctx, cancel := context.WithTimeout(ctx, fenceCheckTimeout)
	defer cancel()
	bindings, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("--shards=%d with --leader-elect-apiserver-fence: checking that every shard Lease has its binding "+
			"of the ValidatingAdmissionPolicy %s: %w; grant list on admissionregistration.k8s.io "+
			"validatingadmissionpolicybindings (deploy/sharded/fence/rbac.yaml does)", shards, leaderelection.ShardFencePolicyName, err)
	}
	if err != nil {
		return fmt.Errorf("--shards=%d with --leader-elect-apiserver-fence: listing ValidatingAdmissionPolicyBindings: %w", shards, err)
	}
	bound := map[string]bool{}
	for _, b := range bindings.Items {
		if ref := b.Spec.ParamRef; b.Spec.PolicyName == leaderelection.ShardFencePolicyName && ref != nil && ref.Namespace == namespace {
			bound[ref.Name] = true
		}
	}
	var missing []string
	for i := range shards {
		if name := ShardLeaseName(base, i); !bound[name] {
			missing = append(missing, namespace+"/"+name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--shards=%d with --leader-elect-apiserver-fence: the ValidatingAdmissionPolicy %s has no binding "+
			"whose paramRef is the shard Lease %s, so the apiserver would not fence those shards' stale holders; "+
			"generate deploy/sharded/fence/ for --shards=%d and --leader-elect-resource-name=%s (set them in deploy/sharded/, "+
			"run `make generate`) and apply deploy/sharded/ (kubectl apply -k deploy/sharded/), or run without "+
			"--leader-elect-apiserver-fence", shards, leaderelection.ShardFencePolicyName, strings.Join(missing, ", "), shards, base)
	}
	return nil
}
