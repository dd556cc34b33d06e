package handover

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
	product "github.com/mini-kcm/mini-kcm/handover"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// fightLog is the start of the line the leader logs when it sees kube-controller-manager
// write for one of its controllers.
const fightLog = "kube-controller-manager still runs one of mini-kcm's controllers"

// handedOver is kube-controller-manager's --controllers after the hand-over: kubeadm's
// value less every controller mini-kcm runs by default, as make generate writes it into
// deploy/.
var handedOver = rbacgen.UpstreamControllers(all.Registry())

var ours = []string{"deployment-controller", "endpoints-controller", "endpointslice-controller", "replicaset-controller"}

func TestLeaderReportsKubeControllerManagerStillRunningTheReplicaSetController(t *testing.T) {
	f := framework.New(t)
	framework.StartKubeControllerManager(t, f.ControlPlane, "kube-controller-manager-fight", "replicaset")
	f.StartReplica(framework.ReplicaOptions{})
	leader := f.WaitForLeader(30 * time.Second)

	// The check run beside them names the fight before anything happens.
	check := runCheck(t, f, "replicaset")
	t.Logf("mini-kcm handover check, exit %d:\n%s", check.ExitCode, check.Output)
	if check.ExitCode != 1 || !strings.Contains(check.Output, "replicaset-controller     on        on        BOTH") ||
		!strings.Contains(check.Output, `set --controllers="" in static pod manifest`) {
		t.Errorf("check: exit %d, want 1 with replicaset-controller run by BOTH and the fix", check.ExitCode)
	}

	rs := createReplicaSet(t, f, 3)
	provokeFight(t, f, leader, rs)
	m, err := leader.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"deployment-controller", "endpoints-controller", "endpointslice-controller"} {
		if v, ok := m.Value("mini_kcm_upstream_controller_active", map[string]string{"controller": c}); !ok || v != 0 {
			t.Errorf("mini_kcm_upstream_controller_active{controller=%s} = %v (present %t), want 0: upstream does not run it", c, v, ok)
		}
	}
	logs := leader.Logs()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, fightLog) {
			t.Logf("the leader logged: %s", line)
		}
	}
	// The sighting is the ReplicaSet's status or one of its pods, whichever the leader
	// found kube-controller-manager's entry on first.
	if !strings.Contains(logs, fightLog) || !strings.Contains(logs, `controller="replicaset-controller"`) ||
		!(strings.Contains(logs, fmt.Sprintf(`object="ReplicaSet %s/%s status"`, f.Namespace, rs.Name)) ||
			strings.Contains(logs, fmt.Sprintf(`object="Pod %s/%s-`, f.Namespace, rs.Name))) {
		t.Errorf("the leader's log does not name the fight over ReplicaSet %s/%s or its pods", f.Namespace, rs.Name)
	}
	_, status, err := leader.Get("/statusz/replica")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "kube-controller-manager: FIGHT: replicaset-controller ACTIVE") {
		t.Errorf("/statusz/replica does not show the fight:\n%s", status)
	}
}

// provokeFight makes kube-controller-manager write for the ReplicaSet controller alone,
// then waits for leader to report the fight. Both managers run the controller, so on
// a scale either may create the pods and write the status, and the other then has
// nothing left to write: the test leaves it no choice. It freezes leader (SIGSTOP),
// scales rs up, waits for a pod that kube-controller-manager created (its field
// manager's entry), and lets leader go on (SIGCONT) at once, well within the renew
// deadline, so that leader keeps leading; its watch then finds the pod within two
// sweeps. The watch counts writes after its leader's term started, and managedFields
// date them to the second: the freeze waits for the watch's first page of pods, then
// for a second more.
func provokeFight(t *testing.T, f *framework.Framework, leader *framework.Replica, rs *appsv1.ReplicaSet) {
	t.Helper()
	ctx := f.Context()
	framework.Eventually(t, 2*product.WatchInterval+5*time.Second, func() error {
		m, err := leader.Metrics()
		if err != nil {
			return err
		}
		if v, _ := m.Value("mini_kcm_upstream_watch_pages_total", map[string]string{"resource": "pods", "result": "ok"}); v < 1 {
			return fmt.Errorf("%s's watch listed no page of pods yet", leader.Name)
		}
		return nil
	})
	time.Sleep(time.Second)
	selector := metav1.FormatLabelSelector(rs.Spec.Selector)
	before, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	existing := map[string]bool{}
	for _, p := range before.Items {
		existing[p.Name] = true
	}
	t.Cleanup(func() { _ = syscall.Kill(leader.Pid(), syscall.SIGCONT) })
	if err := syscall.Kill(leader.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	scale(t, f, rs, int32(len(before.Items))+2)
	var created string
	framework.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, func() error {
		pods, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, e := range p.ManagedFields {
				if !existing[p.Name] && e.Manager == product.UpstreamManager {
					created = p.Name
					return nil
				}
			}
		}
		return fmt.Errorf("no pod of kube-controller-manager's since %s froze", leader.Name)
	})
	if err := syscall.Kill(leader.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-controller-manager created pod %s while %s was frozen for %v", created, leader.Name, time.Since(frozen).Round(time.Millisecond))
	framework.Eventually(t, 2*product.WatchInterval+5*time.Second, func() error {
		m, err := leader.Metrics()
		if err != nil {
			return err
		}
		if v, _ := m.Value("mini_kcm_upstream_controller_active", map[string]string{"controller": "replicaset-controller"}); v != 1 {
			return fmt.Errorf("mini_kcm_upstream_controller_active{controller=replicaset-controller} = %v, want 1", v)
		}
		return nil
	})
}

