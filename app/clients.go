package app

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clientBuilder hands out one client per named user (a controller, the shared
// informers, event recording). Each is built from a copy of the base configuration, so
// each gets its own --kube-api-qps/--kube-api-burst token bucket and a user agent that
// tells the apiserver's audit log who wrote what. It implements controllers.ClientBuilder.
type clientBuilder struct {
	// base is the validated configuration from the flags; it is never modified.
	base *rest.Config
}

// Config returns a copy of the base configuration with the user agent of name.
func (b clientBuilder) Config(name string) *rest.Config {
	cfg := rest.CopyConfig(b.base)
	cfg.UserAgent = userAgent(name)
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
