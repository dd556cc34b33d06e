package clients

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/mini-kcm/mini-kcm/controllers/throttle"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

func TestInformerClientDecodesTrimmed(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	pods := &corev1.PodList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		Items: []corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: managed},
			Spec:       corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}},
	}
	replicaSets := &appsv1.ReplicaSetList{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"},
		Items:    []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "rs", ManagedFields: managed, Annotations: map[string]string{"a": "b"}}}},
	}
	serve := map[string]runtime.Object{"/api/v1/pods": pods, "/apis/apps/v1/replicasets": replicaSets}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		obj, ok := serve[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		var buf bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(buf.Bytes())
	}))
	defer server.Close()

	builder := Builder{Base: &rest.Config{Host: server.URL, QPS: 5, Burst: 10,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}}, Trimmer: registryTrimmer(t)}
	client, err := builder.InformerClient("shared-informers")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gotPods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := gotPods.Items[0]; p.Name != "p" || p.Spec.NodeName != "node" || p.Spec.Containers[0].Name != "app" ||
		p.Spec.Containers[0].Image != "" || p.ManagedFields != nil {
		t.Errorf("pod not decoded trimmed: %+v", p)
	}
	gotRS, err := client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rs := gotRS.Items[0]; rs.Name != "rs" || rs.Annotations["a"] != "b" || rs.ManagedFields != nil {
		t.Errorf("ReplicaSet not decoded without managedFields only: %+v", rs)
	}
}

func TestEveryClientHasARateLimiterOfItsOwnThatCanBePaidAhead(t *testing.T) {
	builder := Builder{Base: &rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10}}
	a, err := builder.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := builder.Client("b")
	if err != nil {
		t.Fatal(err)
	}
	if throttle.Of(a) == nil || throttle.Of(b) == nil || throttle.Of(a) == throttle.Of(b) {
		t.Errorf("limiters %p and %p, want two of package throttle", throttle.Of(a), throttle.Of(b))
	}
}

func TestInformerWatchEndsSoonAfterItsConnectionGoesSilentButNotWhileItIsOnlyQuiet(t *testing.T) {
	server, listener := startSilenceableHTTP2Server(t, http.HandlerFunc(quietWatch))
	check := http2HealthCheck{readIdle: 100 * time.Millisecond, ping: time.Second}
	cfg := tlsConfigFor(server)
	httpClient, err := informerHTTPClient(cfg, check)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods("").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// A watch with no events on a live connection: the pings are answered, so it stays.
	select {
	case ev, ok := <-w.ResultChan():
		t.Fatalf("a quiet watch on a live connection ended (event %v, open %v)", ev.Type, ok)
	case <-time.After(15 * check.readIdle):
	}

	// The server's end goes silent without closing: the next unanswered ping ends it.
	listener.silence()
	silenced := time.Now()
	deadline := time.After(10 * (check.readIdle + check.ping))
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				t.Logf("the watch ended %v after its connection went silent (health check %v + %v)",
					time.Since(silenced).Round(time.Millisecond), check.readIdle, check.ping)
				return
			}
		case <-deadline:
			t.Fatalf("the watch was still open %v after its connection went silent", time.Since(silenced))
		}
	}
}

