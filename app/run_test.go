package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/options"
)

// refusingAPIServer is an address that refuses connections. A port freed by closing a
// test server would not do: it is in the ephemeral range, where a process starting
// beside the tests (another package's control plane) may be given it.
const refusingAPIServer = "http://127.0.0.1:1"

// unreachableConfig returns a configuration whose apiserver address refuses connections.
func unreachableConfig(t *testing.T) *options.Config {
	t.Helper()
	return &options.Config{
		RESTConfig:     &rest.Config{Host: refusingAPIServer, QPS: 20, Burst: 30},
		LeaderElection: *options.NewLeaderElectionOptions(),
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
