// Package clients builds the process's Kubernetes clients: one per named user (each
// controller, the informers, event recording, probes), each with its own rate limiter
// and user agent, the write fence in its transport, and under
// --use-service-account-credentials the controller's own ServiceAccount token. The
// shared informers' client decodes pods trimmed (package cachetrim) on a connection of
// its own.
package clients

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/caches"
	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/controllers/throttle"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// Builder hands out one client per named user (a controller, the shared informers,
// event recording). Each is built from a copy of the base configuration, so each gets
// its own --kube-api-qps/--kube-api-burst token bucket and a user agent that tells the
// apiserver's audit log who wrote what. It implements controllers.ClientBuilder. Its
// zero value but Base builds plain clients.
type Builder struct {
	// Base is the validated configuration from the flags; it is never modified.
	Base *rest.Config
	// UserAgent returns the user agent of name's client; nil sends name.
	UserAgent func(name string) string
	// ServiceAccounts maps a controller's name to its ServiceAccount in kube-system under
	// --use-service-account-credentials: that controller's client then authenticates
	// with tokens requested for the account instead of Base's credentials. Nil without
	// the flag, and the names not in it (the informers, events) always use Base's.
	ServiceAccounts map[string]string
	// Tokens requests those tokens, with Base's credentials.
	Tokens corev1client.ServiceAccountsGetter
	// Logger reports a controller's first token that could not be had; the zero
	// value is klog's default logger.
	Logger klog.Logger
	// Fence, when set, guards every client's writes: none leaves this process unless
	// it holds the Lease by its own clock. Nil (--leader-elect=false) fences nothing.
	Fence *leaderelection.Fence
	// InProcessFenceOff leaves Fence out of the clients' transports; only e2e tests set
	// it, through NoInProcessFenceEnv, to prove the apiserver's half of the fence alone.
	InProcessFenceOff bool
	// Holder, under --leader-elect-apiserver-fence, is this replica's leader-election
	// identity: the client of each name in Controllers impersonates its own user with
	// Holder as the user extra leaderelection.LeaseHolderExtra, which the apiserver's
	// admission policy compares with the Lease (see leaderelection.ImpersonateHolder).
	// The process's own clients (informers, events, probes, tokens) never write what
	// the policy fences and do not impersonate.
	Holder      string
	Controllers sets.Set[string]
	// Trimmer keeps of cached pods what the registry's controllers read (package
	// cachetrim); nil caches them whole.
	Trimmer *cachetrim.Trimmer
	// Reconnect holds the informers' requests while the apiserver is unreachable
	// (package reconnect); nil holds nothing.
	Reconnect *reconnect.Gate

	// shardTerm, in a shard's term, names the shard and the term the clients work for
	// ("shard 3, epoch 2, term 1764577223571"); it goes into their user agent, so that
	// the audit log tells one holder of a shard from the next.
	shardTerm string
	// lease, in a shard term under --leader-elect-apiserver-fence, is the shard Lease
	// (namespace/name) the term holds: the controllers' clients send it beside Holder
	// (leaderelection.ImpersonateShardHolder), for the binding of that shard's Lease.
	lease string
}

// ForShardTerm returns the builder of one term of a shard: its clients are fenced by
// the shard Lease's fence instead of Fence, name the term in their user agent, and under
// --leader-elect-apiserver-fence send the shard Lease (namespace/name) beside Holder.
func (b Builder) ForShardTerm(fence *leaderelection.Fence, lease, term string) Builder {
	b.Fence, b.shardTerm = fence, term
	if b.Holder != "" {
		b.lease = lease
	}
	return b
}

func (b Builder) logger() klog.Logger {
	if b.Logger.GetSink() == nil {
		return klog.Background()
	}
	return b.Logger
}

// userAgent is name's user agent.
func (b Builder) userAgent(name string) string {
	if b.UserAgent == nil {
		return name
	}
	return b.UserAgent(name)
}

// Config returns the configuration of name's client: a copy of the base configuration
// with the user agent of name and a rate limiter of its own, one that controllers can
// pay ahead (package throttle), for a controller with a ServiceAccount that account's
// tokens instead of the base credentials, and the write fence in its transport, so that
// no controller can forget it. Reads, events, reviews and token requests pass the fence
// (see leaderelection.Fence.Transport). Under --leader-elect-apiserver-fence a
// controller's client also impersonates its own user with this replica's identity as
// the lease-holder extra, for the apiserver's half of the fence.
func (b Builder) Config(name string) (*rest.Config, error) {
	cfg := rest.CopyConfig(b.Base)
	if account, ok := b.ServiceAccounts[name]; ok {
		tokens := &serviceAccountTokens{client: b.Tokens, namespace: metav1.NamespaceSystem, name: account}
		cached := transport.NewCachedTokenSource(tokens)
		// Request the first token now, so that a missing account or permission is in the
		// log with its fix as soon as the controller is built. It does not fail the
		// build: right after kube-apiserver restarts it refuses the account until its
		// RBAC cache is filled, and a replica must ride that out as its informers do.
		// The controller's requests ask again (client-go's cached token source), each
		// failing with the same message until the token is granted, and its work queue
		// retries them.
		if _, err := cached.Token(); err != nil {
			b.logger().Error(err, "No token yet for a controller's ServiceAccount; its requests ask again and fail until one is granted",
				"controller", name, "serviceAccount", klog.KRef(metav1.NamespaceSystem, account))
		}
		// Only the apiserver's address and CA stay: client certificates would be
		// authenticated before the bearer token, and the controller would write as the
		// process after all.
		cfg = rest.AnonymousClientConfig(b.Base)
		cfg.Wrap(transport.ResettableTokenSourceWrapTransport(cached))
	}
	cfg.UserAgent = b.userAgent(name)
	if b.shardTerm != "" {
		cfg.UserAgent = b.userAgent(name + "; " + b.shardTerm)
	}
	cfg.RateLimiter = throttle.New(cfg.QPS, cfg.Burst)
	// With the credentials it writes with, so that a ServiceAccount impersonates itself.
	if b.Holder != "" && b.Controllers.Has(name) {
		impersonate := func() error { return leaderelection.ImpersonateHolder(context.Background(), cfg, name, b.Holder) }
		if b.lease != "" {
			impersonate = func() error {
				return leaderelection.ImpersonateShardHolder(context.Background(), cfg, name, b.Holder, b.lease)
			}
		}
		if err := impersonate(); err != nil {
			return nil, err
		}
	}
	// After the credentials: AnonymousClientConfig above keeps no transport wrappers.
	if b.Fence != nil && !b.InProcessFenceOff {
		cfg.Wrap(b.Fence.Transport(name))
	}
	return cfg, nil
}

// Client returns a new clientset for name.
func (b Builder) Client(name string) (kubernetes.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for %q: %w", name, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for %q: %w", name, err)
	}
	return client, nil
}

// InformerClient returns the clientset of the shared informers, with name as its user
// agent: it decodes the cached kinds trimmed (caches.NewInformerClient), and its
// requests wait out an unreachable apiserver at the Reconnect gate, reporting each
// informer's connection to informers.
func (b Builder) InformerClient(name string, informers *reconnect.Informers) (kubernetes.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for %q: %w", name, err)
	}
	return caches.NewInformerClient(cfg, b.Trimmer, b.Reconnect, informers)
}

// CacheTransform returns the shared informers' transform (caches.Transform).
func (b Builder) CacheTransform() cache.TransformFunc {
	return caches.Transform(b.Base.ContentType, b.Trimmer)
}
