package leaderelection

import (
	"context"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/transport"
)

// Transport returns a wrapper for the transport of the client named client (a
// controller's name) that lets a mutating request (POST, PUT, PATCH, DELETE) through
// only while the fence is open, and ends it, through its context, when the fence
// closes unless the Lease is renewed in time. A refused request fails at once with a
// *FencedError, without reaching the network, and is counted in
// mini_kcm_leader_election_fence_refused_requests_total.
//
// Reads pass untouched, and so do two kinds of writes that change nothing a
// controller acts on:
//
//   - Events (core/v1 and events.k8s.io). They describe what happened and no
//     controller reads them to decide anything; fencing them would drop exactly the
//     events that explain a step-down (a FailedCreate naming the fence) and the
//     "stopped leading" event, which is recorded after the Lease was lost.
//   - Reviews (authentication.k8s.io and authorization.k8s.io) and token requests
//     (serviceaccounts/<name>/token): a TokenReview, SubjectAccessReview or
//     TokenRequest is a create that stores nothing. The serving endpoints of standbys
//     need reviews, and a controller's client under --use-service-account-credentials
//     needs its tokens before it can write at all (its writes are fenced anyway).
func (f *Fence) Transport(client string) transport.WrapperFunc {
	return func(next http.RoundTripper) http.RoundTripper {
		return &fencedTransport{fence: f, client: client, next: next}
	}
}

type fencedTransport struct {
	fence  *Fence
	client string
	next   http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isMutating(req.Method) || isUnfenced(req) {
		return t.next.RoundTrip(req)
	}
	until, err := t.fence.Check()
	if err != nil {
		fenceRefusals.WithLabelValues(t.client).Inc()
		t.fence.refused.Add(1)
		// A RoundTripper closes the request body, even when it fails.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		// http.Client wraps this in a *url.Error that names the method and URL.
		return nil, err
	}
	// The fence's clock, not the wall clock, says how long is left; a context with a
	// timeout then runs on the process's monotonic clock.
	ctx, cancel := context.WithTimeout(req.Context(), until.Sub(t.fence.clock.Now()))
	// The fence tracks the write until its answer, so that a release waits for an
	// abandoned one (see Fence.settle).
	t.fence.sending(req)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	t.fence.answered(req, err == nil)
	if err != nil {
		cancel()
		return nil, err
	}
	// The body is read after RoundTrip returned: the context must live until then.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose cancels a request's context when its response body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func isMutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// unfencedGroups are the API groups whose writes the fence lets through (see Transport).
var unfencedGroups = map[string]bool{
	"authentication.k8s.io": true,
	"authorization.k8s.io":  true,
}

// requestInfos reads a request's path as the apiserver does.
var requestInfos = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// isUnfenced reports whether req is a request for events, a review or a token, which the
// fence lets through (see Transport). The apiserver's parser reads the path from /api or
// /apis on, so any prefix of the server's URL (a proxy's) is skipped first: the path is
// read from the first of those segments that starts a resource request. A non-resource
// request is fenced.
func isUnfenced(req *http.Request) bool {
	segments := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	for i, s := range segments {
		if s != "api" && s != "apis" {
			continue
		}
		fromAPI := req
		if i > 0 {
			u := *req.URL
			u.Path, u.RawPath = "/"+strings.Join(segments[i:], "/"), ""
			fromAPI = &http.Request{Method: req.Method, URL: &u}
		}
		info, err := requestInfos.NewRequestInfo(fromAPI)
		if err != nil {
			return false // a verb in the path with nothing after it
		}
		if info.IsResourceRequest {
			return isUnfencedResource(info)
		}
	}
	return false
}

// isUnfencedResource reports whether a resource request is for events, a review or a
// token.
func isUnfencedResource(info *request.RequestInfo) bool {
	if unfencedGroups[info.APIGroup] {
		return true
	}
	switch info.Verb {
	case "watch", "proxy":
		// The deprecated verbs in the path (/api/v1/watch/...) write nothing exempt.
		return false
	}
	switch info.Resource {
	case "events":
		return info.APIGroup == "" || info.APIGroup == "events.k8s.io"
	case "serviceaccounts":
		return info.APIGroup == "" && info.Subresource == "token" && len(info.Parts) == 3
	}
	return false
}
