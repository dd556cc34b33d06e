// Command gen-rbac writes deploy/'s controller RBAC and the fence's identities from the
// controller registry the product runs (controllers/all); see hack/rbacgen. Run it with
// `make generate` from the repository root, and commit the result.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
)

func main() {
	deployDir := flag.String("deploy", "deploy", "the deploy/ directory to write into")
	flag.Parse()
	if err := rbacgen.Write(all.Registry(), *deployDir); err != nil {
		fmt.Fprintln(os.Stderr, "gen-rbac:", err)
		os.Exit(1)
	}
}
