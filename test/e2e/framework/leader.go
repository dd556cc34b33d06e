package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LeaseHolder returns the holder identity of the Lease ns/name, or "" if the Lease does
// not exist or nobody holds it (e.g. after a release).
func LeaseHolder(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error) {
	lease, err := client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("getting lease %s/%s: %w", ns, name, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// Holder returns the holder of the test's Lease, or "".
func (f *Framework) Holder() (string, error) {
	return LeaseHolder(f.Context(), f.Client, f.LeaseNamespace, f.LeaseName)
}

// WaitForLeader waits until the test's Lease has a holder and exactly one running
// replica of this test reports that it leads, and returns that replica. The Lease
// holder identity (hostname_uuid) cannot name a replica by itself, as all replicas run
// on one host; leader_election_master_status can.
func (f *Framework) WaitForLeader(timeout time.Duration) *Replica {
	f.t.Helper()
	var leader *Replica
	Eventually(f.t, timeout, func() error {
		var err error
		leader, err = f.currentLeader()
		if errors.Is(err, errTwoLeaders) {
			f.t.Fatal(err)
		}
		return err
	})
	return leader
}

// errTwoLeaders is a defect, not a state to wait out: see currentLeader.
var errTwoLeaders = errors.New("two replicas lead at once")

func (f *Framework) currentLeader() (*Replica, error) {
	holder, err := f.Holder()
	if err != nil {
		return nil, err
	}
	if holder == "" {
		return nil, errors.New("the lease has no holder")
	}
	var leaders []string
	var leader *Replica
	var errs []error
	for _, r := range f.replicas {
		if r.Exited() {
			continue
		}
		leads, err := r.IsLeader(f.LeaseName)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if leads {
			leaders = append(leaders, r.Name)
			leader = r
		}
	}
	switch {
	case len(leaders) == 1:
		return leader, nil
	case len(leaders) > 1:
		// The replicas are asked one after the other, so a handover between two
		// answers shows the old leader and the new one both leading. With the same
		// holder before and after the answers no handover happened: a replica reports
		// leading only once its own write naming it succeeded, and stops at its renew
		// deadline, before anybody may take its Lease over.
		after, err := f.Holder()
		if err == nil && after == holder {
			return nil, fmt.Errorf("%w: %s say they lead while the Lease names %q throughout", errTwoLeaders, strings.Join(leaders, " and "), holder)
		}
		return nil, fmt.Errorf("more than one replica says it leads (%s) while the Lease moved from %q to %q", strings.Join(leaders, ", "), holder, after)
	default:
		return nil, fmt.Errorf("lease held by %q but no running replica says it leads (%v)", holder, errors.Join(errs...))
	}
}

// WaitForNewHolder waits until the test's Lease is held by someone other than
// previous and returns the new holder and how long the wait took. It is how failover
// time is measured: from the moment the caller stopped the old leader until the API
// shows the new one.
func (f *Framework) WaitForNewHolder(previous string, timeout time.Duration) (string, time.Duration) {
	f.t.Helper()
	begin := time.Now()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(timeout)
	for {
		h, err := f.Holder()
		if err == nil && h != "" && h != previous {
			return h, time.Since(begin)
		}
		select {
		case <-deadline:
			f.t.Fatalf("lease %s/%s still held by %q (last error %v) after %v", f.LeaseNamespace, f.LeaseName, h, err, timeout)
		case <-ticker.C:
		}
	}
}