func TestInformersTalkHTTP2OnAConnectionOfTheirOwn(t *testing.T) {
	var mu sync.Mutex
	protocols := map[string]int{}
	server, listener := startSilenceableHTTP2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protocols[r.Proto]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
	}))
	builder := Builder{Base: tlsConfigFor(server)}
	controller, err := builder.Client("replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	informers, err := builder.InformerClient("shared-informers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []kubernetes.Interface{controller, informers, controller, informers} {
		if _, err := c.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if protocols["HTTP/2.0"] != 4 || len(protocols) != 1 {
		t.Errorf("requests by protocol: %v, want all four over HTTP/2.0", protocols)
	}
	if n := listener.accepted.Load(); n != 2 {
		t.Errorf("%d connections for a controller's client and the informers' client, want 2", n)
	}
}

// quietWatch serves a watch that sends no event until the client goes away.
func quietWatch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// startSilenceableHTTP2Server starts an HTTPS server that speaks HTTP/2 and whose
// connections can be silenced.
func startSilenceableHTTP2Server(t *testing.T, handler http.Handler) (*httptest.Server, *silenceableListener) {
	t.Helper()
	server := httptest.NewUnstartedServer(handler)
	server.EnableHTTP2 = true
	listener := &silenceableListener{Listener: server.Listener}
	server.Listener = listener // StartTLS puts TLS on top of it
	server.StartTLS()
	t.Cleanup(func() {
		server.CloseClientConnections()
		server.Close()
	})
	return server, listener
}

// tlsConfigFor returns a client configuration that trusts server's certificate.
func tlsConfigFor(server *httptest.Server) *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	return &rest.Config{Host: server.URL, QPS: 5, Burst: 10, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// silenceableListener hands out connections that silence makes half-open, as a client
// sees the apiserver behind a load balancer that lost its state: they stay open, take
// whatever is sent and never answer.
type silenceableListener struct {
	net.Listener
	silent   atomic.Bool
	accepted atomic.Int32
}

func (l *silenceableListener) silence() { l.silent.Store(true) }

func (l *silenceableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return &silenceableConn{Conn: c, silent: &l.silent}, nil
}

type silenceableConn struct {
	net.Conn
	silent *atomic.Bool
}

// Read drops what arrives once silenced, and waits for more.
func (c *silenceableConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil || !c.silent.Load() {
			return n, err
		}
	}
}

// Write pretends to send once silenced.
func (c *silenceableConn) Write(b []byte) (int, error) {
	if c.silent.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func TestEveryControllerClientIsFencedButOnlyForWrites(t *testing.T) {
	var received []string
	var mu sync.Mutex
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	}))
	defer server.Close()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}

	// A fence that never opened: this replica has not acquired the Lease.
	fence := leaderelection.NewFence("kube-system/mini-kube-controller-manager", 15*time.Second, nil)
	fenced, err := Builder{Base: &rest.Config{Host: server.URL, QPS: 5, Burst: 10}, Fence: fence}.Client("replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fenced.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
	var fencedErr *leaderelection.FencedError
	if !errors.As(err, &fencedErr) || !strings.Contains(err.Error(), "kube-system/mini-kube-controller-manager") {
		t.Errorf("create through a fenced client = %v, want a FencedError naming the lease", err)
	}
	if _, err := fenced.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("a read through a fenced client: %v", err)
	}
	if _, err := fenced.CoreV1().Events("ns").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("an event through a fenced client: %v", err)
	}

	// --leader-elect=false: no fence.
	open, err := Builder{Base: &rest.Config{Host: server.URL, QPS: 5, Burst: 10}}.Client("replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("create without leader election: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET /api/v1/namespaces/ns/pods/p", "POST /api/v1/namespaces/ns/events", "POST /api/v1/namespaces/ns/pods"}
	if strings.Join(received, ", ") != strings.Join(want, ", ") {
		t.Errorf("the apiserver received %q, want %q", received, want)
	}
}

// Under --leader-elect-apiserver-fence the controllers' clients impersonate their own
// user with the holder; the process's own clients (informers, events, probes) do not,
// and without the flag nobody does.
func TestOnlyControllerClientsImpersonateThemselvesWithTheHolder(t *testing.T) {
	var impersonated []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/authentication.k8s.io/v1/selfsubjectreviews" {
			http.NotFound(w, r)
			return
		}
		info := `{"username":"mini-kcm-replica-1","groups":["system:masters","system:authenticated"]}`
		if u := r.Header.Get("Impersonate-User"); u != "" {
			impersonated = append(impersonated, u)
			info = `{"username":"` + u + `","extra":{"mini-kcm.io/lease-holder":["` + r.Header.Get("Impersonate-Extra-Mini-Kcm.io%2flease-Holder") + `"]}}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","status":{"userInfo":` + info + `}}`))
	}))
	defer server.Close()
	base := &rest.Config{Host: server.URL, QPS: 5, Burst: 10}

	fenced := Builder{Base: base, Holder: "host_1234", Controllers: sets.New("replicaset-controller")}
	cfg, err := fenced.Config("replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	want := rest.ImpersonationConfig{UserName: "mini-kcm-replica-1", Groups: []string{"system:masters"},
		Extra: map[string][]string{leaderelection.LeaseHolderExtra: {"host_1234"}}}
	if cfg.Impersonate.UserName != want.UserName || len(cfg.Impersonate.Groups) != 1 ||
		cfg.Impersonate.Extra[leaderelection.LeaseHolderExtra][0] != "host_1234" {
		t.Errorf("the controller's client impersonates %+v, want %+v", cfg.Impersonate, want)
	}
	for _, name := range []string{"event-recorder", "apiserver-probe", "shared-informers", "token-requests"} {
		if cfg, err := fenced.Config(name); err != nil || cfg.Impersonate.UserName != "" {
			t.Errorf("client %s: impersonates %+v (err %v), want nothing: it writes nothing the policy fences", name, cfg.Impersonate, err)
		}
	}
	if cfg, err := (Builder{Base: base}).Config("replicaset-controller"); err != nil || cfg.Impersonate.UserName != "" {
		t.Errorf("without the flag the controller's client impersonates %+v (err %v)", cfg.Impersonate, err)
	}
	if len(impersonated) != 1 {
		t.Errorf("impersonated reviews: %v, want exactly the controller's check", impersonated)
	}
}
