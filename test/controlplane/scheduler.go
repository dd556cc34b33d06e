package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// schedulerConfig turns leader election off (there is one scheduler) and lifts the
// client rate limit well above what any test or benchmark needs, so that the scheduler
// is never what a measurement of mini-kcm measures.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`

func (cp *ControlPlane) startScheduler(ctx context.Context) error {
	kubeconfig, err := cp.AddUser("system:kube-scheduler")
	if err != nil {
		return err
	}
	configPath := filepath.Join(cp.dir, "kube-scheduler", "config.yaml")
	if err := os.WriteFile(configPath, []byte(fmt.Sprintf(schedulerConfig, kubeconfig)), 0o600); err != nil {
		return fmt.Errorf("writing scheduler config: %w", err)
	}
	p, err := cp.start(KubeScheduler, []string{
		"--config=" + configPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.ports.scheduler),
		"--cert-dir=" + filepath.Join(cp.dir, "kube-scheduler"),
		// No --authentication-kubeconfig: delegated authentication is for in-cluster
		// callers, and the only caller here is the harness asking /readyz, which is
		// always allowed.
	}, nil)
	if err != nil {
		return err
	}
	// The scheduler serves a self-signed certificate; the harness only reads /readyz.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://127.0.0.1:" + strconv.Itoa(cp.ports.scheduler) + "/readyz"
	return cp.waitReady(ctx, p, func(ctx context.Context) error {
		_, err := httpGet(ctx, client, url)
		return err
	})
}
