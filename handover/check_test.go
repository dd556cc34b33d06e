package handover

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options/controllersflag"
	"github.com/mini-kcm/mini-kcm/sharding"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func TestParseKubeadmManifestReadsItsControllersAndLease(t *testing.T) {
	data, err := os.ReadFile("testdata/kubeadm-kube-controller-manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	flags, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"*", "bootstrapsigner", "tokencleaner"}; !slices.Equal(flags.Controllers, want) {
		t.Errorf("controllers = %q, want %q", flags.Controllers, want)
	}
	if !flags.LeaderElect || flags.LeaseNamespace != "kube-system" || flags.LeaseName != "kube-controller-manager" {
		t.Errorf("leader election = %+v, want kubeadm's: on, kube-system/kube-controller-manager", flags)
	}
	enabled := controllersflag.Enabled(Upstream, flags.Controllers)
	for _, name := range []string{"replicaset-controller", "deployment-controller", "endpoints-controller",
		"endpointslice-controller", "bootstrap-signer-controller", "token-cleaner-controller"} {
		if !slices.Contains(enabled, name) {
			t.Errorf("%s is off, want on", name)
		}
	}
	if slices.Contains(enabled, "selinux-warning-controller") {
		t.Error("selinux-warning-controller is on, but it is disabled by default and not named")
	}
}

func TestParseFlagsFollowsPflag(t *testing.T) {
	for _, tc := range []struct {
		name        string
		commandLine []string
		want        Flags
	}{
		{"absent means *", []string{"kube-controller-manager", "--v=2"},
			Flags{Controllers: []string{"*"}, LeaderElect: true, LeaseNamespace: "kube-system", LeaseName: "kube-controller-manager"}},
		{"repeated and space separated", []string{"kcm", "--controllers", "*,-replicaset", "--controllers=deployment"},
			Flags{Controllers: []string{"*", "-replicaset", "deployment"}, LeaderElect: true, LeaseNamespace: "kube-system", LeaseName: "kube-controller-manager"}},
		{"empty turns everything off", []string{"kcm", "--controllers="},
			Flags{Controllers: nil, LeaderElect: true, LeaseNamespace: "kube-system", LeaseName: "kube-controller-manager"}},
		{"election off and another Lease", []string{"kcm", "--leader-elect=false", "--leader-elect-resource-name=kcm", "--leader-elect-resource-namespace", "infra"},
			Flags{Controllers: []string{"*"}, LeaderElect: false, LeaseNamespace: "infra", LeaseName: "kcm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseFlags(tc.commandLine)
			if !slices.Equal(got.Controllers, tc.want.Controllers) || got.LeaderElect != tc.want.LeaderElect ||
				got.LeaseNamespace != tc.want.LeaseNamespace || got.LeaseName != tc.want.LeaseName {
				t.Errorf("ParseFlags(%q) = %+v, want %+v", tc.commandLine, got, tc.want)
			}
		})
	}
}

// manifest returns a kubeadm-like static pod manifest with the given --controllers.
func manifest(t *testing.T, controllers string) []byte {
	data, err := os.ReadFile("testdata/kubeadm-kube-controller-manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(data), "--controllers=*,bootstrapsigner,tokencleaner", "--controllers="+controllers, 1))
}

func lease(name, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)}},
	}
}

var (
	upstreamHolds = lease("kube-controller-manager", "node1_1234", 2*time.Second)
	upstreamGone  = lease("kube-controller-manager", "node1_1234", time.Hour)
	miniKCMHolds  = lease("mini-kube-controller-manager", "mini-kcm-0_abcd", time.Second)
	miniKCMGone   = lease("mini-kube-controller-manager", "mini-kcm-0_abcd", time.Hour)
	kubeadmConfig = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}}
)

func upstreamPod(name string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"component": "kube-controller-manager"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-controller-manager", Command: command}}},
	}
}

