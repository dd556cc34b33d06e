package serving

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// replicaStatuszPath serves what this replica knows of itself (the StatuszFields its
// caller lists) beside the library's /statusz. The library's page has no room for a
// component's own lines: its registry has unexported methods and no option but the listed
// paths (k8s.io/apiserver v0.37), and its structured formats have a fixed schema.
const replicaStatuszPath = "/statusz/replica"

// StatuszField is one line of /statusz/replica: a name and a function that says its value
// when the page is read. The page is an ordered list of them, so that a new line is one
// more field.
type StatuszField struct {
	Name  string
	Value func() string
}

// replicaStatusz serves fields as text, one "name: value" line each, for people, like
// the library's /statusz: nosniff keeps a browser from reading a value (the Lease holder
// is written by whoever may update the Lease) as markup.
func replicaStatusz(fields []StatuszField) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s replica statusz\n", componentName)
		b.WriteString("Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility " +
			"guarantees and is for debugging purposes only.\n\n")
		for _, f := range fields {
			// One line per field, whatever the provider returns.
			fmt.Fprintf(&b, "%s: %s\n", f.Name, strings.ReplaceAll(f.Value(), "\n", " "))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = io.WriteString(w, b.String()) // a client that went away is no error of ours
	})
}
