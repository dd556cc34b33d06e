package app

import (
	"bytes"
	"fmt"
	"html"
	"math/rand/v2"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// statuszField is one line of mini-kcm's own section of the text /statusz: a name and a
// function that says its value when the page is read. The section is an ordered list of
// them (see replicaStatus.fields), so that a new line is one more field.
type statuszField struct {
	name  string
	value func() string
}

// statuszDelimiters are the library's: its text /statusz separates names from values
// with one of them and a space, drawn for every response, so that nobody parses a page
// that KEP-4827 declares is for people. Our lines use the same separator as the
// library's in the same response. Programs read the structured formats, whose schema is
// fixed.
var statuszDelimiters = []string{":", ": ", "=", " "}

// statuszMux installs the library's /statusz handler on mux with mini-kcm's section
// appended to its text (see withStatuszSection). statusz.Install accepts any mux.
type statuszMux struct {
	mux    *mux.PathRecorderMux
	fields []statuszField
}

func (m statuszMux) Handle(path string, handler http.Handler) {
	m.mux.Handle(path, withStatuszSection(handler, m.fields))
}

// withStatuszSection serves the library's /statusz and, when the library answered with
// text (text/plain, the default), appends one line per field. The structured formats
// (application/json;as=Statusz;g=config.k8s.io;v=v1beta1 and the others) stay the
// library's, byte for byte: their schema has no room for a component's own fields, and
// the library's registry, which fills them, cannot be extended from outside.
func withStatuszSection(library http.Handler, fields []statuszField) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The library's headers go straight to the response; its status and body are
		// held back until we know whether the body is text.
		captured := &capturedResponse{header: w.Header()}
		library.ServeHTTP(captured, r)
		status := captured.status
		if status == 0 {
			status = http.StatusOK
		}
		body := captured.body.Bytes()
		if status == http.StatusOK && len(fields) > 0 && isPlainText(w.Header().Get("Content-Type")) {
			body = appendStatuszSection(body, fields)
			w.Header().Del("Content-Length")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body) // a client that went away is no error of ours
	})
}

func isPlainText(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "text/plain"
}

// appendStatuszSection appends "name<separator>value" for every field to the library's
// text, with values HTML-escaped as the library's are: the Lease holder, for one, is
// written by whoever may update the Lease, and a browser may show the page.
func appendStatuszSection(text []byte, fields []statuszField) []byte {
	separator := statuszSeparator(text)
	var b bytes.Buffer
	b.Write(bytes.TrimRight(text, "\n"))
	b.WriteByte('\n')
	for _, f := range fields {
		// One line per field, whatever the provider returns.
		value := strings.ReplaceAll(f.value(), "\n", " ")
		fmt.Fprintf(&b, "%s%s%s\n", f.name, separator, html.EscapeString(value))
	}
	return b.Bytes()
}

// statuszSeparator returns the separator of the library's "Started" line in text (its
// delimiter and a space), or a random one if there is no such line.
func statuszSeparator(text []byte) string {
	for line := range strings.SplitSeq(string(text), "\n") {
		if rest, ok := strings.CutPrefix(line, "Started"); ok {
			value := strings.TrimLeft(rest, ":= ")
			if separator := rest[:len(rest)-len(value)]; separator != "" {
				return separator
			}
		}
	}
	return statuszDelimiters[rand.IntN(len(statuszDelimiters))] + " "
}

// capturedResponse keeps a handler's status and body for withStatuszSection; its
// headers are those of the real response.
type capturedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capturedResponse) Header() http.Header { return c.header }

func (c *capturedResponse) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capturedResponse) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(p)
}

// electionStatus is what this replica knows of the leader election, for /statusz: the
// Lease, this candidate's identity, and what it last read or wrote of the Lease (see
// leaderelection.Config.Observe). It decides nothing; the election does.
type electionStatus struct {
	// lease is namespace/name.
	lease string
	// warmStandby is --leader-elect-warm-standby.
	warmStandby bool
	// now is the clock of observations; time.Now if nil.
	now func() time.Time

	mu sync.Mutex
	// identity is this candidate's, once it joined the election.
	identity string
	// seen is when the Lease was last read or written; zero before the first time.
	seen time.Time
	// holder and transitions are the Lease's as last seen; holder "" is a released Lease.
	holder      string
	transitions int
	// acquired is when this replica acquired the Lease, as it wrote it into the Lease;
	// zero unless the Lease last seen names this replica.
	acquired time.Time
}

// joined records this candidate's identity when it joins the election.
func (e *electionStatus) joined(identity string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.identity = identity
}

// observe records a record of the Lease this candidate read or wrote.
func (e *electionStatus) observe(record resourcelock.LeaderElectionRecord) {
	now := time.Now
	if e.now != nil {
		now = e.now
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen, e.holder, e.transitions = now(), record.HolderIdentity, record.LeaderTransitions
	e.acquired = time.Time{}
	if record.HolderIdentity == e.identity {
		e.acquired = record.AcquireTime.Time
	}
}

// electionSnapshot is a copy of electionStatus's observations.
type electionSnapshot struct {
	identity, holder string
	seen, acquired   time.Time
	transitions      int
}

func (e *electionStatus) snapshot() electionSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return electionSnapshot{identity: e.identity, holder: e.holder, seen: e.seen, acquired: e.acquired, transitions: e.transitions}
}

