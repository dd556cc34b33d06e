package app

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/mini-kcm/mini-kcm/controllers/cachedpod"
	"github.com/mini-kcm/mini-kcm/controllers/throttle"
)

// clientBuilder hands out one client per named user (a controller, the shared
// informers, event recording). Each is built from a copy of the base configuration, so
// each gets its own --kube-api-qps/--kube-api-burst token bucket and a user agent that
// tells the apiserver's audit log who wrote what. It implements controllers.ClientBuilder.
type clientBuilder struct {
	// base is the validated configuration from the flags; it is never modified.
	base *rest.Config
}

// Config returns a copy of the base configuration with the user agent of name and a
// rate limiter of its own, one that controllers can pay ahead (package throttle).
func (b clientBuilder) Config(name string) *rest.Config {
	cfg := rest.CopyConfig(b.base)
	cfg.UserAgent = userAgent(name)
	cfg.RateLimiter = throttle.New(cfg.QPS, cfg.Burst)
	return cfg
}

// Client returns a new clientset for name.
func (b clientBuilder) Client(name string) (kubernetes.Interface, error) {
	client, err := kubernetes.NewForConfig(b.Config(name))
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for %q: %w", name, err)
	}
	return client, nil
}

// informerClient returns the clientset of the shared informers. It decodes pods, and
// the other kinds the controllers cache, trimmed to what the controllers read (see
// package cachedpod), so that the informers never spend time and memory on the rest.
// It must only read: an object it decoded and wrote back would lose what was trimmed.
func (b clientBuilder) informerClient(name string) (kubernetes.Interface, error) {
	cfg := b.Config(name)
	// Watches over HTTP/1.1, each on a connection of its own: the watching goroutine
	// then reads and decodes straight from its connection, where over HTTP/2 every
	// event is first read by the connection's reader goroutine and handed over through
	// a pipe, which costs more CPU than decoding the event. It also keeps the watch
	// streams off the connection the controllers write through.
	cfg.NextProtos = []string{"http/1.1"}
	wrap := func(err error) error { return fmt.Errorf("building the Kubernetes client for %q: %w", name, err) }
	httpClient, err := rest.HTTPClientFor(cfg)
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
		c.NegotiatedSerializer = cachedpod.NegotiatedSerializer{
			NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(),
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

// trimmingClientset is a clientset whose core and apps clients decode trimmed.
type trimmingClientset struct {
	kubernetes.Interface
	core corev1client.CoreV1Interface
	apps appsv1client.AppsV1Interface
}

func (c trimmingClientset) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c trimmingClientset) AppsV1() appsv1client.AppsV1Interface { return c.apps }