func TestCheckVerdicts(t *testing.T) {
	const allDisabled = "*,bootstrapsigner,tokencleaner,-deployment-controller,-endpoints-controller,-endpointslice-controller,-replicaset-controller"
	for _, tc := range []struct {
		name string
		// manifest is the static pod manifest's --controllers; "" means none on disk.
		manifest string
		objects  []runtime.Object
		want     Owner
		// owners are the verdicts in the registry's order: deployment, endpoints,
		// endpointslice, replicaset.
		owners []Owner
		ok     bool
		// problems are substrings the problems must contain.
		problems []string
	}{{
		name: "both run everything: the fight, with the kubeadm fix", manifest: "*,bootstrapsigner,tokencleaner",
		objects: []runtime.Object{upstreamHolds, miniKCMHolds, kubeadmConfig},
		owners:  []Owner{OwnerBoth, OwnerBoth, OwnerBoth, OwnerBoth},
		problems: []string{"both run deployment-controller, endpoints-controller, endpointslice-controller, replicaset-controller",
			"set --controllers=" + allDisabled + " in static pod manifest " + DefaultManifestPath,
			"kubeadm-config ConfigMap", "controllerManager.extraArgs"},
	}, {
		name: "handed over to mini-kcm", manifest: allDisabled, want: OwnerMiniKCM,
		objects: []runtime.Object{upstreamHolds, miniKCMHolds, kubeadmConfig},
		owners:  []Owner{OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM}, ok: true,
	}, {
		name: "handed over, but upstream wanted: its controllers back, then mini-kcm goes", manifest: allDisabled, want: OwnerUpstream,
		objects:  []runtime.Object{upstreamHolds, miniKCMHolds},
		owners:   []Owner{OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM},
		problems: []string{"wanted: kube-controller-manager", "set --controllers=*,bootstrapsigner,tokencleaner in", "then, without a pause", "remove mini-kcm"},
	}, {
		name: "upstream alone, before the hand-over", manifest: "*,bootstrapsigner,tokencleaner",
		objects: []runtime.Object{upstreamHolds},
		owners:  []Owner{OwnerUpstream, OwnerUpstream, OwnerUpstream, OwnerUpstream}, ok: true,
	}, {
		name: "upstream alone but mini-kcm wanted: start it first", manifest: "*", want: OwnerMiniKCM,
		objects:  []runtime.Object{upstreamHolds, miniKCMGone},
		owners:   []Owner{OwnerUpstream, OwnerUpstream, OwnerUpstream, OwnerUpstream},
		problems: []string{"still runs", "first start mini-kcm", "expired"},
	}, {
		name: "switched off upstream before mini-kcm runs: nobody", manifest: allDisabled,
		objects:  []runtime.Object{upstreamHolds},
		owners:   []Owner{OwnerNeither, OwnerNeither, OwnerNeither, OwnerNeither},
		problems: []string{"nobody runs", "does not exist", "start mini-kcm"},
	}, {
		name: "one controller left behind, named by an alias", manifest: "*,-deployment,-endpoint,-endpointslice",
		objects:  []runtime.Object{upstreamHolds, miniKCMHolds},
		owners:   []Owner{OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM, OwnerBoth},
		problems: []string{"both run replicaset-controller:", "--controllers=*,-deployment,-endpoint,-endpointslice,-replicaset-controller"},
	}, {
		name: "upstream stopped (its Lease expired): mini-kcm alone", manifest: "*",
		objects: []runtime.Object{upstreamGone, miniKCMHolds},
		owners:  []Owner{OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM, OwnerMiniKCM}, ok: true,
	}, {
		// "endpoints" is mini-kcm's alias; upstream's is "endpoint".
		name: "names upstream does not know", manifest: "*,-replicaset,-deployment,-endpoints,-endpointslice,-nosuch",
		objects: []runtime.Object{upstreamHolds, miniKCMHolds},
		owners:  []Owner{OwnerMiniKCM, OwnerBoth, OwnerMiniKCM, OwnerMiniKCM},
		problems: []string{`"nosuch" is not in the list of known controllers`, `"endpoints" is not in the list`, "refuses to start",
			"--controllers=*,-replicaset,-deployment,-endpointslice,-endpoints-controller in"},
	}, {
		name:     "no manifest, no pod: a managed control plane",
		objects:  []runtime.Object{miniKCMHolds},
		owners:   []Owner{OwnerUnknown, OwnerUnknown, OwnerUnknown, OwnerUnknown},
		problems: []string{"cannot read kube-controller-manager's --controllers", "no such file", "none", "Managed control planes"},
	}, {
		name: "from the pods, without kubeadm", want: OwnerMiniKCM,
		objects: []runtime.Object{upstreamHolds, miniKCMHolds,
			upstreamPod("kube-controller-manager-a", "kube-controller-manager", "--controllers=*,-replicaset-controller"),
			upstreamPod("kube-controller-manager-b", "kube-controller-manager", "--controllers", "*,-replicaset-controller,-deployment-controller")},
		owners: []Owner{OwnerBoth, OwnerBoth, OwnerBoth, OwnerMiniKCM},
		problems: []string{"both run deployment-controller, endpoints-controller, endpointslice-controller:",
			"in the static pod manifest (or whatever writes the command line) of pod kube-system/kube-controller-manager-a", "pod kube-system/kube-controller-manager-b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Sources{
				Client: fake.NewClientset(tc.objects...),
				ReadFile: func(path string) ([]byte, error) {
					if tc.manifest == "" || path != DefaultManifestPath {
						return nil, fs.ErrNotExist
					}
					return manifest(t, tc.manifest), nil
				},
				LeaseNamespace: "kube-system", LeaseName: "mini-kube-controller-manager", Controllers: []string{"*"}, Now: now,
			}
			up, err := s.Upstream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			mk, err := s.MiniKCM(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r := Evaluate(all.Registry(), up, mk, tc.want)
			var out strings.Builder
			r.Print(&out)
			t.Log("\n" + out.String())
			var owners []Owner
			for _, v := range r.Verdicts {
				owners = append(owners, v.Owner)
			}
			if !slices.Equal(owners, tc.owners) {
				t.Errorf("owners = %v, want %v", owners, tc.owners)
			}
			if r.OK() != tc.ok {
				t.Errorf("OK = %t, want %t; problems: %q", r.OK(), tc.ok, r.Problems)
			}
			problems := strings.Join(r.Problems, "\n")
			for _, want := range tc.problems {
				if !strings.Contains(problems, want) {
					t.Errorf("problems do not say %q:\n%s", want, problems)
				}
			}
			if tc.name == "from the pods, without kubeadm" && strings.Contains(problems, "kubeadm") {
				t.Errorf("a cluster without kubeadm is told about kubeadm:\n%s", problems)
			}
		})
	}
}