// replicaStatus is what /statusz says about this replica beyond the library's version,
// start time and paths.
type replicaStatus struct {
	ready *readiness
	// election is nil without leader election.
	election *electionStatus
	// enabled and disabled are canonical controller names, sorted.
	enabled, disabled []string
	// fenceMode says how this replica's writes are fenced.
	fenceMode func() string
	// shards, in sharded mode (--shards above 1), says which shards this replica
	// holds; nil otherwise.
	shards func() string
	// now is the clock of "ago"s; time.Now if nil.
	now func() time.Time
}

// fields lists the lines of mini-kcm's section of /statusz, in order.
func (s *replicaStatus) fields() []statuszField {
	return []statuszField{
		{name: "Leader election", value: s.leaderElection},
		{name: "Controllers", value: s.controllers},
		{name: "Caches", value: s.caches},
		{name: "Write fence", value: s.fenceMode},
		{name: "Shards", value: func() string {
			if s.shards == nil {
				return "not sharded (--shards=1): one leader works on every namespace"
			}
			return s.shards()
		}},
	}
}

func (s *replicaStatus) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// leaderElection says this replica's role and what it last saw of the Lease, e.g.
// "standby (warm) | Lease kube-system/mini-kcm | identity a_1 | holder b_2 (seen 1s ago) | transitions 3".
func (s *replicaStatus) leaderElection() string {
	st := s.ready.state()
	var parts []string
	if s.shards != nil {
		parts = append(parts, "sharded: a Lease per shard (see Shards)")
	} else if s.election == nil {
		role := "starting"
		if st.role == roleLeading {
			role = "running the controllers without a Lease"
		}
		parts = append(parts, "not electing (--leader-elect=false), "+role)
	} else {
		mode := "cold"
		if s.election.warmStandby {
			mode = "warm"
		}
		switch st.role {
		case roleStarting:
			parts = append(parts, "starting (waiting for the apiserver)")
		case roleStandby:
			parts = append(parts, "standby ("+mode+")")
		case roleLeading:
			parts = append(parts, "leading ("+mode+" standby mode)")
		}
		parts = append(parts, "Lease "+s.election.lease)
		parts = append(parts, s.leaseParts(s.election.snapshot())...)
	}
	if st.stopping {
		parts = append(parts, "shutting down")
	}
	return strings.Join(parts, " | ")
}

// leaseParts describes what the election last saw of the Lease.
func (s *replicaStatus) leaseParts(e electionSnapshot) []string {
	if e.identity == "" {
		return nil
	}
	parts := []string{"identity " + e.identity}
	if e.seen.IsZero() {
		return append(parts, "holder not read yet")
	}
	now := s.clock()
	seen := fmt.Sprintf("seen %s ago", duration.HumanDuration(now.Sub(e.seen)))
	switch e.holder {
	case "":
		parts = append(parts, "holder none, released ("+seen+")")
	case e.identity:
		parts = append(parts, "holder this replica ("+seen+")")
	default:
		parts = append(parts, "holder "+e.holder+" ("+seen+")")
	}
	if !e.acquired.IsZero() {
		parts = append(parts, fmt.Sprintf("acquired %s (%s ago)",
			e.acquired.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(e.acquired))))
	}
	return append(parts, fmt.Sprintf("transitions %d", e.transitions))
}

// controllers names the enabled and the disabled controllers.
func (s *replicaStatus) controllers() string {
	return fmt.Sprintf("%s (disabled: %s)", namesOrNone(s.enabled), namesOrNone(s.disabled))
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// caches says, for a leader, which controllers' caches synced and which informers the
// others wait for; for a warm standby (or a replica without election that has not
// started its workers yet), whether the shared informers synced.
func (s *replicaStatus) caches() string {
	st := s.ready.state()
	switch {
	case st.role == roleLeading && st.caches != nil:
		return controllerCaches(st.caches.Pending())
	case st.role == roleLeading:
		return "building the controllers"
	case st.informers != nil:
		prefix := ""
		if st.role == roleStandby {
			prefix = "warm standby: "
		}
		if unsynced := st.informers(); len(unsynced) > 0 {
			return prefix + "waiting for shared informers " + strings.Join(unsynced, ", ")
		}
		return prefix + "shared informers synced"
	case st.role == roleStandby && s.election != nil && !s.election.warmStandby:
		return "cold standby: none (the informers start on acquiring the Lease)"
	default:
		return "not started yet"
	}
}

// controllerCaches formats a CacheSyncTracker's Pending, e.g.
// "synced: deployment-controller | waiting for: replicaset-controller (pods, replicasets)".
func controllerCaches(pending map[string][]string) string {
	var synced, waiting []string
	for controller, informers := range pending {
		switch {
		case len(informers) == 0:
			synced = append(synced, controller)
		case len(informers) == 1 && informers[0] == controllers.NotStarted:
			waiting = append(waiting, controller+" "+controllers.NotStarted)
		default:
			waiting = append(waiting, controller+" ("+strings.Join(informers, ", ")+")")
		}
	}
	sort.Strings(synced)
	sort.Strings(waiting)
	line := "synced: " + namesOrNone(synced)
	if len(waiting) > 0 {
		line += " | waiting for: " + strings.Join(waiting, ", ")
	}
	return line
}
