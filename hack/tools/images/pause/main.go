// Command pause is the sandbox ("pause") container of the local node's pods: it holds
// the pod's namespaces and does nothing else until the runtime stops it. The upstream
// image (registry.k8s.io/pause) needs a registry this machine cannot reach; this one is
// built from source into a one-file image by node-images.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	// SIGCHLD is left at its default: as PID 1 of a pod that shares its process
	// namespace, the kernel reaps our children only if we do not ignore it, and no pod
	// of the local node shares one.
	<-signals
}
