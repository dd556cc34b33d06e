package app

import (
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/options"
)

// warnIfRequestBodiesLogged warns, at error severity so that log filters keep it, when
// the operator started mini-kcm with --allow-credentials-in-logs at a verbosity at which
// client-go logs request and response bodies (options.BodiesLoggedBy; without the flag
// such a verbosity is refused), and reports whether it did.
func warnIfRequestBodiesLogged(logger klog.Logger, opts *options.Options) bool {
	setting := options.BodiesLoggedBy(opts.Logs)
	if setting == "" || !opts.LogSafety.AllowCredentialsInLogs {
		return false
	}
	logger.Error(nil, "WARNING: at this verbosity client-go logs request and response bodies, which include "+
		"the controllers' ServiceAccount tokens (TokenRequest responses) and the bearer tokens of HTTPS clients "+
		"(TokenReview requests): protect these logs as credentials, and lower the verbosity as soon as possible",
		"setting", setting, "allowedBy", "--allow-credentials-in-logs")
	return true
}
