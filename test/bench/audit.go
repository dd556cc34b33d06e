package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"
)

// auditCursor reads the apiserver's audit log incrementally: each call to next returns
// the requests completed since the previous call. The log of a large workload holds
// hundreds of thousands of lines, so it is never read twice.
type auditCursor struct {
	path   string
	offset int64
}

// auditLine is the part of an audit.k8s.io/v1 Event the benchmarks count.
type auditLine struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// request is one counted request.
type request struct {
	// User is who made it.
	User string
	// Verb and Resource ("pods", "replicasets/status") of the request.
	Verb, Resource string
	// Received and Completed are the apiserver's timestamps.
	Received, Completed time.Time
	// Code is the response's HTTP status code, 0 when the audit event has none.
	Code int
}

// next returns the requests of the users that completed (or, for watches, started)
// since the last call. A last line the apiserver is still writing is left for the next
// call.
func (c *auditCursor) next(users ...string) ([]request, error) {
	f, err := os.Open(c.path)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(c.offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seeking in audit log: %w", err)
	}
	userFields := make([][]byte, len(users))
	for i, user := range users {
		userFields[i] = []byte(`"username":` + quote(user))
	}
	var requests []request
	reader := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := reader.ReadBytes('\n')
		if err == io.EOF {
			// An unfinished line: read it again next time.
			return requests, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading audit log: %w", err)
		}
		c.offset += int64(len(line))
		// Decoding every line of every user would cost more than the rest of the
		// benchmark's bookkeeping; most lines belong to the scheduler, KWOK or the
		// benchmark itself.
		if !slices.ContainsFunc(userFields, func(field []byte) bool { return bytes.Contains(line, field) }) {
			continue
		}
		var e auditLine
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("audit log at byte %d: %w", c.offset, err)
		}
		if !slices.Contains(users, e.User.Username) || !countedStage(e.Verb, e.Stage) {
			continue
		}
		r := request{User: e.User.Username, Verb: e.Verb, Received: e.RequestReceivedTimestamp, Completed: e.StageTimestamp}
		if e.ResponseStatus != nil {
			r.Code = e.ResponseStatus.Code
		}
		if e.ObjectRef != nil {
			r.Resource = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				r.Resource += "/" + e.ObjectRef.Subresource
			}
		}
		requests = append(requests, r)
	}
}

// countedStage picks one audit event per request: watches are logged when they start
// (they may never complete within a phase), other requests when they complete.
func countedStage(verb, stage string) bool {
	if verb == "watch" {
		return stage == "ResponseStarted"
	}
	return stage == "ResponseComplete" || stage == "Panic"
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// isWrite tells writes from reads by the verb.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// RequestCounts summarises the requests of one controller manager in one phase.
type RequestCounts struct {
	// Reads are get, list and watch requests.
	Reads int `json:"reads"`
	// Writes are create, update, patch, delete and deletecollection requests,
	// events included.
	Writes int `json:"writes"`
	// EventWrites are the writes to events, which upstream throttles per object
	// while mini-kcm does not throttle the same way; they are part of Writes.
	EventWrites int `json:"eventWrites"`
	// ByVerbResource counts requests by "verb resource", e.g. "create pods".
	ByVerbResource map[string]int `json:"byVerbResource"`
}

func countRequests(requests []request) RequestCounts {
	c := RequestCounts{ByVerbResource: map[string]int{}}
	for _, r := range requests {
		c.ByVerbResource[r.Verb+" "+r.Resource]++
		if !isWrite(r.Verb) {
			c.Reads++
			continue
		}
		c.Writes++
		if r.Resource == "events" {
			c.EventWrites++
		}
	}
	return c
}

// creationRate returns how many pods per second the requests created: the number of
// pod creates divided by the time from the first create's arrival to the last one's
// completion, both as the apiserver saw them.
func creationRate(requests []request) (pods int, seconds float64) {
	var first, last time.Time
	for _, r := range requests {
		if r.Verb != "create" || r.Resource != "pods" {
			continue
		}
		pods++
		if first.IsZero() || r.Received.Before(first) {
			first = r.Received
		}
		if r.Completed.After(last) {
			last = r.Completed
		}
	}
	if pods == 0 {
		return 0, 0
	}
	return pods, last.Sub(first).Seconds()
}

// sortedKeys returns the keys of m in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
