package app

import (
	"k8s.io/klog/v2"

	logsapi "k8s.io/component-base/logs/api/v1"
)

// requestBodyVerbosity is the -v at which client-go logs the bodies of requests and
// responses (rest.Request, "Response Body"), which carry secrets: the tokens the
// TokenRequests of --use-service-account-credentials mint, and the bearer tokens that
// secure serving sends to the apiserver in TokenReviews.
const requestBodyVerbosity = 8

// warnIfRequestBodiesLogged warns, at error severity so that log filters keep it, when
// the verbosity makes client-go log those bodies, and reports whether it did.
//
// A warning rather than a refusal: upstream's kube-controller-manager runs at -v=8 with
// no acknowledgement, and -v=8 is what an operator turns on in the middle of an incident,
// where a flag that refuses to start would turn a restart with more logging into a crash
// loop. The warning names the risk and says to rotate nothing: the controllers' tokens
// expire within the hour; the logs are what must be protected or deleted.
func warnIfRequestBodiesLogged(logger klog.Logger, v logsapi.VerbosityLevel) bool {
	if v < requestBodyVerbosity {
		return false
	}
	logger.Error(nil, "WARNING: at this verbosity client-go logs request and response bodies, which include "+
		"the controllers' ServiceAccount tokens (TokenRequest responses) and the bearer tokens of HTTPS clients "+
		"(TokenReview requests): protect these logs as credentials, and lower -v below 8 as soon as possible",
		"verbosity", uint32(v), "bodiesFromVerbosity", requestBodyVerbosity)
	return true
}
