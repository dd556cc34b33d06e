package deploy

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/sample"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// jwt matches a JSON Web Token, as every ServiceAccount token is: a base64url JSON
// header ({"alg"… encodes to eyJ), a payload, a signature.
var jwt = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)

// TestNoVerbosityVModuleOrGateLogsAToken: replicas as deploy/ runs them (each
// controller on a token of its own ServiceAccount, --use-service-account-credentials;
// serving delegating the authentication of bearer tokens to the apiserver).
//
// Every setting at which client-go logs request and response bodies (-v or --vmodule
// reaching its request.go at level 8, whatever the feature gates) is refused: the
// replica exits 1 before it sends a request, naming the setting and
// --allow-credentials-in-logs. The highest verbosity it runs at, with contextual
// logging off (so that no body-free logger can help), then runs the story that moves
// tokens: the leader rolls the sample out and is killed, the standby takes over and
// scales it, so that both request their controllers' tokens, and an HTTPS caller reads
// each replica's /metrics with a bearer token, which serving sends to the apiserver in
// a TokenReview. No log holds a token: not the process's own, not a TokenRequest's
// answer, not the caller's.
//
// The replicas run without the race detector: from -v=9 on client-go traces each
// request's connection (DebugDetailedTiming), and those httptrace callbacks race with
// the request inside client-go (transport/round_trippers.go: TLSHandshakeStart writes
// tlsStart on the dialing goroutine unguarded), which the race build reports.
func TestNoVerbosityVModuleOrGateLogsAToken(t *testing.T) {
	f := framework.New(t)
	inst := installMiniKCM(t, f)
	ctx := f.Context()
	binary := framework.MiniKCMBinaryWithoutRace(t)
	kubeconfig, err := clientcmd.LoadFromFile(inst.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, user := range kubeconfig.AuthInfos {
		own = user.Token
	}
	if own == "" {
		t.Fatalf("%s has no token", inst.kubeconfig)
	}
	noToken := func(r *framework.Replica, logs string) {
		t.Helper()
		// Protobuf bodies are logged as hex dumps: read their text column joined up.
		logs += "\n" + hexDumpText(logs)
		if strings.Contains(logs, own) {
			t.Errorf("%s's log holds the token of its kubeconfig", r.Name)
		}
		if found := jwt.FindAllString(logs, -1); len(found) > 0 {
			t.Errorf("%s's log holds %d tokens, e.g. %s…", r.Name, len(found), found[0][:20])
		}
	}

	for _, refused := range []struct {
		args    []string
		setting string
	}{
		{[]string{"--v=8"}, "-v=8"},
		{[]string{"--v=10"}, "-v=10"},
		{[]string{"--vmodule=request=8"}, "--vmodule=request=8"},
		{[]string{"--vmodule=req*=9"}, "--vmodule=req*=9"},
		{[]string{"--v=2", "--vmodule=*=8"}, "--vmodule=*=8"},
		{[]string{"--v=8", "--feature-gates=ContextualLogging=false"}, "-v=8"},
	} {
		r := inst.startReplicasOf(binary, 1, refused.args...)[0]
		code, err := r.Wait(30 * time.Second)
		if err != nil {
			t.Fatalf("%v: the replica still runs: %v", refused.args, err)
		}
		logs := r.Logs()
		if code != 1 || !strings.Contains(logs, refused.setting+" makes client-go log") || !strings.Contains(logs, "--allow-credentials-in-logs") {
			t.Errorf("%v: exit %d; want 1, with an error naming %s and --allow-credentials-in-logs:\n%s",
				refused.args, code, refused.setting, controlplane.Tail(r.LogPath(), 20))
		}
		noToken(r, logs)
	}

	// The most that runs: client-go's URLs and timings of every request (-v=7), the
	// curl commands with their headers (round_trippers at 10), contextual logging off.
	replicas := inst.startReplicasOf(binary, 2, "--v=7", "--vmodule=round_trippers=10", "--feature-gates=ContextualLogging=false")
	leader := inst.waitForLeader(replicas, time.Minute)
	leader.WaitReady(t, time.Minute)
	// An HTTPS caller with a bearer token: serving reviews it with the apiserver.
	withToken := func(r *framework.Replica) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL("/metrics"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+own)
		resp, err := f.ControlPlane.HTTPSClient(nil).Do(req)
		if err != nil {
			t.Fatalf("GET %s with a bearer token: %v", r.URL("/metrics"), err)
		}
		resp.Body.Close()
	}
	for _, r := range replicas {
		withToken(r)
	}

	app, err := sample.Load(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Not Delete: the suite's later test applies the app again, and a deleted
		// namespace stays Terminating here (no namespace controller runs).
		if err := app.DeleteObjects(ctx, f.Client); err != nil {
			t.Logf("deleting the sample app: %v", err)
		}
	})
	if err := app.Apply(ctx, inst.applier); err != nil {
		t.Fatal(err)
	}
	if _, err := app.WaitRolledOut(ctx, f.Client, *app.Deployment.Spec.Replicas, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	var standby *framework.Replica
	for _, r := range replicas {
		if r != leader {
			standby = r
		}
	}
	inst.waitForLeader([]*framework.Replica{standby}, time.Minute)
	if err := app.Scale(ctx, f.Client, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := app.WaitRolledOut(ctx, f.Client, 2, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	withToken(standby)

	for _, r := range replicas {
		logs := r.Logs()
		// The test bites only if the logs hold what these settings log: each token
		// request's URL, the curl commands, the TokenReviews.
		wants := []string{"curl -v -X", "/apis/authentication.k8s.io/v1/tokenreviews"}
		for _, d := range registry.Descriptors() {
			wants = append(wants, "/serviceaccounts/"+d.ServiceAccount()+"/token")
		}
		for _, want := range wants {
			if !strings.Contains(logs, want) {
				t.Errorf("%s's log has no %s; the test proves nothing", r.Name, want)
			}
		}
		noToken(r, logs)
	}
}

// hexDumpLine is a line of hex.Dump's output, as client-go logs a body that is not
// text: offset, hex bytes, then the bytes as text between bars.
var hexDumpLine = regexp.MustCompile(`^\s*[0-9a-f]{8}  .*\|(.*)\|$`)

// hexDumpText returns the text columns of the hex dumps in logs, each dump's lines
// joined into one line, so that a token split over them shows whole.
func hexDumpText(logs string) string {
	var b strings.Builder
	inDump := false
	for _, line := range strings.Split(logs, "\n") {
		m := hexDumpLine.FindStringSubmatch(line)
		if m == nil {
			if inDump {
				b.WriteByte('\n')
			}
			inDump = false
			continue
		}
		inDump = true
		b.WriteString(m[1])
	}
	return b.String()
}
