package clients

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"

	"github.com/mini-kcm/mini-kcm/controllers/throttle"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

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
