package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// replica is one mini-kcm process, standing in for one pod of the StatefulSet.
type replica struct {
	// name is the pod's name, mini-kcm-0..2; a restarted replica keeps it, as a
	// StatefulSet's pod does.
	name string
	// port serves /metrics and the health endpoints over HTTPS on 127.0.0.1.
	port int
	// scraper reads /metrics as a user in system:masters.
	scraper *http.Client
	// args are the full command line, without the binary.
	args    []string
	binary  string
	logPath string
	// credential is the credential ID of the replica's own token, which the audit log
	// records with each of its requests.
	credential string

	// process is the current run of the replica.
	process *controlplane.Process
	// identity is the current run's leader-election identity, hostname_uuid, read
	// from the log; the uuid is new on every start.
	identity string
}

// start runs the replica and waits until it has joined the election, and returns the
// identity it joined with.
func (r *replica) start(ctx context.Context) (string, error) {
	// A restarted replica appends to the log of its earlier runs; only what this run
	// writes counts.
	since := logSize(r.logPath)
	var err error
	r.process, err = controlplane.StartProcess(controlplane.ProcessSpec{
		Name: r.name, Path: r.binary, Args: r.args, LogPath: r.logPath,
	})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if identity, err := joinedIdentity(r.logPath, since); err == nil && identity != "" {
			return identity, nil
		}
		select {
		case <-r.process.Done():
			return "", fmt.Errorf("%s exited while starting; end of %s:\n%s", r.name, r.logPath, controlplane.Tail(r.logPath, 20))
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not join the leader election: %w; end of %s:\n%s", r.name, ctx.Err(), r.logPath, controlplane.Tail(r.logPath, 20))
		case <-ticker.C:
		}
	}
}

// joinedPattern finds the identity in mini-kcm's "Joining leader election" log line.
var joinedPattern = regexp.MustCompile(`"Joining leader election".* identity="([^"]+)"`)

// joinedIdentity returns the identity the replica joined the election with, looking
// only past offset so that an earlier run's line in the same log does not count.
func joinedIdentity(logPath string, offset int64) (string, error) {
	data, err := readFrom(logPath, offset)
	if err != nil {
		return "", err
	}
	m := joinedPattern.FindSubmatch(data)
	if m == nil {
		return "", nil
	}
	return string(m[1]), nil
}

// readFrom returns the content of a file past offset.
func readFrom(path string, offset int64) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return data[min(offset, int64(len(data))):], nil
}

// logSize returns the size of a log, 0 if it does not exist yet.
func logSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// leads reports whether the replica says it holds the Lease named lease: its
// leader_election_master_status metric is 1.
func (r *replica) leads(ctx context.Context, lease string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(r.port)+"/metrics", nil)
	if err != nil {
		return false, err
	}
	resp, err := r.scraper.Do(req)
	if err != nil {
		return false, fmt.Errorf("%s: %w", r.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, fmt.Errorf("%s: reading /metrics: %w", r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s: /metrics returned %s", r.name, resp.Status)
	}
	metrics, err := framework.ParseMetrics(string(body))
	if err != nil {
		return false, fmt.Errorf("%s: %w", r.name, err)
	}
	v, ok := metrics.Value("leader_election_master_status", map[string]string{"name": lease})
	return ok && v == 1, nil
}

func (r *replica) String() string {
	if r.process == nil {
		return r.name
	}
	return r.name + " (pid " + strconv.Itoa(r.process.Pid()) + ")"
}