func TestWithControllers(t *testing.T) {
	ours := []string{"deployment-controller", "replicaset-controller"}
	for _, tc := range []struct {
		entries []string
		enable  bool
		want    string
	}{
		{[]string{"*"}, false, "*,-deployment-controller,-replicaset-controller"},
		// Named explicitly: dropping the names is enough, and an added "-name" after
		// them would not decide (the first entry does).
		{[]string{"replicaset", "deployment", "job"}, false, "job"},
		{[]string{"*", "-replicaset", "-deployment-controller"}, true, "*"},
		{[]string{"job", "-replicaset"}, true, "job,deployment-controller,replicaset-controller"},
		{[]string{"replicaset", "deployment"}, false, `""`},
		{[]string{"*", "-nosuch", "-replicaset"}, false, "*,-deployment-controller,-replicaset-controller"},
	} {
		if got := withControllers(tc.entries, ours, tc.enable); got != tc.want {
			t.Errorf("withControllers(%q, enable=%t) = %s, want %s", tc.entries, tc.enable, got, tc.want)
		}
	}
}

func TestUpstreamListMatchesItsOwnRules(t *testing.T) {
	// Every alias resolves to a listed name, and no name or alias is listed twice, as
	// kube-controller-manager's own descriptor validation demands.
	seen := map[string]bool{}
	for _, c := range upstreamControllers {
		for _, n := range append([]string{c.name}, c.aliases...) {
			if seen[n] {
				t.Errorf("%q listed twice", n)
			}
			seen[n] = true
			if got, ok := Upstream.Canonical(n); !ok || got != c.name {
				t.Errorf("Canonical(%q) = %q, %t; want %q", n, got, ok, c.name)
			}
		}
	}
	// Our controllers carry upstream's canonical names, which the check relies on.
	for _, name := range all.Registry().Names() {
		if _, ok := Upstream.Canonical(name); !ok {
			t.Errorf("our %s is not one of upstream's names", name)
		}
	}
}

// check runs the whole check on objects, with this node's manifest disabling our
// controllers (a hand-over done here) unless manifestControllers says otherwise.
func check(t *testing.T, client *fake.Clientset, manifestControllers string, want Owner) Report {
	t.Helper()
	s := Sources{
		Client: client,
		ReadFile: func(path string) ([]byte, error) {
			if path != DefaultManifestPath {
				return nil, fs.ErrNotExist
			}
			return manifest(t, manifestControllers), nil
		},
		NodeName:       "cp-1",
		LeaseNamespace: "kube-system", LeaseName: "mini-kube-controller-manager", Controllers: []string{"*"}, Now: now,
		Impersonate: func(user string, extra map[string][]string) (kubernetes.Interface, error) {
			return impersonated(client, user, extra), nil
		},
	}
	ctx := context.Background()
	up, err := s.Upstream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mk, err := s.MiniKCM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.ProbeFence(ctx, &mk)
	r := Evaluate(all.Registry(), up, mk, want)
	var out strings.Builder
	r.Print(&out)
	t.Log("\n" + out.String())
	return r
}

