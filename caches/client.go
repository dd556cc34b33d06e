// Package caches holds what the shared informers cache and when the cache is fresh:
// the informers' client, which decodes the cached kinds trimmed to what the registered
// controllers read (cachetrim) over a connection of its own, the transform that trims
// what the decoder did not, and the freshness barrier a takeover waits on (freshness).
// The app wires them; nothing here knows the run mode.
package caches

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"

	"github.com/mini-kcm/mini-kcm/caches/cacheintern"
	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
)

// NewInformerClient returns the clientset of the shared informers from cfg (the
// process's, with its user agent). It decodes pods, and the other kinds the controllers
// cache, trimmed by trimmer to what the controllers read (see package cachetrim), so
// that the informers never spend time and memory on the rest; a nil trimmer decodes
// whole. It must only read: an object it decoded and wrote back would lose what was
// trimmed. Its requests go over a connection of their own (see informerHTTPClient),
// through gate (package reconnect; nil: none), which reports to informers.
func NewInformerClient(cfg *rest.Config, trimmer *cachetrim.Trimmer, gate *reconnect.Gate, informers *reconnect.Informers) (kubernetes.Interface, error) {
	wrap := func(err error) error { return fmt.Errorf("building the informers' Kubernetes client: %w", err) }
	httpClient, err := informerHTTPClient(cfg, http2HealthCheck{readIdle: informerReadIdleTimeout, ping: informerPingTimeout}, gate, informers)
	if err != nil {
		return nil, wrap(err)
	}
	whole, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, wrap(err)
	}
	trimmed := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath = &gv, apiPath
		c.NegotiatedSerializer = cachetrim.NegotiatedSerializer{
			NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(),
			Trimmer:              trimmer,
		}
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	core, err := trimmed(corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, wrap(err)
	}
	apps, err := trimmed(appsv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, wrap(err)
	}
	return trimmingClientset{Interface: whole, core: corev1client.New(core), apps: appsv1client.New(apps)}, nil
}

// Transform returns the shared informers' transform, which drops from every cached
// object what no controller reads: its managedFields, which the informer client's
// Decoder drops already from protobuf, and for a pod decoded from JSON (contentType, the
// informer client's) most of the rest (the trimmer's Trim, which the Decoder did while
// decoding a protobuf pod).
func Transform(contentType string, trimmer *cachetrim.Trimmer) cache.TransformFunc {
	decodesTrimmed := contentType == runtime.ContentTypeProtobuf
	// Cached pods share what many of them repeat (labels, owners, containers, node
	// names): about 1.9 KB instead of 3.2 KB a pod at 30 000 (cacheintern).
	interner := cacheintern.New()
	return func(obj any) (any, error) {
		if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
			accessor.SetManagedFields(nil)
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			if !decodesTrimmed && trimmer != nil {
				trimmer.Trim(pod)
			}
			interner.Pod(pod)
		}
		return obj, nil
	}
}

// trimmingClientset is a clientset whose core and apps clients decode trimmed.
type trimmingClientset struct {
	kubernetes.Interface
	core corev1client.CoreV1Interface
	apps appsv1client.AppsV1Interface
}

func (c trimmingClientset) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c trimmingClientset) AppsV1() appsv1client.AppsV1Interface { return c.apps }

// http2HealthCheck is the HTTP/2 connection health check: a connection that has
// received no frame for readIdle is pinged, and closed if the ping is not answered
// within ping; its streams then fail and their watches start again.
type http2HealthCheck struct {
	readIdle, ping time.Duration
}

// The informers' health check bounds how long they act on a frozen cache after their
// connection went half-open (a load balancer or apiserver gone without a FIN or RST):
// 15s+15s to notice, which leaves 15s of a 45s bound to reconnect, list and watch
// again. client-go's default, 30s+15s, would spend the whole bound on noticing. TCP
// keepalives cannot notice at all: a load balancer that holds its end answers them.
// The cost is one ping frame every 15s, and only on a connection that received nothing.
const (
	informerReadIdleTimeout = 15 * time.Second
	informerPingTimeout     = 15 * time.Second
)

// InformerAddressEnv, when set to host:port, makes the informers' connections dial that
// address instead of the apiserver's. It exists for e2e tests only, which put a proxy
// there that delays the informers' watch streams while every other request flows
// (test/e2e/ha's takeover test); it is not a supported setting.
const InformerAddressEnv = "MINI_KCM_E2E_INFORMER_ADDRESS"

// informerHTTPClient returns an HTTP client for cfg on a transport of its own, built
// as client-go builds its shared ones (TLS, dialer, proxy and authentication from cfg)
// but with the given HTTP/2 health check. A transport of its own keeps the watch
// streams off the connection the controllers write and renew the Lease through, so a
// large list or a burst of events never queues in front of a renewal, and it lets the
// watches have a health check of their own without changing the other clients'.
//
// Watches must stay on HTTP/2: a watch on an HTTP/1.1 connection of its own has no
// liveness signal but its events, and a healthy watch may have none for minutes, so a
// dead connection cannot be told from a quiet one without a new request.
func informerHTTPClient(cfg *rest.Config, health http2HealthCheck, gate *reconnect.Gate, informers *reconnect.Informers) (*http.Client, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, err
	}
	// The same dialer and limits as client-go's transports (k8s.io/client-go/transport).
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if tc.DialHolder != nil {
		dial = tc.DialHolder.Dial
	}
	if address := os.Getenv(InformerAddressEnv); address != "" {
		// For e2e tests only: TLS still verifies the apiserver's name and certificate.
		apiserver := dial
		dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return apiserver(ctx, network, address)
		}
	}
	proxy := http.ProxyFromEnvironment
	if tc.Proxy != nil {
		proxy = tc.Proxy
	}
	base := utilnet.SetOldTransportDefaults(&http.Transport{
		Proxy:               proxy,
		DialContext:         dial,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		DisableCompression:  tc.DisableCompression,
		ForceAttemptHTTP2:   true,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: health.readIdle, PingTimeout: health.ping},
	})
	rt, err := transport.HTTPWrappersForConfig(tc, base)
	if err != nil {
		return nil, err
	}
	// Outermost, so that a request it sends again passes the authentication wrappers
	// again, with a fresh token if the old one expired meanwhile.
	if gate != nil {
		rt = gate.Wrap(rt, informers)
	}
	return &http.Client{Transport: rt, Timeout: cfg.Timeout}, nil
}
