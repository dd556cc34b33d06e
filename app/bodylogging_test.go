package app

import (
	"bytes"
	"strings"
	"testing"

	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2/textlogger"

	"github.com/mini-kcm/mini-kcm/options"
)

// A verbosity at which client-go logs request and response bodies, tokens included,
// starts only with --allow-credentials-in-logs, and then says so at error severity;
// below it, nothing is said.
func TestVerbosityThatLogsTokensIsWarnedAboutLoudlyWhenAllowed(t *testing.T) {
	for _, tc := range []struct {
		v     uint32
		allow bool
		warn  bool
	}{{0, false, false}, {7, true, false}, {8, true, true}, {10, true, true}} {
		opts := options.NewOptions()
		opts.Logs.Verbosity = logsapi.VerbosityLevel(tc.v)
		opts.LogSafety.AllowCredentialsInLogs = tc.allow
		var out bytes.Buffer
		logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out)))
		warned := warnIfRequestBodiesLogged(logger, opts)
		line := out.String()
		if warned != tc.warn || (line != "") != tc.warn {
			t.Errorf("-v=%d: warned %v, logged %q; want a warning %v", tc.v, warned, line, tc.warn)
		}
		if tc.warn && (!strings.HasPrefix(line, "E") || !strings.Contains(line, "tokens") || !strings.Contains(line, "--allow-credentials-in-logs")) {
			t.Errorf("-v=%d: %q is not an error-severity warning that names the tokens and the flag", tc.v, line)
		}
	}
}