// impersonated is the client a probe gets: the same fake, whose reactors see the
// impersonated user through fenceUser.
func impersonated(client *fake.Clientset, user string, extra map[string][]string) *fake.Clientset {
	fenceUser = user + " " + strings.Join(extra[leaderelection.LeaseHolderExtra], ",")
	return client
}

// fenceUser is the user and holder the last probe impersonated.
var fenceUser string

func upstreamPodOn(name, node string, command ...string) *corev1.Pod {
	p := upstreamPod(name, command...)
	p.Spec.NodeName = node
	return p
}

func miniKCMPod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "mini-kcm"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mini-kcm", Args: args}}},
	}
}

const handedOver = "*,bootstrapsigner,tokencleaner,-deployment-controller,-endpoints-controller,-endpointslice-controller,-replicaset-controller"

func problemsSay(t *testing.T, r Report, wants ...string) {
	t.Helper()
	problems := strings.Join(r.Problems, "\n")
	for _, want := range wants {
		if !strings.Contains(problems, want) {
			t.Errorf("problems do not say %q:\n%s", want, problems)
		}
	}
}

// The check reads every control-plane node, not only the one it runs on, and tells
// mixed settings, the replicas' own --controllers, unheld shards and a fence that
// refuses the leader.
func TestCheckSeesTheWholeControlPlane(t *testing.T) {
	t.Run("another control-plane node still runs the controllers", func(t *testing.T) {
		client := fake.NewClientset(upstreamHolds, miniKCMHolds,
			// This node's mirror pod still shows the flags before the edit: the
			// manifest is what its kubelet runs next, so the pod is skipped.
			upstreamPodOn("kube-controller-manager-cp-1", "cp-1", "kube-controller-manager", "--controllers=*"),
			upstreamPodOn("kube-controller-manager-cp-2", "cp-2", "kube-controller-manager", "--controllers="+handedOver),
			upstreamPodOn("kube-controller-manager-cp-3", "cp-3", "kube-controller-manager", "--controllers=*"))
		r := check(t, client, handedOver, OwnerMiniKCM)
		if r.OK() {
			t.Fatal("OK with cp-3 still running the controllers")
		}
		for _, v := range r.Verdicts {
			if v.Owner != OwnerBoth {
				t.Errorf("%s: %s, want %s", v.Controller, v.Owner, OwnerBoth)
			}
		}
		problemsSay(t, r, "instances disagree: ", "pod kube-system/kube-controller-manager-cp-3 on node cp-3",
			"the same --controllers on every control-plane node")
		if strings.Contains(strings.Join(r.Problems, "\n"), "kube-controller-manager-cp-1") {
			t.Errorf("this node's mirror pod was judged, not its manifest:\n%s", strings.Join(r.Problems, "\n"))
		}
	})
	t.Run("every node handed over", func(t *testing.T) {
		client := fake.NewClientset(upstreamHolds, miniKCMHolds,
			upstreamPodOn("kube-controller-manager-cp-2", "cp-2", "kube-controller-manager", "--controllers="+handedOver))
		if r := check(t, client, handedOver, OwnerMiniKCM); !r.OK() {
			t.Errorf("problems: %q", r.Problems)
		}
	})
	t.Run("the other nodes cannot be read", func(t *testing.T) {
		client := fake.NewClientset(upstreamHolds, miniKCMHolds)
		client.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.GetNamespace() == "kube-system" && strings.Contains(action.(k8stesting.ListAction).GetListRestrictions().Labels.String(), "component") {
				return true, nil, errors.New("pods is forbidden")
			}
			return false, nil, nil
		})
		r := check(t, client, handedOver, OwnerMiniKCM)
		problemsSay(t, r, "cannot read the kube-controller-manager pods of the other control-plane nodes", "pods is forbidden")
	})
	t.Run("the replicas' own --controllers", func(t *testing.T) {
		client := fake.NewClientset(upstreamHolds, miniKCMHolds,
			miniKCMPod("mini-kcm-0", "--controllers=*,-endpoints"), miniKCMPod("mini-kcm-1", "--controllers=*,-endpoints"),
			// Another install's replica, on another Lease: not ours.
			miniKCMPod("other-0", "--leader-elect-resource-name=other", "--controllers=replicaset"))
		r := check(t, client, handedOver, OwnerMiniKCM)
		owners := map[string]Owner{}
		for _, v := range r.Verdicts {
			owners[v.Controller] = v.Owner
		}
		if owners["endpoints-controller"] != OwnerNeither || owners["replicaset-controller"] != OwnerMiniKCM {
			t.Errorf("owners %v: want endpoints-controller run by nobody (the replicas turn it off), the others by mini-kcm", owners)
		}
		if r.MiniKCM.ControllersFrom != "from the pods mini-kcm-0, mini-kcm-1" {
			t.Errorf("ControllersFrom = %q", r.MiniKCM.ControllersFrom)
		}
	})
	t.Run("replicas that disagree", func(t *testing.T) {
		client := fake.NewClientset(upstreamHolds, miniKCMHolds,
			miniKCMPod("mini-kcm-0", "--controllers=*"), miniKCMPod("mini-kcm-1", "--controllers", "*,-endpoints"))
		r := check(t, client, handedOver, OwnerMiniKCM)
		problemsSay(t, r, "mini-kcm's replicas disagree", "--controllers=* in mini-kcm-0", "--controllers=*,-endpoints in mini-kcm-1")
	})
	t.Run("sharded with a shard nobody holds", func(t *testing.T) {
		epoch := sharding.Epoch{Number: 1, Plan: sharding.Equal(3)}
		plan := lease("mini-kube-controller-manager-plan", "", 0)
		plan.Labels = sharding.Labels("mini-kube-controller-manager", sharding.RolePlan)
		plan.Annotations = map[string]string{sharding.AnnotationPlan: epoch.String()}
		objects := []runtime.Object{upstreamHolds, miniKCMHolds, plan, miniKCMPod("mini-kcm-0", "--shards=3")}
		for i, ago := range []time.Duration{time.Second, time.Hour, time.Second} {
			l := lease(sharding.ShardLeaseName("mini-kube-controller-manager", i), "mini-kcm-0_abcd", ago)
			l.Labels = sharding.Labels("mini-kube-controller-manager", sharding.RoleShard)
			l.Labels[sharding.LabelEpoch] = epoch.Label(i)
			objects = append(objects, l)
		}
		r := check(t, fake.NewClientset(objects...), handedOver, OwnerMiniKCM)
		problemsSay(t, r, "1 of 3 shards have no holder", "shard 1 (Lease mini-kube-controller-manager-1 expired")
		if !r.MiniKCM.Sharded || r.MiniKCM.ShardsHeld != 2 {
			t.Errorf("sharded %t, %d shards held; want sharded, 2", r.MiniKCM.Sharded, r.MiniKCM.ShardsHeld)
		}
		if r.MiniKCM.FenceProbe != "" {
			t.Errorf("sharded writes carry a shard Lease; the probe ran: %s", r.MiniKCM.FenceProbe)
		}
	})
	fenced := func(refuse bool, paramLease ...string) *fake.Clientset {
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-lease-fence"}}
		for _, name := range paramLease {
			binding.Spec.ParamRef = &admissionregistrationv1.ParamRef{Namespace: "kube-system", Name: name}
		}
		client := fake.NewClientset(upstreamHolds, miniKCMHolds, binding)
		client.PrependReactor("create", "endpoints", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if refuse {
				return true, nil, apierrors.NewForbidden(corev1.Resource("endpoints"), "mini-kcm-handover-check-probe",
					errors.New("ValidatingAdmissionPolicy 'mini-kcm-lease-fence' with binding 'mini-kcm-lease-fence' denied request: write fenced by the apiserver"))
			}
			return true, action.(k8stesting.CreateAction).GetObject(), nil
		})
		return client
	}
	t.Run("the fence admits the leader", func(t *testing.T) {
		r := check(t, fenced(false), handedOver, OwnerMiniKCM)
		if !r.OK() || !strings.HasPrefix(r.MiniKCM.FenceProbe, "admitted: ") {
			t.Errorf("probe %q, problems %q", r.MiniKCM.FenceProbe, r.Problems)
		}
		if fenceUser != "system:serviceaccount:kube-system:mini-kcm-endpoints-controller mini-kcm-0_abcd" {
			t.Errorf("the probe impersonated %q, want the endpoints controller with the Lease's holder", fenceUser)
		}
	})
	t.Run("the fence refuses the leader: the re-install trap", func(t *testing.T) {
		r := check(t, fenced(true), handedOver, OwnerMiniKCM)
		problemsSay(t, r, "the apiserver refuses the writes of mini-kcm's leader", "kubernetes#130887", "restart kube-apiserver")
	})
	t.Run("the fence judges by another Lease", func(t *testing.T) {
		r := check(t, fenced(true, "kube-controller-manager"), handedOver, OwnerMiniKCM)
		problemsSay(t, r, "the apiserver refuses the writes of mini-kcm's leader",
			"judges by the Lease kube-system/kube-controller-manager, not by mini-kcm's kube-system/mini-kube-controller-manager",
			"set its paramRef to mini-kcm's Lease")
	})
}
