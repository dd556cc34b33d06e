package clients

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/textlogger"
	testingclock "k8s.io/utils/clock/testing"
)

// tokenReactor answers TokenRequests for the named accounts with "token-for-<name>",
// valid for what was asked, and NotFound for any other account.
func tokenReactor(t *testing.T, client *fake.Clientset, now time.Time, accounts ...string) *[]string {
	t.Helper()
	var (
		mu        sync.Mutex
		requested []string
	)
	client.PrependReactor("create", "serviceaccounts", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create := action.(clienttesting.CreateActionImpl)
		if create.GetSubresource() != "token" || create.GetNamespace() != "kube-system" {
			t.Errorf("unexpected request %s %s/%s in %s", action.GetVerb(), action.GetResource().Resource,
				create.GetSubresource(), create.GetNamespace())
		}
		mu.Lock()
		requested = append(requested, create.Name)
		mu.Unlock()
		for _, a := range accounts {
			if a == create.Name {
				req := create.GetObject().(*authenticationv1.TokenRequest)
				lifetime := time.Duration(*req.Spec.ExpirationSeconds) * time.Second
				req.Status = authenticationv1.TokenRequestStatus{Token: "token-for-" + a,
					ExpirationTimestamp: metav1.NewTime(now.Add(lifetime))}
				return true, req, nil
			}
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, create.Name)
	})
	return &requested
}

func TestServiceAccountTokenIsReplacedWhenFourFifthsOfItsLifetimePassed(t *testing.T) {
	now := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	client := fake.NewClientset()
	tokenReactor(t, client, now, "replicaset-controller")
	tokens := &serviceAccountTokens{client: client.CoreV1(), namespace: "kube-system", name: "replicaset-controller",
		clock: testingclock.NewFakePassiveClock(now)}
	tok, err := tokens.Token()
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "token-for-replicaset-controller" || tok.TokenType != "Bearer" {
		t.Errorf("token = %+v", tok)
	}
	if want := now.Add(48 * time.Minute); !tok.Expiry.Equal(want) {
		t.Errorf("expiry = %s, want %s (an hour's token replaced after 48 minutes)", tok.Expiry, want)
	}
}

// A token whose expirationTimestamp is zero, or already past by our clock (a clock
// skewed against the apiserver's), is still kept for four fifths of the minimum
// lifetime, not replaced on every request of the controller.
func TestServiceAccountTokenWithAZeroOrSkewedExpiryIsKeptForEightMinutes(t *testing.T) {
	// The real time: oauth2's reuse compares the expiry with it.
	now := time.Now()
	for name, expiry := range map[string]metav1.Time{
		"zero timestamp":               {},
		"apiserver's clock 2h behind":  metav1.NewTime(now.Add(-time.Hour)),
		"granted 1 minute (too short)": metav1.NewTime(now.Add(time.Minute)),
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			requests := 0
			client.PrependReactor("create", "serviceaccounts", func(action clienttesting.Action) (bool, runtime.Object, error) {
				requests++
				req := action.(clienttesting.CreateActionImpl).GetObject().(*authenticationv1.TokenRequest)
				req.Status = authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: expiry}
				return true, req, nil
			})
			clock := testingclock.NewFakeClock(now)
			source := oauth2.ReuseTokenSource(nil, &serviceAccountTokens{client: client.CoreV1(), namespace: "kube-system",
				name: "mini-kcm-replicaset-controller", clock: clock})
			tok, err := source.Token()
			if err != nil {
				t.Fatal(err)
			}
			if want := now.Add(8 * time.Minute); !tok.Expiry.Equal(want) {
				t.Errorf("expiry = %s, want %s: a 10-minute floor less the fifth of leeway", tok.Expiry, want)
			}
			if _, err := source.Token(); err != nil || requests != 1 {
				t.Errorf("a second use sent %d TokenRequests in all (%v), want the first token reused", requests, err)
			}
		})
	}
}

// A TokenRequest that fails for a passing reason (an apiserver restart, its RBAC cache
// not yet filled, the account created a moment later) is retried with backoff, as
// upstream's clientbuilder does, so that the controller's request that needed the token
// does not fail; a failure that lasts the backoff out is returned.
func TestTokenRequestIsRetriedWithBackoff(t *testing.T) {
	for name, tc := range map[string]struct {
		failures     []error
		wantErr      bool
		wantRequests int
	}{
		"two transient failures": {failures: []error{apierrors.NewServiceUnavailable("restarting"),
			apierrors.NewInternalError(errors.New("etcd timeout"))}, wantRequests: 3},
		"always failing": {failures: []error{apierrors.NewServiceUnavailable("a"), apierrors.NewServiceUnavailable("b"),
			apierrors.NewServiceUnavailable("c"), apierrors.NewServiceUnavailable("d"), apierrors.NewServiceUnavailable("e")},
			wantErr: true, wantRequests: 4},
		// What a kube-apiserver answers right after it started, until its RBAC cache is
		// filled: a replica exited on it before.
		"forbidden until the grant is seen": {failures: []error{
			apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "x", nil),
			apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "x", nil)}, wantRequests: 3},
		"not found until created": {failures: []error{apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "x")},
			wantRequests: 2},
		"always forbidden": {failures: []error{
			apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "a", nil),
			apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "b", nil),
			apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "c", nil),
			apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "d", nil)},
			wantErr: true, wantRequests: 4},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			requests := 0
			client.PrependReactor("create", "serviceaccounts", func(action clienttesting.Action) (bool, runtime.Object, error) {
				requests++
				if requests <= len(tc.failures) {
					return true, nil, tc.failures[requests-1]
				}
				req := action.(clienttesting.CreateActionImpl).GetObject().(*authenticationv1.TokenRequest)
				req.Status = authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}
				return true, req, nil
			})
			tokens := &serviceAccountTokens{client: client.CoreV1(), namespace: "kube-system", name: "mini-kcm-replicaset-controller",
				backoff: wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: serviceAccountTokenBackoff.Steps}}
			tok, err := tokens.Token()
			if (err != nil) != tc.wantErr || requests != tc.wantRequests {
				t.Errorf("Token() = %v, %v after %d requests; want error %v after %d", tok, err, requests, tc.wantErr, tc.wantRequests)
			}
			if err != nil && !strings.Contains(err.Error(), "kube-system/mini-kcm-replicaset-controller") {
				t.Errorf("error %q does not name the account", err)
			}
		})
	}
}

