package deploy

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/sample"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// jwt matches a JSON Web Token, as every ServiceAccount token is: a base64url JSON
// header ({"alg"… encodes to eyJ), a payload, a signature.
var jwt = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)

// TestNoTokenReachesTheLogsOfATakeoverAtV10: two replicas as deploy/ runs them (each
// controller on a token of its own ServiceAccount, --use-service-account-credentials)
// but at -v=10, where client-go logs every request's headers and every request's and
// response's body (at -v=8 cut after 1024 characters, which for a protobuf hex dump
// ends before the token; from -v=9 on, whole). The leader rolls the sample out, is
// killed, and the standby takes over and scales it, so that both request their
// controllers' tokens. Neither log holds a token: not the process's own (its
// kubeconfig's), not one of a TokenRequest's answers.
//
// The replicas run without the race detector: from -v=9 on client-go traces each
// request's connection (DebugDetailedTiming), and those httptrace callbacks race with
// the request inside client-go (transport/round_trippers.go: TLSHandshakeStart writes
// tlsStart on the dialing goroutine unguarded), which the race build reports.
func TestNoTokenReachesTheLogsOfATakeoverAtV10(t *testing.T) {
	f := framework.New(t)
	inst := installMiniKCM(t, f)
	ctx := f.Context()
	replicas := inst.startReplicasOf(framework.MiniKCMBinaryWithoutRace(t), 2, "--v=10")
	leader := inst.waitForLeader(replicas, time.Minute)
	leader.WaitReady(t, time.Minute)

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
	for _, r := range replicas {
		logs := r.Logs()
		// The test bites only if the logs hold what -v=10 logs, and the replica asked
		// for its controllers' tokens.
		wants := []string{`"Response Body"`}
		for _, d := range registry.Descriptors() {
			wants = append(wants, "/serviceaccounts/"+d.ServiceAccount()+"/token")
		}
		for _, want := range wants {
			if !strings.Contains(logs, want) {
				t.Errorf("%s's log has no %s at -v=10; the test proves nothing", r.Name, want)
			}
		}
		// Protobuf bodies are logged as hex dumps: read their text column joined up.
		logs += "\n" + hexDumpText(logs)
		if strings.Contains(logs, own) {
			t.Errorf("%s's log holds the token of its kubeconfig", r.Name)
		}
		if found := jwt.FindAllString(logs, -1); len(found) > 0 {
			t.Errorf("%s's log holds %d tokens, e.g. %s…", r.Name, len(found), found[0][:20])
		}
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
