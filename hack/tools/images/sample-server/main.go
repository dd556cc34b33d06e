// Command sample-server stands in for agnhost in deploy/sample on the local node,
// where registry.k8s.io is not reachable. It takes the arguments the sample passes to
// agnhost, `serve-hostname --port=8080`, and like agnhost's serve-hostname answers every
// HTTP request with the pod's hostname (its name), which is also what the readiness
// probe (GET /) checks.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve-hostname" {
		log.Fatalf("usage: %s serve-hostname [--port=8080]: agnhost's only subcommand this stand-in implements", os.Args[0])
	}
	flags := flag.NewFlagSet("serve-hostname", flag.ExitOnError)
	port := flags.Int("port", 9376, "port to serve on (agnhost's default)")
	flags.Parse(os.Args[2:])

	hostname, err := os.Hostname()
	if err != nil {
		log.Fatalf("reading the hostname: %v", err)
	}
	server := &http.Server{
		Addr:              ":" + strconv.Itoa(*port),
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, hostname)
		}),
	}
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		<-signals
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		server.Shutdown(ctx)
	}()
	log.Printf("serving the hostname %s on %s", hostname, server.Addr)
	if err := server.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
