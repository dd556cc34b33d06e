package foundation

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// bearer adds a bearer token to every request, as a Prometheus with a ServiceAccount
// token does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// wantStatus checks that GET path answers one of want.
func wantStatus(t *testing.T, r *framework.Replica, client *http.Client, who, path string, want ...int) {
	t.Helper()
	code, body, err := r.GetWith(client, path)
	if err != nil {
		t.Errorf("%s GET %s: %v", who, path, err)
		return
	}
	for _, w := range want {
		if code == w {
			return
		}
	}
	t.Errorf("%s GET %s = %d %q, want %v", who, path, code, body, want)
}

func TestServingAuthenticatesAndAuthorizesEverythingButHealth(t *testing.T) {
	f := framework.New(t)
	r := f.StartReplica(framework.ReplicaOptions{})
	f.WaitForLeader(30 * time.Second)
	// A new leader is ready once its takeover barrier passed and its workers started,
	// a moment after it acquired the Lease.
	r.WaitReady(t, 30*time.Second)
	cp := f.ControlPlane
	anonymous := cp.HTTPSClient(nil)

	t.Log("anyone may probe health, over TLS")
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		wantStatus(t, r, anonymous, "anonymous", path, http.StatusOK)
	}

	t.Log("anonymous callers see which checks pass, not the reason a check fails")
	code, body, err := r.GetWith(anonymous, "/readyz?verbose")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "[+]controllers ok") {
		t.Errorf("anonymous GET /readyz?verbose = %d %q (%v), want 200 listing the checks", code, body, err)
	}

	t.Log("anonymous callers get nothing else, not even one check's answer")
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/statusz", "/statusz/replica", "/flagz", "/readyz/controllers", "/livez/ping"} {
		wantStatus(t, r, anonymous, "anonymous", path, http.StatusUnauthorized, http.StatusForbidden)
	}

	t.Log("a ServiceAccount without RBAC is authenticated by TokenReview but refused")
	ctx := f.Context()
	sa, err := f.Client.CoreV1().ServiceAccounts(f.Namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := f.Client.CoreV1().ServiceAccounts(f.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scraper := anonymous
	scraper = &http.Client{Timeout: scraper.Timeout, Transport: bearer{token: tr.Status.Token, next: scraper.Transport}}
	wantStatus(t, r, scraper, "ServiceAccount without RBAC", "/metrics", http.StatusForbidden)

	t.Log("granting get on /metrics lets it scrape, and only that")
	role := "mini-kcm-e2e-metrics-reader-" + f.Namespace
	if _, err := f.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Client.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
		_ = f.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{})
	})
	if _, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: f.Namespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The replica caches a denial for --authorization-webhook-cache-unauthorized-ttl (10s).
	framework.Eventually(t, time.Minute, func() error {
		code, body, err := r.GetWith(scraper, "/metrics")
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(body, "leader_election_master_status") {
			return fmt.Errorf("GET /metrics with the role = %d %.200q, want 200 and the metrics", code, body)
		}
		return nil
	})
	wantStatus(t, r, scraper, "ServiceAccount with get on /metrics", "/debug/pprof/", http.StatusForbidden)

	t.Log("a client certificate in system:masters may read everything")
	cert, err := cp.ClientCertificate("e2e-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	admin := cp.HTTPSClient(&cert)
	for _, path := range []string{"/metrics", "/debug/pprof/", "/statusz", "/statusz/replica", "/flagz", "/readyz?verbose", "/readyz/controllers", "/healthz/leaderElection"} {
		wantStatus(t, r, admin, "system:masters", path, http.StatusOK)
	}

	t.Log("/statusz and /flagz have the KEP-4827 and KEP-4828 shapes")
	statusz := getJSON(t, r, admin, "/statusz", "application/json;v=v1beta1;g=config.k8s.io;as=Statusz")
	if statusz["kind"] != "Statusz" || !strings.Contains(fmt.Sprint(statusz["paths"]), "/metrics") {
		t.Errorf("/statusz = %v, want kind Statusz listing /metrics", statusz)
	}
	flagz := getJSON(t, r, admin, "/flagz", "application/json;v=v1beta1;g=config.k8s.io;as=Flagz")
	flags, _ := flagz["flags"].(map[string]any)
	if flagz["kind"] != "Flagz" || flags["secure-port"] != strconv.Itoa(r.Port) || flags["leader-elect"] != "true" {
		t.Errorf("/flagz = %v, want kind Flagz with the flags in effect", flagz)
	}

	t.Log("/statusz/replica says which replica leads the Lease, and what it runs")
	lease := f.LeaseNamespace + "/" + f.LeaseName
	var enabled []string
	for _, d := range all.Registry().Descriptors() {
		if !d.DisabledByDefault {
			enabled = append(enabled, d.Name)
		}
	}
	defaultControllers := strings.Join(enabled, ", ")
	holder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		return statuszSays(r,
			`Leader election`+statuszDelimiter+regexp.QuoteMeta(`leading (warm standby mode) | Lease `+lease+` | identity `+holder+` | holder this replica`),
			`Controllers`+statuszDelimiter+regexp.QuoteMeta(defaultControllers)+` \(disabled: `,
			`Caches`+statuszDelimiter+`synced: `+regexp.QuoteMeta(defaultControllers)+`$`,
			`Write fence`+statuszDelimiter+`in-process`)
	})
	standby := f.StartReplica(framework.ReplicaOptions{})
	standby.WaitReady(t, time.Minute)
	framework.Eventually(t, 30*time.Second, func() error {
		return statuszSays(standby,
			`Leader election`+statuszDelimiter+regexp.QuoteMeta(`standby (warm) | Lease `+lease+` | identity `)+`\S+`+
				regexp.QuoteMeta(` | holder `+holder+` (seen `),
			`Caches`+statuszDelimiter+`warm standby: shared informers synced$`)
	})

	t.Log("plain HTTP is refused")
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(r.Port) + "/healthz")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP GET /healthz = %d %q, want a refusal (400 from the TLS server)", resp.StatusCode, body)
		}
	}
}