// A controller whose ServiceAccount is missing still gets its client, so that a
// replica rides out an apiserver that refuses the account for a while; the log says so
// at once, and each of the controller's requests fails with the fix in its error.
func TestMissingServiceAccountFailsTheRequestsWithTheFix(t *testing.T) {
	// The backoff would make the test wait 3.5 s twice (at the build, at the request).
	defer func(b wait.Backoff) { serviceAccountTokenBackoff = b }(serviceAccountTokenBackoff)
	serviceAccountTokenBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 4}
	client := fake.NewClientset()
	tokenReactor(t, client, time.Now())
	var logged bytes.Buffer
	builder := Builder{Base: &rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10},
		ServiceAccounts: map[string]string{"endpoints-controller": "mini-kcm-endpoints-controller"}, Tokens: client.CoreV1(),
		Logger: textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logged)))}
	c, err := builder.Client("endpoints-controller")
	if err != nil {
		t.Fatalf("building the client of a controller whose ServiceAccount does not exist yet: %v", err)
	}
	_, err = c.CoreV1().Namespaces().Get(t.Context(), "x", metav1.GetOptions{})
	if err == nil {
		t.Fatal("a controller whose ServiceAccount does not exist sent a request")
	}
	for what, text := range map[string]string{"the request's error": err.Error(), "the log": logged.String()} {
		for _, want := range []string{"mini-kcm-endpoints-controller", "does not exist", "deploy/rbac/", "--use-service-account-credentials"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s %q does not mention %q", what, text, want)
			}
		}
	}
}

func TestForbiddenTokenRequestNamesThePermission(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "x", nil)
	})
	tokens := &serviceAccountTokens{client: client.CoreV1(), namespace: "kube-system", name: "deployment-controller",
		backoff: wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: serviceAccountTokenBackoff.Steps}}
	_, err := tokens.Token()
	if err == nil || !strings.Contains(err.Error(), "create on serviceaccounts/token") ||
		!strings.Contains(err.Error(), "kube-system/deployment-controller") {
		t.Fatalf("error = %v, want one naming the account and the permission", err)
	}
}

// With --use-service-account-credentials a controller writes with its account's token
// and nothing of the process's credentials, while the other clients keep those.
func TestControllerClientAuthenticatesAsItsServiceAccountOnly(t *testing.T) {
	var (
		mu   sync.Mutex
		auth = map[string]string{}
	)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.UserAgent()] = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	defer server.Close()

	client := fake.NewClientset()
	requested := tokenReactor(t, client, time.Now(), "replicaset-controller")
	builder := Builder{Base: &rest.Config{Host: server.URL, QPS: 5, Burst: 10, BearerToken: "process-token"},
		ServiceAccounts: map[string]string{"replicaset-controller": "replicaset-controller"}, Tokens: client.CoreV1()}
	for _, name := range []string{"replicaset-controller", "event-recorder"} {
		c, err := builder.Client(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Namespaces().Get(t.Context(), "x", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := auth[builder.userAgent("replicaset-controller")]; got != "Bearer token-for-replicaset-controller" {
		t.Errorf("the controller sent Authorization %q, want its ServiceAccount's token", got)
	}
	if got := auth[builder.userAgent("event-recorder")]; got != "Bearer process-token" {
		t.Errorf("the event recorder sent Authorization %q, want the --kubeconfig credentials", got)
	}
	if len(*requested) != 1 {
		t.Errorf("token requests = %v, want one, for replicaset-controller", *requested)
	}
}

func TestWithoutBodiesDropsTheLevelsAtWhichClientGoLogsBodies(t *testing.T) {
	var logged []string
	logger := withoutBodies(funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{Verbosity: 10}))
	logger.V(bodyLogLevel - 1).Info("headers")
	logger.WithName("rest").WithValues("verb", "POST").V(bodyLogLevel).Info("Response Body", "body", `{"status":{"token":"secret"}}`)
	logger.V(10).Info("curl")
	logger.Error(nil, "failed")
	if len(logged) != 2 || !strings.Contains(logged[0], `"headers"`) || !strings.Contains(logged[1], `"failed"`) {
		t.Errorf("logged %q; want the V(%d) line and the error, nothing from V(%d) up", logged, bodyLogLevel-1, bodyLogLevel)
	}
}
