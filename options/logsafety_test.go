package options

import (
	"strings"
	"testing"
)

// Every -v and --vmodule setting at which client-go's request.go logs bodies (klog gives
// a file the level of the first pattern matching its base name, else -v) is refused,
// naming the setting and --allow-credentials-in-logs; the flag lets each start.
func TestASettingThatLogsRequestBodiesIsRefusedUnlessAllowed(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		refused string
	}{
		{[]string{"--v=7"}, ""},
		{[]string{"--v=8"}, "-v=8"},
		{[]string{"--v=10"}, "-v=10"},
		{[]string{"--vmodule=request=8"}, "--vmodule=request=8"},
		{[]string{"--vmodule=req*=9"}, "--vmodule=req*=9"},
		{[]string{"--vmodule=*=8"}, "--vmodule=*=8"},
		{[]string{"--vmodule=request=7"}, ""},
		{[]string{"--vmodule=round_trippers=9"}, ""},
		// The first matching pattern decides, as in klog.
		{[]string{"--vmodule=request=2,*=9"}, ""},
		{[]string{"--v=9", "--vmodule=request=2"}, ""},
		{[]string{"--v=2", "--vmodule=*=8,request=2"}, "--vmodule=*=8"},
		// No gate changes it: the refusal does not depend on contextual logging.
		{[]string{"--v=8", "--feature-gates=ContextualLogging=false"}, "-v=8"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := parse(t, testRegistry(t), tc.args...)
			errs := o.LogSafety.Validate(o.Logs)
			switch {
			case tc.refused == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.refused != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.refused) ||
				!strings.Contains(errs[0].Error(), "--allow-credentials-in-logs")):
				t.Errorf("errors %v; want one naming %s and --allow-credentials-in-logs", errs, tc.refused)
			}
			allowed := parse(t, testRegistry(t), append(tc.args, "--allow-credentials-in-logs")...)
			if errs := allowed.LogSafety.Validate(allowed.Logs); len(errs) > 0 {
				t.Errorf("with --allow-credentials-in-logs: %v", errs)
			}
		})
	}
}
