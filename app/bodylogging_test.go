package app

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/klog/v2/textlogger"

	logsapi "k8s.io/component-base/logs/api/v1"
)

// From -v=8 on, client-go logs request and response bodies, tokens included: the start
// says so at error severity; below it, nothing is said.
func TestVerbosityThatLogsTokensIsWarnedAboutLoudly(t *testing.T) {
	for _, tc := range []struct {
		v    logsapi.VerbosityLevel
		warn bool
	}{{0, false}, {4, false}, {7, false}, {8, true}, {10, true}} {
		var out bytes.Buffer
		logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out)))
		warned := warnIfRequestBodiesLogged(logger, tc.v)
		line := out.String()
		if warned != tc.warn || (line != "") != tc.warn {
			t.Errorf("-v=%d: warned %v, logged %q; want a warning %v", tc.v, warned, line, tc.warn)
		}
		if tc.warn && (!strings.HasPrefix(line, "E") || !strings.Contains(line, "tokens") || !strings.Contains(line, "-v below 8")) {
			t.Errorf("-v=%d: %q is not an error-severity warning that names the tokens and the fix", tc.v, line)
		}
	}
}
