package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestControlPlaneRunsPodsLikeARealCluster starts the full control plane once and
// walks through what the e2e suites rely on.
func TestControlPlaneRunsPodsLikeARealCluster(t *testing.T) {
	begin := time.Now()
	cp := StartForTest(t, Options{Scheduler: true, KWOK: true, Nodes: 2})
	t.Logf("full control plane started in %v", time.Since(begin).Round(10*time.Millisecond))
	ctx := t.Context()
	client := cp.Client()

	t.Run("etcd answers only the holders of its own client certificates", func(t *testing.T) {
		// Plain HTTP, TLS without a certificate, and the certificate of an apiserver
		// user (the admin's, signed by the cluster CA) are all refused; the
		// harness's etcd client certificate gets an answer.
		get := func(client *http.Client, url string) error {
			resp, err := client.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s", resp.Status)
			}
			return nil
		}
		plainURL := strings.Replace(cp.EtcdClientURL(), "https://", "http://", 1)
		if err := get(&http.Client{Timeout: 5 * time.Second}, plainURL+"/health"); err == nil {
			t.Error("etcd answered plain HTTP")
		}
		roots := x509.NewCertPool()
		roots.AddCert(cp.etcdCA.cert)
		insecure := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if err := get(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure}}, cp.EtcdClientURL()+"/health"); err == nil {
			t.Error("etcd answered a TLS client without a certificate")
		}
		admin, err := tls.X509KeyPair(cp.restConfig.CertData, cp.restConfig.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		withUserCert := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}, MinVersion: tls.VersionTLS12}
		if err := get(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: withUserCert}}, cp.EtcdClientURL()+"/health"); err == nil {
			t.Error("etcd answered the admin's apiserver client certificate")
		}
		harness, err := cp.etcdHTTPClient()
		if err != nil {
			t.Fatal(err)
		}
		if err := get(harness, cp.EtcdClientURL()+"/health"); err != nil {
			t.Errorf("etcd refused the harness's own client certificate: %v", err)
		}
		if info, err := os.Stat(cp.Dir()); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("the control plane directory, which holds the keys: %v, %v; want mode 0700", info.Mode().Perm(), err)
		}
	})

	t.Run("a plain pod is scheduled and becomes Running and Ready with a pod IP", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			got, err := client.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Spec.NodeName == "" || got.Status.Phase != corev1.PodRunning || got.Status.PodIP == "" || !podReady(got) {
				return fmt.Errorf("pod not running yet: node=%q phase=%q ip=%q", got.Spec.NodeName, got.Status.Phase, got.Status.PodIP)
			}
			if !strings.HasPrefix(got.Status.PodIP, "10.244.") || !strings.HasPrefix(got.Status.HostIP, "10.240.0.") {
				return fmt.Errorf("unexpected addresses: pod IP %q, host IP %q", got.Status.PodIP, got.Status.HostIP)
			}
			return nil
		})
	})

	t.Run("a deleted pod is gone, as if a kubelet stopped it", func(t *testing.T) {
		if err := client.CoreV1().Pods("default").Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			_, err := client.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("pod still exists")
			}
			return nil
		})
	})

	t.Run("AddUser gives a client-certificate identity with its groups", func(t *testing.T) {
		path, err := cp.AddUser("replica-1", "team-a")
		if err != nil {
			t.Fatal(err)
		}
		config, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		config.UserAgent = "identity-test"
		userClient := kubernetes.NewForConfigOrDie(config)
		review, err := userClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := review.Status.UserInfo; got.Username != "replica-1" || !contains(got.Groups, "team-a") {
			t.Fatalf("user info = %+v, want replica-1 in team-a", got)
		}
		// Without RBAC rules the user may not read pods.
		if _, err := userClient.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
			t.Fatal("an unprivileged user could list pods")
		}
	})

	t.Run("the audit log names user, user agent, verb and resource", func(t *testing.T) {
		eventually(t, 10*time.Second, func() error {
			events, err := cp.ReadAuditLog()
			if err != nil {
				return err
			}
			for _, e := range events {
				if e.User.Username == "replica-1" && e.UserAgent == "identity-test" && e.Verb == "list" &&
					e.Resource() == "pods" && e.Code() == 403 && !e.StageTimestamp.IsZero() {
					return nil
				}
			}
			return fmt.Errorf("no audit event for replica-1 listing pods among %d events", len(events))
		})
	})

	t.Run("TokenRequest works without a service account controller", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "default"}}
		if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expiration := int64(600)
		token, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if token.Status.Token == "" {
			t.Fatal("empty token")
		}
	})

	t.Run("the apiserver restarts on the same address with the same data", func(t *testing.T) {
		begin := time.Now()
		if err := cp.RestartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("apiserver restarted in %v", time.Since(begin).Round(10*time.Millisecond))
		if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "robot", metav1.GetOptions{}); err != nil {
			t.Fatalf("after restart: %v", err)
		}
	})

	t.Run("Stop leaves no process and no directory behind", func(t *testing.T) {
		cp.mu.Lock()
		var pids []int
		for _, p := range cp.processes {
			pids = append(pids, p.Pid())
		}
		cp.mu.Unlock()
		if len(pids) != 4 {
			t.Fatalf("want 4 processes, got %d", len(pids))
		}
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); err == nil {
				t.Errorf("process %d still runs", pid)
			}
		}
		if _, err := os.Stat(cp.Dir()); !os.IsNotExist(err) {
			t.Errorf("directory %s still exists: %v", cp.Dir(), err)
		}
	})
}

func TestStartFailsWithInstructionsWhenBinariesAreMissing(t *testing.T) {
	_, err := Start(context.Background(), Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make control-plane") {
		t.Fatalf("error = %v, want one that says to run make control-plane", err)
	}
}

func TestStartRejectsNodesWithoutKWOK(t *testing.T) {
	if _, err := Start(context.Background(), Options{Nodes: 1}); err == nil {
		t.Fatal("want an error")
	}
}

func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
