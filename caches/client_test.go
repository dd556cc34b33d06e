package caches

import (
	"bytes"
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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

	client, err := NewInformerClient(&rest.Config{Host: server.URL, QPS: 5, Burst: 10,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}}, registryTrimmer(t), nil, nil)
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

func TestInformerWatchEndsSoonAfterItsConnectionGoesSilentButNotWhileItIsOnlyQuiet(t *testing.T) {
	server, listener := startSilenceableHTTP2Server(t, http.HandlerFunc(quietWatch))
	check := http2HealthCheck{readIdle: 100 * time.Millisecond, ping: time.Second}
	cfg := tlsConfigFor(server)
	httpClient, err := informerHTTPClient(cfg, check, nil, nil)
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
	// A client as client-go builds it, as every controller's is.
	controller, err := kubernetes.NewForConfig(tlsConfigFor(server))
	if err != nil {
		t.Fatal(err)
	}
	informers, err := NewInformerClient(tlsConfigFor(server), nil, nil, nil)
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
