package serving

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/server/statusz/api/v1beta1"
)

// testVersion is the version the tests' handlers report.
const testVersion = "v0.1.0"

// getStatusz requests path with an Accept header ("" for none).
func getStatusz(t *testing.T, h http.Handler, path, accept string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, string(body)
}

func TestStatuszIsTheLibrarysAndListsTheReplicasPage(t *testing.T) {
	fields := []StatuszField{{Name: "Leader election", Value: func() string { return "leading" }}}
	h := NewHandler(testVersion, HealthChecks{}, false, nil, fields)
	code, header, body := getStatusz(t, h, "/statusz", "application/json;v=v1beta1;g=config.k8s.io;as=Statusz")
	if code != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /statusz as JSON = %d %s %q, want 200 application/json", code, header.Get("Content-Type"), body)
	}
	var s v1beta1.Statusz
	decoder := json.NewDecoder(bytes.NewReader([]byte(body)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&s); err != nil {
		t.Fatalf("decoding %q as v1beta1.Statusz: %v", body, err)
	}
	if s.Kind != "Statusz" || s.APIVersion != "config.k8s.io/v1beta1" || s.Name != componentName ||
		!strings.Contains(strings.Join(s.Paths, " "), "/metrics") || s.BinaryVersion == "" {
		t.Errorf("decoded %+v, want the library's v1beta1 Statusz of mini-kcm", s)
	}
	if code, _, body := getStatusz(t, h, "/statusz", ""); code != http.StatusOK ||
		!strings.Contains(body, "mini-kcm statusz") || strings.Contains(body, "Leader election") {
		t.Errorf("GET /statusz = %d %q, want the library's text alone", code, body)
	}
}

func TestReplicaStatuszKeepsEachFieldOnOneLine(t *testing.T) {
	fields := []StatuszField{{Name: "Holder", Value: func() string { return "<b>x</b>\nforged: line" }}}
	_, _, body := getStatusz(t, replicaStatusz(fields), replicaStatuszPath, "")
	if !strings.HasSuffix(body, "\n\nHolder: <b>x</b> forged: line\n") {
		t.Errorf("body = %q, want the value on the field's one line", body)
	}
}