// statuszDelimiter is the separator between a name and its value in /statusz/replica.
const statuszDelimiter = `: `

// statuszSays checks that the replica's /statusz/replica has a line matching each pattern.
func statuszSays(r *framework.Replica, lines ...string) error {
	code, body, err := r.Get("/statusz/replica")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s /statusz/replica = %d %q", r.Name, code, body)
	}
	for _, line := range lines {
		if !regexp.MustCompile(`(?m)^` + line).MatchString(body) {
			return fmt.Errorf("%s /statusz/replica has no line matching %q:\n%s", r.Name, line, body)
		}
	}
	return nil
}

// getJSON gets path as JSON of the given media type and decodes it.
func getJSON(t *testing.T, r *framework.Replica, client *http.Client, path, accept string) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, r.URL(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("GET %s (%s) = %d %q, want JSON", path, accept, resp.StatusCode, body)
	}
	return out
}

// servedSerial returns the serial number of the certificate the replica serves.
func servedSerial(r *framework.Replica) (string, error) {
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the certificate
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func TestServingPicksUpAReplacedCertificateWithoutRestart(t *testing.T) {
	f := framework.New(t)
	r := f.StartReplica(framework.ReplicaOptions{})
	// Until the replica has read the client CA from the apiserver, a client certificate
	// counts as anonymous: wait for it, so that the check after the rotation is fair.
	framework.Eventually(t, 30*time.Second, func() error {
		code, _, err := r.Get("/metrics")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/metrics = %d", code)
		}
		return err
	})
	before, err := servedSerial(r)
	if err != nil {
		t.Fatal(err)
	}

	certFile, keyFile := f.ControlPlane.ServingCertFiles(r.Name)
	if err := f.ControlPlane.WriteServingCertificate(r.Name, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	// The library watches the files (and rereads them every minute besides).
	framework.Eventually(t, 3*time.Minute, func() error {
		after, err := servedSerial(r)
		if err != nil {
			return err
		}
		if after == before {
			return fmt.Errorf("still serving certificate %s", before)
		}
		return nil
	})
	if r.Exited() {
		t.Fatalf("the replica exited instead of reloading its certificate")
	}
	// The new certificate verifies against the CA like the old one.
	if code, _, err := r.Get("/metrics"); err != nil || code != http.StatusOK {
		t.Errorf("GET /metrics after the rotation = %d, %v", code, err)
	}
}

func TestServingWithoutCertificateFilesUsesASelfSignedOne(t *testing.T) {
	f := framework.New(t)
	// Empty values override the framework's certificate files.
	r := f.StartReplica(framework.ReplicaOptions{Args: []string{"--tls-cert-file=", "--tls-private-key-file="}})
	framework.Eventually(t, 30*time.Second, func() error {
		_, err := servedSerial(r)
		return err
	})
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // inspects the certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cert := conn.ConnectionState().PeerCertificates[0]
	if cert.Issuer.String() == "CN=mini-kcm-test-ca" || !strings.Contains(cert.Subject.CommonName, "localhost") {
		t.Errorf("served certificate subject %q issuer %q, want a self-signed one for localhost", cert.Subject, cert.Issuer)
	}
	// The control plane's CA does not trust it: a client must pin it or skip verification.
	if _, _, err := r.Get("/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET with the CA-only client = %v, want a certificate verification error", err)
	}
}
