package leaderelection

import (
	"net/http"
	"testing"
)

// TestUnfencedWritesAreEventsReviewsAndTokens pins which mutating requests pass the fence
// whatever its state: the path is read as the apiserver reads it, so a namespace, a
// resource name or a prefix that looks like an exempt resource changes nothing.
func TestUnfencedWritesAreEventsReviewsAndTokens(t *testing.T) {
	cases := []struct {
		method, path string
		unfenced     bool
	}{
		// Events, core and events.k8s.io, namespaced or not, with their subresources.
		{http.MethodPost, "/api/v1/namespaces/ns/events", true},
		{http.MethodPost, "/api/v1/events", true},
		{http.MethodPatch, "/api/v1/namespaces/ns/events/e", true},
		{http.MethodPut, "/api/v1/namespaces/ns/events/e/status", true},
		{http.MethodDelete, "/api/v1/namespaces/ns/events", true},
		{http.MethodPost, "/api/v1/namespaces/ns/events/", true},
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ns/events", true},
		{http.MethodPost, "/apis/events.k8s.io/v1/events", true},
		{http.MethodPost, "/apis/apps/v1/namespaces/ns/events", false},
		// Reviews: every request of their groups.
		{http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", true},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews", true},
		{http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", true},
		{http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", true},
		// Tokens: the token subresource of a ServiceAccount, nothing else of them.
		{http.MethodPost, "/api/v1/namespaces/kube-system/serviceaccounts/sa/token", true},
		{http.MethodPost, "/api/v1/serviceaccounts/sa/token", true},
		{http.MethodPost, "/api/v1/namespaces/ns/serviceaccounts/sa/token/more", false},
		{http.MethodPost, "/api/v1/namespaces/ns/serviceaccounts", false},
		{http.MethodDelete, "/api/v1/namespaces/ns/serviceaccounts/token", false},
		{http.MethodPost, "/apis/apps/v1/namespaces/ns/serviceaccounts/sa/token", false},
		// Everything else is fenced.
		{http.MethodPost, "/api/v1/namespaces/ns/pods", false},
		{http.MethodPut, "/apis/apps/v1/namespaces/ns/replicasets/rs/status", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/p/eviction", false},
		{http.MethodPut, "/api/v1/namespaces/events", false}, // the namespace named events
		{http.MethodPut, "/api/v1/namespaces/events/status", false},
		{http.MethodPut, "/api/v1/namespaces/ns/finalize", false},
		{http.MethodDelete, "/api/v1/namespaces/events/pods/p", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/events", false}, // the pod named events
		// The deprecated verbs in the path are no events.
		{http.MethodPost, "/api/v1/watch/namespaces/ns/events", false},
		{http.MethodPost, "/api/v1/proxy/namespaces/ns/events/e", false},
		{http.MethodPost, "/api/v1/watch", false},
		// Non-resource paths.
		{http.MethodPost, "/", false},
		{http.MethodPost, "", false},
		{http.MethodPost, "/api", false},
		{http.MethodPost, "/api/v1", false},
		{http.MethodPost, "/apis", false},
		{http.MethodPost, "/apis/events.k8s.io", false},
		{http.MethodPost, "/apis/events.k8s.io/v1", false},
		{http.MethodPost, "/apis/authentication.k8s.io", false},
		{http.MethodPost, "/apis/authentication.k8s.io/v1", false}, // its discovery document, no review
		{http.MethodPost, "/healthz", false},
		{http.MethodPost, "/version", false},
		{http.MethodPost, "/events", false},
		// A prefix of the server's URL (a proxy's) before /api or /apis.
		{http.MethodPost, "/k8s/api/v1/namespaces/ns/events", true},
		{http.MethodPost, "/k8s/clusters/c1/apis/authentication.k8s.io/v1/tokenreviews", true},
		{http.MethodPost, "/k8s/api/v1/namespaces/ns/pods", false},
		{http.MethodPost, "/k8s/api", false},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, "https://apiserver:6443"+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := isUnfenced(req); got != tc.unfenced {
			t.Errorf("%s %s: unfenced %v, want %v", tc.method, tc.path, got, tc.unfenced)
		}
	}
}
