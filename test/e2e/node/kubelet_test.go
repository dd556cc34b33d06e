package node

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The node's kubelet API answers only authenticated and authorized requests, as a
// kubeadm node's does: the apiserver reviews every token and every request
// (authentication and authorization webhooks), anonymous requests are refused, and it
// listens on the node namespace's loopback only, so that no pod (but a hostNetwork one)
// and nothing on the machine reaches it. Otherwise any pod could exec into a mini-kcm
// pod and read its token.
func TestTheKubeletAPIRefusesAnonymousAndUnauthorizedRequests(t *testing.T) {
	cp := framework.ControlPlane(t)
	get := func(cert *tls.Certificate) (int, error) {
		client, base := cp.KubeletAPI(cert)
		resp, err := client.Get(base + "/pods")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if code, err := get(nil); err != nil || code != http.StatusUnauthorized {
		t.Errorf("an anonymous GET /pods of the kubelet got %d, %v; want 401", code, err)
	}
	nobody, err := cp.ClientCertificate("e2e-kubelet-nobody")
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(&nobody); err != nil || code != http.StatusForbidden {
		t.Errorf("a GET /pods of the kubelet by a user without a grant got %d, %v; want 403 (the apiserver's SubjectAccessReview)", code, err)
	}
	admin, err := cp.ClientCertificate("e2e-kubelet-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(&admin); err != nil || code != http.StatusOK {
		t.Errorf("a GET /pods of the kubelet by an admin got %d, %v; want 200: the test would prove nothing", code, err)
	}
	// Not on the machine: the port on the host's loopback is not the kubelet's.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10250", time.Second); err == nil {
		c.Close()
		t.Error("something listens on the host's 127.0.0.1:10250; the node's kubelet must listen only inside its namespace")
	}
}
