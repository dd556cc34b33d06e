package app

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/options"
)

// unreachableConfig returns a configuration whose apiserver address refuses connections.
func unreachableConfig(t *testing.T) *options.Config {
	t.Helper()
	server := httptest.NewServer(nil)
	host := server.URL
	server.Close()
	return &options.Config{
		RESTConfig:     &rest.Config{Host: host, QPS: 20, Burst: 30},
		LeaderElection: *options.NewLeaderElectionOptions(),
		Serving:        options.ServingConfig{Port: 0},
	}
}

func TestRunFailsWithAClearMessageWhenTheAPIServerIsUnreachable(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cfg := unreachableConfig(t)
	err := run(klog.NewContext(context.Background(), logger), cfg, controllers.MustNewRegistry(), 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the apiserver at "+cfg.RESTConfig.Host+" did not become healthy") {
		t.Errorf("run() = %v, want an error naming the apiserver", err)
	}
}

func TestRunStopsCleanlyOnSigtermWhileWaitingForTheAPIServer(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	time.AfterFunc(300*time.Millisecond, sigterm)
	if err := run(ctx, unreachableConfig(t), controllers.MustNewRegistry(), time.Minute); err != nil {
		t.Errorf("run() = %v, want nil (exit 0)", err)
	}
}
