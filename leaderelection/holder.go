package leaderelection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// LeaseHolderExtra is the user extra that carries, on every write of a controller
// under --leader-elect-apiserver-fence, the leader-election identity the replica
// believes holds the Lease. The ValidatingAdmissionPolicy FencePolicyName (shipped in
// deploy/fence/) compares it with the Lease's spec.holderIdentity.
const LeaseHolderExtra = "mini-kcm.io/lease-holder"

// FencePolicyName is the name of the ValidatingAdmissionPolicy of deploy/fence/.
const FencePolicyName = "mini-kcm-lease-fence"

// ShardLeaseExtra is the user extra that carries, in sharded mode under
// --leader-elect-apiserver-fence, the shard Lease (namespace/name) whose holder
// LeaseHolderExtra names: a replica holds several shard Leases at once, and the
// ValidatingAdmissionPolicy ShardFencePolicyName (deploy/sharded/fence/), bound once
// per shard, compares the holder with the Lease this extra names.
const ShardLeaseExtra = "mini-kcm.io/lease"

// ShardFencePolicyName is the name of the ValidatingAdmissionPolicy of
// deploy/sharded/fence/, whose bindings take one shard Lease each as their parameter.
const ShardFencePolicyName = "mini-kcm-shard-fence"

// selfReviewTimeout bounds each SelfSubjectReview at start.
const selfReviewTimeout = 10 * time.Second

// ImpersonateHolder makes cfg's client impersonate its own user with the user extra
// LeaseHolderExtra = holder, so that the apiserver's admission policy can refuse its
// writes once holder no longer holds the Lease. It learns the user with a
// SelfSubjectReview (authentication.k8s.io/v1) through cfg and checks, with a second
// review through the impersonating configuration, that the apiserver lets the user
// impersonate itself with that extra; otherwise it returns an error that names the
// missing permission. client names the client in errors.
//
// The impersonated user keeps its name and groups: a ServiceAccount impersonates its
// account (the apiserver derives the account's groups), any other user its name and
// its groups, so RBAC grants the impersonated requests exactly what it grants the user.
// What is lost is the user's uid and its own extras (a token's credential id, a bound
// pod's name), which RBAC does not use; the audit log still records the authenticated
// user beside the impersonated one.
func ImpersonateHolder(ctx context.Context, cfg *rest.Config, client, holder string) error {
	return impersonateWith(ctx, cfg, client, map[string][]string{LeaseHolderExtra: {holder}})
}

// ImpersonateShardHolder is ImpersonateHolder for a shard term: besides the holder,
// the user extra ShardLeaseExtra names the shard Lease (namespace/name) the term holds,
// so that the binding of that shard's Lease, and only it, compares the holder.
func ImpersonateShardHolder(ctx context.Context, cfg *rest.Config, client, holder, lease string) error {
	return impersonateWith(ctx, cfg, client, map[string][]string{LeaseHolderExtra: {holder}, ShardLeaseExtra: {lease}})
}

// impersonateWith makes cfg's client impersonate its own user with extra; see
// ImpersonateHolder.
func impersonateWith(ctx context.Context, cfg *rest.Config, client string, extra map[string][]string) error {
	self, err := selfReview(ctx, cfg)
	if err != nil {
		return fmt.Errorf("--leader-elect-apiserver-fence: learning the user of client %q with a SelfSubjectReview: %w", client, err)
	}
	impersonate := impersonationOf(self, extra)
	impersonating := rest.CopyConfig(cfg)
	impersonating.Impersonate = impersonate
	got, err := selfReview(ctx, impersonating)
	if err != nil {
		return impersonationError(client, impersonate, err)
	}
	seen := got.Username == self.Username
	for key, values := range extra {
		seen = seen && slices.Equal([]string(got.Extra[key]), values)
	}
	if !seen {
		return fmt.Errorf("--leader-elect-apiserver-fence: client %q impersonating %q with extras %v is seen by the apiserver as %q with extras %v; "+
			"an authenticating proxy in between may drop impersonation headers: turn the flag off there",
			client, self.Username, extra, got.Username, got.Extra)
	}
	cfg.Impersonate = impersonate
	return nil
}

// selfReview asks the apiserver who cfg's client is.
func selfReview(ctx context.Context, cfg *rest.Config) (authenticationv1.UserInfo, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = selfReviewTimeout
	clientset, err := kubernetes.NewForConfig(c)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	review, err := clientset.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return review.Status.UserInfo, nil
}

// impersonationOf returns the impersonation of self by itself with extra.
// A ServiceAccount is impersonated without groups: the apiserver then gives it exactly
// the account's groups, and impersonating them would need a grant on groups. Any other
// user keeps its groups, but system:authenticated, which the apiserver adds itself.
func impersonationOf(self authenticationv1.UserInfo, extra map[string][]string) rest.ImpersonationConfig {
	var groups []string
	if _, _, err := serviceaccount.SplitUsername(self.Username); err != nil {
		for _, g := range self.Groups {
			if g != user.AllAuthenticated {
				groups = append(groups, g)
			}
		}
	}
	return rest.ImpersonationConfig{
		UserName: self.Username,
		Groups:   groups,
		Extra:    extra,
	}
}

// impersonationError explains a failed self-impersonation: which grants are missing.
func impersonationError(client string, imp rest.ImpersonationConfig, err error) error {
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("--leader-elect-apiserver-fence: client %q impersonating itself: %w", client, err)
	}
	grants := []string{}
	if ns, name, saErr := serviceaccount.SplitUsername(imp.UserName); saErr == nil {
		grants = append(grants, fmt.Sprintf("impersonate on serviceaccounts %q in namespace %s", name, ns))
	} else {
		grants = append(grants, fmt.Sprintf("impersonate on users %q", imp.UserName))
	}
	if len(imp.Groups) > 0 {
		grants = append(grants, fmt.Sprintf("impersonate on groups %s", strings.Join(imp.Groups, ", ")))
	}
	extras := make([]string, 0, len(imp.Extra))
	for key := range imp.Extra {
		extras = append(extras, key)
	}
	slices.Sort(extras)
	for _, key := range extras {
		grants = append(grants, fmt.Sprintf("impersonate on authentication.k8s.io userextras/%s", key))
	}
	rbacFile, policy := "deploy/fence/rbac.yaml", FencePolicyName
	if _, sharded := imp.Extra[ShardLeaseExtra]; sharded {
		rbacFile, policy = "deploy/sharded/fence/rbac.yaml", ShardFencePolicyName
	}
	return fmt.Errorf("--leader-elect-apiserver-fence: %s (client %q) may not impersonate itself with the lease-holder extra: %w; "+
		"grant %s (%s does for deploy/'s identities), or run without --leader-elect-apiserver-fence "+
		"and without the ValidatingAdmissionPolicy %s", imp.UserName, client, err, strings.Join(grants, " and "), rbacFile, policy)
}
