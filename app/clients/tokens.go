package clients

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// The lifetime of a controller's token, as upstream's clientbuilder asks for: an hour.
// Like upstream, a token is replaced when four fifths of the lifetime granted passed; a
// failed replacement is retried on the next request while the old token still serves
// its last fifth (client-go's cached token source keeps it).
const (
	serviceAccountTokenLifetime = time.Hour
	// serviceAccountTokenMinLifetime is the least lifetime a token is taken to have,
	// whatever its expirationTimestamp says, as upstream's clientbuilder pins it: with a
	// clock skewed against the apiserver's, or a zero timestamp, the lifetime computed
	// would be zero or negative and every request of the controller would first send a
	// TokenRequest. A token the apiserver really expires sooner fails with 401, and
	// client-go's token source asks for a new one then.
	serviceAccountTokenMinLifetime = 10 * time.Minute
	// serviceAccountTokenRequestTimeout bounds one TokenRequest, which runs inside a
	// controller's request when the token is due.
	serviceAccountTokenRequestTimeout = 10 * time.Second
)

// serviceAccountTokenBackoff retries a failed TokenRequest as upstream's clientbuilder
// does: four attempts, 0.5s, 1s and 2s apart, so that an apiserver restart, its RBAC
// cache filling after it, or a dropped connection does not fail the controller's
// request that needed the token.
var serviceAccountTokenBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 4}

// serviceAccountTokens is an oauth2.TokenSource of tokens for one ServiceAccount,
// requested through the TokenRequest API (serviceaccounts/token). It is what
// k8s.io/controller-manager's clientbuilder.DynamicControllerClientBuilder does, but
// that token source gets the account and its namespace before every token and creates
// them when missing (getOrCreateServiceAccount), which needs get and create on
// serviceaccounts and namespaces; mini-kcm's process may only create tokens for the
// named accounts (deploy/rbac/token-requests.yaml), and deploy/ ships the accounts.
type serviceAccountTokens struct {
	client          corev1client.ServiceAccountsGetter
	namespace, name string
	// clock is replaced by tests; nil means the real one.
	clock clock.PassiveClock
	// backoff is replaced by tests; zero means serviceAccountTokenBackoff.
	backoff wait.Backoff
}

// Token requests a new token, retrying with backoff, and returns it with an expiry that
// leaves the leeway.
func (s *serviceAccountTokens) Token() (*oauth2.Token, error) {
	backoff := s.backoff
	if backoff.Steps == 0 {
		backoff = serviceAccountTokenBackoff
	}
	var (
		resp    *authenticationv1.TokenRequest
		lastErr error
	)
	err := wait.ExponentialBackoff(backoff, func() (bool, error) {
		resp, lastErr = s.request()
		// Every failure is retried, Forbidden and NotFound too: a kube-apiserver that
		// just started refuses every ServiceAccount until its RBAC informers synced, and
		// kubectl apply -k may create the account a moment after the replica starts.
		// A grant or account that is really missing costs the backoff's 3.5 s before
		// explain names the fix.
		return lastErr == nil, nil
	})
	if err != nil {
		if lastErr == nil {
			lastErr = err
		}
		return nil, s.explain(lastErr)
	}
	// The apiserver may shorten the lifetime (--service-account-max-token-expiration);
	// the leeway is a fifth of what was granted.
	now := s.now()
	lifetime := max(resp.Status.ExpirationTimestamp.Sub(now), serviceAccountTokenMinLifetime)
	return &oauth2.Token{
		AccessToken: resp.Status.Token,
		TokenType:   "Bearer",
		Expiry:      now.Add(lifetime - lifetime/5),
	}, nil
}

// request sends one TokenRequest. Its answer is the token: client-go's rest client
// logs response bodies at -v=8 and above through the request context's logger, so the
// request carries a logger without those levels (see withoutBodies).
func (s *serviceAccountTokens) request() (*authenticationv1.TokenRequest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), serviceAccountTokenRequestTimeout)
	defer cancel()
	ctx = klog.NewContext(ctx, withoutBodies(klog.Background()))
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(serviceAccountTokenLifetime / time.Second)),
	}}
	return s.client.ServiceAccounts(s.namespace).CreateToken(ctx, s.name, req, metav1.CreateOptions{})
}

// explain names the account and the fix for the two mistakes an operator makes.
func (s *serviceAccountTokens) explain(err error) error {
	account := s.namespace + "/" + s.name
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--use-service-account-credentials: ServiceAccount %s does not exist (%w); "+
			"create it and bind the controller's ClusterRole to it: deploy/rbac/ has one file per controller "+
			"with both (kubectl apply -k deploy/)", account, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--use-service-account-credentials: the --kubeconfig credentials may not request "+
			"tokens for ServiceAccount %s (%w); grant create on serviceaccounts/token for it "+
			"(deploy/rbac/token-requests.yaml)", account, err)
	default:
		return fmt.Errorf("requesting a token for ServiceAccount %s: %w", account, err)
	}
}

func (s *serviceAccountTokens) now() time.Time {
	if s.clock == nil {
		return time.Now()
	}
	return s.clock.Now()
}

// bodyLogLevel is the verbosity at which client-go's rest client logs request and
// response bodies (rest.logBody).
const bodyLogLevel = 8

// withoutBodies returns logger less its levels from bodyLogLevel up: everything else
// it logs, at the same verbosity, still goes through.
func withoutBodies(logger klog.Logger) klog.Logger {
	// WithSink, not logr.New: New would Init the sink, which klog's global one shares
	// with every other logger of the process.
	return logger.WithSink(belowBodies{logger.GetSink()})
}

// belowBodies is a logr.LogSink that is disabled from bodyLogLevel up.
type belowBodies struct{ logr.LogSink }

func (s belowBodies) Enabled(level int) bool {
	return level < bodyLogLevel && s.LogSink.Enabled(level)
}

func (s belowBodies) WithValues(keysAndValues ...any) logr.LogSink {
	return belowBodies{s.LogSink.WithValues(keysAndValues...)}
}

func (s belowBodies) WithName(name string) logr.LogSink {
	return belowBodies{s.LogSink.WithName(name)}
}

// WithCallDepth keeps the caller's file and line in the log, as the sink it wraps does.
func (s belowBodies) WithCallDepth(depth int) logr.LogSink {
	if sink, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return belowBodies{sink.WithCallDepth(depth)}
	}
	return s
}
