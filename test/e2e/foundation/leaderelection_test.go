package foundation

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// Upper bounds of a failover, from client-go's election loop: a standby retries every
// RetryPeriod plus up to 120% jitter, so up to 2.2 × RetryPeriod apart, and it starts
// the lease-duration wait only when it next observes the last renewal, which can be one
// retry interval after the leader died.
var (
	maxRetryInterval = framework.RetryPeriod * 22 / 10
	// apiSlack covers one round trip to the apiserver on a loaded CI machine.
	apiSlack = 500 * time.Millisecond
)

func TestExactlyOneOfThreeReplicasLeadsAndAllAreHealthy(t *testing.T) {
	f := framework.New(t)
	replicas := f.StartReplicas(3, framework.ReplicaOptions{})

	leader := f.WaitForLeader(30 * time.Second)
	t.Logf("%s leads", leader.Name)

	for _, r := range replicas {
		for _, path := range []string{"/healthz", "/readyz", "/livez"} {
			framework.Eventually(t, 15*time.Second, func() error {
				return expectStatus(r, path, http.StatusOK)
			})
		}
	}
	// Leadership is stable: still one leader, the same, after a few renewals.
	time.Sleep(3 * framework.RetryPeriod)
	if again := f.WaitForLeader(5 * time.Second); again != leader {
		t.Fatalf("leadership moved from %s to %s without a failure", leader.Name, again.Name)
	}
}

func TestStandbyTakesOverWhenTheLeaderIsKilled(t *testing.T) {
	f := framework.New(t)
	f.StartReplicas(3, framework.ReplicaOptions{})
	leader := f.WaitForLeader(30 * time.Second)
	oldHolder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}

	leader.Kill()
	newHolder, took := f.WaitForNewHolder(oldHolder, 30*time.Second)
	t.Logf("takeover after SIGKILL of the leader: %.2fs (lease %v, retry %v)", took.Seconds(), framework.LeaseDuration, framework.RetryPeriod)

	bound := framework.LeaseDuration + 2*maxRetryInterval + apiSlack
	if took > bound {
		t.Errorf("a standby took over after %v, want at most lease duration + 2 retry intervals = %v", took, bound)
	}
	next := f.WaitForLeader(10 * time.Second)
	if next == leader {
		t.Fatalf("the killed replica %s still counts as leader", leader.Name)
	}
	t.Logf("%s (%s) leads after %s was killed", next.Name, newHolder, leader.Name)
}

func TestLeaderHandsOverOnSIGTERMAndExitsZero(t *testing.T) {
	f := framework.New(t)
	f.StartReplicas(3, framework.ReplicaOptions{})
	leader := f.WaitForLeader(30 * time.Second)
	oldHolder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	leader.Term()
	code, err := leader.Wait(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exited := time.Since(begin)
	if code != 0 {
		t.Fatalf("the leader exited with code %d after SIGTERM, want 0", code)
	}
	_, afterExit := f.WaitForNewHolder(oldHolder, 30*time.Second)
	t.Logf("SIGTERM: leader exited 0 after %.2fs; a standby held the lease %.2fs later (retry %v)",
		exited.Seconds(), afterExit.Seconds(), framework.RetryPeriod)

	// The lease was released before the exit, so a standby needs at most one retry
	// interval to notice, far less than a lease duration.
	if bound := maxRetryInterval + apiSlack; afterExit > bound {
		t.Errorf("a standby took over %v after the leader exited, want at most %v", afterExit, bound)
	}
	if next := f.WaitForLeader(10 * time.Second); next == leader {
		t.Fatalf("the stopped replica %s still counts as leader", leader.Name)
	}
}

func expectStatus(r *framework.Replica, path string, want int) error {
	code, body, err := r.Get(path)
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%s %s returned %d, want %d: %s", r.Name, path, code, want, body)
	}
	return nil
}
