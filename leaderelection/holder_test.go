package leaderelection

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// fakeSelfReviews answers SelfSubjectReviews as the apiserver does: as the
// authenticated user, or as the impersonated one if allowed.
type fakeSelfReviews struct {
	authenticated authenticationv1.UserInfo
	// forbidImpersonation answers impersonated requests with 403.
	forbidImpersonation bool
	// seen records the impersonation headers of each request.
	seen []http.Header
}

func (f *fakeSelfReviews) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/apis/authentication.k8s.io/v1/selfsubjectreviews" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	f.seen = append(f.seen, r.Header.Clone())
	info := f.authenticated
	if u := r.Header.Get("Impersonate-User"); u != "" {
		if f.forbidImpersonation {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
				Message: `users "` + u + `" is forbidden: User "` + u + `" cannot impersonate resource "users" in API group ""`})
			return
		}
		info = authenticationv1.UserInfo{Username: u, Groups: r.Header.Values("Impersonate-Group"), Extra: map[string]authenticationv1.ExtraValue{}}
		for key, values := range r.Header {
			if k, ok := strings.CutPrefix(key, "Impersonate-Extra-"); ok {
				k, _ = url.PathUnescape(strings.ToLower(k))
				info.Extra[k] = values
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(authenticationv1.SelfSubjectReview{
		TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectReview", APIVersion: "authentication.k8s.io/v1"},
		Status:   authenticationv1.SelfSubjectReviewStatus{UserInfo: info},
	})
}

func TestImpersonateHolderKeepsTheUserAndItsGroupsAndAddsTheHolder(t *testing.T) {
	tests := []struct {
		name       string
		user       authenticationv1.UserInfo
		wantGroups []string
	}{
		{"user in system:masters", authenticationv1.UserInfo{Username: "mini-kcm-replica-1", Groups: []string{"system:masters", "system:authenticated"}},
			[]string{"system:masters"}},
		{"certificate user without groups", authenticationv1.UserInfo{Username: "mini-kcm", Groups: []string{"system:authenticated"}}, nil},
		// The apiserver derives a ServiceAccount's groups; impersonating them would need a grant.
		{"service account", authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeSelfReviews{authenticated: tc.user}
			server := httptest.NewServer(fake)
			defer server.Close()
			cfg := &rest.Config{Host: server.URL}
			if err := ImpersonateHolder(context.Background(), cfg, "replicaset-controller", "node-1_abc"); err != nil {
				t.Fatal(err)
			}
			want := rest.ImpersonationConfig{UserName: tc.user.Username, Groups: tc.wantGroups,
				Extra: map[string][]string{LeaseHolderExtra: {"node-1_abc"}}}
			if cfg.Impersonate.UserName != want.UserName || !slices.Equal(cfg.Impersonate.Groups, want.Groups) ||
				!slices.Equal(cfg.Impersonate.Extra[LeaseHolderExtra], want.Extra[LeaseHolderExtra]) {
				t.Errorf("impersonation = %+v, want %+v", cfg.Impersonate, want)
			}
			if len(fake.seen) != 2 || fake.seen[0].Get("Impersonate-User") != "" || fake.seen[1].Get("Impersonate-User") != tc.user.Username {
				t.Errorf("want a review as itself, then one impersonating itself; saw %v", fake.seen)
			}
		})
	}
}

func TestImpersonateHolderNamesTheMissingGrants(t *testing.T) {
	tests := []struct {
		user string
		want []string
	}{
		{"system:serviceaccount:kube-system:replicaset-controller", []string{
			`impersonate on serviceaccounts "replicaset-controller" in namespace kube-system`,
			"userextras/mini-kcm.io/lease-holder", "deploy/fence/rbac.yaml", "without --leader-elect-apiserver-fence"}},
		{"mini-kcm", []string{`impersonate on users "mini-kcm"`, "userextras/mini-kcm.io/lease-holder"}},
	}
	for _, tc := range tests {
		fake := &fakeSelfReviews{authenticated: authenticationv1.UserInfo{Username: tc.user}, forbidImpersonation: true}
		server := httptest.NewServer(fake)
		cfg := &rest.Config{Host: server.URL}
		err := ImpersonateHolder(context.Background(), cfg, "replicaset-controller", "node-1_abc")
		server.Close()
		if err == nil {
			t.Fatalf("%s: no error for a forbidden impersonation", tc.user)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", tc.user, err, want)
			}
		}
		if cfg.Impersonate.UserName != "" {
			t.Errorf("%s: the configuration impersonates after a failure: %+v", tc.user, cfg.Impersonate)
		}
	}
}

// A shard term's client sends the shard Lease next to the holder, so that only that
// shard's binding of the sharded fence compares the holder; a missing grant names both
// extras and the sharded install's RBAC.
func TestImpersonateShardHolderAddsTheShardLeaseAndNamesItsGrants(t *testing.T) {
	fake := &fakeSelfReviews{authenticated: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:mini-kcm-replicaset-controller"}}
	server := httptest.NewServer(fake)
	defer server.Close()
	cfg := &rest.Config{Host: server.URL}
	if err := ImpersonateShardHolder(context.Background(), cfg, "replicaset-controller", "node-1_abc", "kube-system/mini-kcm-2"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Impersonate.Extra[LeaseHolderExtra], []string{"node-1_abc"}) ||
		!slices.Equal(cfg.Impersonate.Extra[ShardLeaseExtra], []string{"kube-system/mini-kcm-2"}) {
		t.Errorf("impersonation extras %v, want the holder and the shard Lease", cfg.Impersonate.Extra)
	}

	forbidden := &fakeSelfReviews{authenticated: fake.authenticated, forbidImpersonation: true}
	server2 := httptest.NewServer(forbidden)
	defer server2.Close()
	err := ImpersonateShardHolder(context.Background(), &rest.Config{Host: server2.URL}, "replicaset-controller", "node-1_abc", "kube-system/mini-kcm-2")
	for _, want := range []string{"userextras/mini-kcm.io/lease-holder", "userextras/mini-kcm.io/lease ", "deploy/sharded/fence/rbac.yaml", ShardFencePolicyName} {
		if err == nil || !strings.Contains(err.Error()+" ", want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
