// Command gen-rbac writes what follows from the controller registry the product runs
// (controllers/all): deploy/'s controller RBAC and the fence's identities, and the shard
// filter's typed wrappers; see hack/rbacgen. Run it with `make generate` from the
// repository root, and commit the result.
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
	shardFilter := flag.String("shard-filter", rbacgen.ShardFilterFile, "the shard filter's generated Go file to write")
	flag.Parse()
	if err := write(*deployDir, *shardFilter); err != nil {
		fmt.Fprintln(os.Stderr, "gen-rbac:", err)
		os.Exit(1)
	}
}

func write(deployDir, shardFilter string) error {
	reg := all.Registry()
	if err := rbacgen.Write(reg, deployDir); err != nil {
		return err
	}
	src, err := rbacgen.ShardFilterSource(reg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(shardFilter, src, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", shardFilter, err)
	}
	return nil
}
