package options

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// BodyLogVerbosity is the level from which client-go's rest client logs the bodies of
// requests and responses (k8s.io/client-go/rest's request.go, logBody), which carry
// credentials: the tokens the TokenRequests of --use-service-account-credentials mint,
// and the bearer tokens that secure serving sends to the apiserver in TokenReviews.
const BodyLogVerbosity = 8

// bodyLogFile is the file that logs them, as klog's --vmodule names files: the base
// name without ".go".
const bodyLogFile = "request"

// allowCredentialsInLogsFlag is the flag that accepts such logs knowingly.
const allowCredentialsInLogsFlag = "allow-credentials-in-logs"

// LogSafetyOptions keeps credentials out of the logs: a -v or --vmodule at which
// client-go would log request and response bodies is refused unless the operator says
// so. Refusing is the only setting-proof way: a body-free logger on the token requests'
// contexts is ignored under --feature-gates=ContextualLogging=false, and the
// TokenReviews of HTTPS callers are sent by the serving library with its own.
type LogSafetyOptions struct {
	// AllowCredentialsInLogs starts mini-kcm even at such a verbosity.
	AllowCredentialsInLogs bool
}

// NewLogSafetyOptions returns the default: refuse.
func NewLogSafetyOptions() *LogSafetyOptions { return &LogSafetyOptions{} }

// AddFlags adds --allow-credentials-in-logs to fs.
func (o *LogSafetyOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.AllowCredentialsInLogs, allowCredentialsInLogsFlag, o.AllowCredentialsInLogs, fmt.Sprintf(
		"Start even when -v or --vmodule reaches level %d for client-go's request logging, at which it logs request and "+
			"response bodies: the controllers' ServiceAccount tokens (TokenRequest answers) and the bearer tokens of HTTPS "+
			"callers (TokenReview requests). Without it such a verbosity is refused. With it, protect the logs as credentials.",
		BodyLogVerbosity))
}

// Validate refuses a logging configuration that would log request bodies, naming the
// setting and the way out.
func (o *LogSafetyOptions) Validate(logs *logsapi.LoggingConfiguration) []error {
	if o.AllowCredentialsInLogs {
		return nil
	}
	setting := BodiesLoggedBy(logs)
	if setting == "" {
		return nil
	}
	return []error{fmt.Errorf("%s makes client-go log request and response bodies, which hold the controllers' ServiceAccount "+
		"tokens and the bearer tokens of HTTPS callers: lower it below %d, or pass --%s to log them knowingly",
		setting, BodyLogVerbosity, allowCredentialsInLogsFlag)}
}

// BodiesLoggedBy names the setting of logs at which client-go logs request bodies
// ("-v=8", "--vmodule=req*=9"), or returns "". klog gives a file the level of the
// first --vmodule pattern that matches its base name, and -v otherwise.
func BodiesLoggedBy(logs *logsapi.LoggingConfiguration) string {
	for _, item := range logs.VModule {
		if match, _ := filepath.Match(item.FilePattern, bodyLogFile); match {
			if item.Verbosity >= BodyLogVerbosity {
				return fmt.Sprintf("--vmodule=%s=%d", item.FilePattern, item.Verbosity)
			}
			return ""
		}
	}
	if logs.Verbosity >= BodyLogVerbosity {
		return fmt.Sprintf("-v=%d", logs.Verbosity)
	}
	return ""
}