// TestTheShardCoordinatorReportsKubeControllerManagerStillRunningTheReplicaSetController:
// sharded, the replica that coordinates (holds the base Lease) runs the leader's watch,
// so that the fight shows, and its alert can fire, in the sharded install too.
// --leader-elect-apiserver-fence=false: the sharded fence needs a binding per shard
// Lease (deploy/sharded/fence/), which this suite's apiserver does not have and the
// sharding suite tests; the watch does not write.
func TestTheShardCoordinatorReportsKubeControllerManagerStillRunningTheReplicaSetController(t *testing.T) {
	f := framework.New(t)
	framework.StartKubeControllerManager(t, f.ControlPlane, "kube-controller-manager-fight", "replicaset")
	coordinator := f.StartReplica(framework.ReplicaOptions{Args: []string{"--shards=2", "--leader-elect-apiserver-fence=false"}})
	f.WaitForLeader(30 * time.Second)
	provokeFight(t, f, coordinator, createReplicaSet(t, f, 3))
	_, status, err := coordinator.Get("/statusz/replica")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "kube-controller-manager: FIGHT: replicaset-controller ACTIVE") {
		t.Errorf("/statusz/replica does not show the fight:\n%s", status)
	}
}

func TestLeaderReportsNothingOnceKubeControllerManagerHandedOver(t *testing.T) {
	f := framework.New(t)
	framework.StartKubeControllerManager(t, f.ControlPlane, "kube-controller-manager-handed-over", handedOver)
	f.StartReplica(framework.ReplicaOptions{})
	leader := f.WaitForLeader(30 * time.Second)

	check := runCheck(t, f, handedOver)
	t.Logf("mini-kcm handover check, exit %d:\n%s", check.ExitCode, check.Output)
	if check.ExitCode != 0 || strings.Count(check.Output, "off       on        mini-kcm") != 4 {
		t.Errorf("check: exit %d, want 0 with mini-kcm running all four", check.ExitCode)
	}

	rs := createReplicaSet(t, f, 3)
	scale(t, f, rs, 5)
	// Once mini-kcm settled the ReplicaSet, two more pages of ReplicaSets are listed: the
	// second started after the first ended, so after the last write.
	framework.Eventually(t, 60*time.Second, func() error {
		got, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Get(context.Background(), rs.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Replicas != 5 || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("ReplicaSet status %+v, generation %d", got.Status, got.Generation)
		}
		return nil
	})
	pages := func() float64 {
		m, err := leader.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Value("mini_kcm_upstream_watch_pages_total", map[string]string{"resource": "replicasets", "result": "ok"})
		return v
	}
	settled := pages()
	framework.Eventually(t, 60*time.Second, func() error {
		if p := pages(); p < settled+2 {
			return fmt.Errorf("%v pages of ReplicaSets since the ReplicaSet settled, want 2", p-settled)
		}
		return nil
	})
	m, err := leader.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ours {
		if v, ok := m.Value("mini_kcm_upstream_controller_active", map[string]string{"controller": c}); !ok || v != 0 {
			t.Errorf("mini_kcm_upstream_controller_active{controller=%s} = %v (present %t), want 0", c, v, ok)
		}
	}
	if logs := leader.Logs(); strings.Contains(logs, fightLog) {
		t.Errorf("the leader reports a fight although kube-controller-manager handed over")
	}
	_, status, err := leader.Get("/statusz/replica")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "kube-controller-manager: none seen") {
		t.Errorf("/statusz/replica:\n%s", status)
	}
}

// runCheck runs `mini-kcm handover check` with a kubeadm-style static pod manifest
// carrying the --controllers StartKubeControllerManager gave kube-controller-manager.
func runCheck(t *testing.T, f *framework.Framework, controllers string) framework.Result {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "kube-controller-manager.yaml")
	framework.WriteKubeControllerManagerManifest(t, manifest, controllers)
	return framework.RunMiniKCM(t, 30*time.Second, "handover", "check", "--kubeconfig="+f.ControlPlane.KubeconfigPath(),
		"--kcm-manifest="+manifest, "--leader-elect-resource-namespace="+f.LeaseNamespace,
		"--leader-elect-resource-name="+f.LeaseName, "--want=mini-kcm")
}

func createReplicaSet(t *testing.T, f *framework.Framework, replicas int32) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"app": "handover"}
	rs, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Create(context.Background(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func scale(t *testing.T, f *framework.Framework, rs *appsv1.ReplicaSet, replicas int32) {
	t.Helper()
	s, err := f.Client.AppsV1().ReplicaSets(f.Namespace).GetScale(context.Background(), rs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = replicas
	if _, err := f.Client.AppsV1().ReplicaSets(f.Namespace).UpdateScale(context.Background(), rs.Name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
