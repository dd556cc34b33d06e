// Command demo-failover is `make demo-failover`: mini-kcm's leader failover, on the
// local control plane (etcd, kube-apiserver, kube-scheduler, KWOK with fake nodes) and
// without Docker.
//
// It applies deploy/ with server-side apply and runs three mini-kcm processes as the
// StatefulSet runs its pods: the container's flags, so the default election timings
// (lease 4s, renew 2s, retry 500ms), and a token of the ServiceAccount kube-system/mini-kcm,
// so exactly the RBAC of deploy/. It applies the sample app of deploy/sample/, then stops
// the leader with SIGTERM (a pod deletion: it releases the Lease) and the next one with
// SIGKILL (a crash: the Lease must expire), then freezes the third with SIGSTOP in the
// middle of a scale-up and resumes it with SIGCONT once another replica took over. It
// prints each change of the Lease's holder, the takeover times, `mini-kcm leader` before
// and after, and the sample app scaled and rolled out by each new leader, and draws a
// timeline (SVG) from the audit log and the Lease: who held the Lease and whose writes
// the apiserver accepted, with any accepted from a replica that did not hold it.
//
// deploy/kind/demo.sh shows the same on a kind cluster, with real pods.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.binary, "mini-kcm", "bin/mini-kcm", "path of the mini-kcm binary")
	flag.StringVar(&cfg.deployDir, "deploy", "deploy", "directory of mini-kcm's manifests; its sample/ subdirectory holds the sample app")
	flag.StringVar(&cfg.dir, "dir", "", "directory for the control plane's state and every log (default: a temporary directory, removed at exit)")
	flag.StringVar(&cfg.timeline, "timeline", "bin/demo-failover-timeline.svg", "path of the SVG timeline the demo draws from the audit log and the Lease; empty draws none")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "error: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}

	// Ctrl-C ends the demo early; everything it started is stopped on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, os.Stdout, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
