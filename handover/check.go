// Package handover checks the hand-over of mini-kcm's controllers between
// kube-controller-manager and mini-kcm, so that each has exactly one owner: Evaluate
// decides who runs each controller from kube-controller-manager's --controllers (read
// by Sources from this node's static pod manifest and every control-plane node's pod,
// evaluated by the same code as mini-kcm's own flag), mini-kcm's replicas' flags and
// both Leases, for `mini-kcm handover check`; Watch lets a
// running leader notice kube-controller-manager writing what its controllers own.
//
// Limits: the check trusts the flags and Leases it reads (the pods' command lines say
// what each instance was started with, a Lease only who leads), and the watch sees a
// fight only once kube-controller-manager writes (see Watch and docs/handover.md).
package handover

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/options/controllersflag"
)

// Owner says who runs one of our controllers in the cluster.
type Owner string

const (
	// OwnerUpstream is kube-controller-manager alone.
	OwnerUpstream Owner = "upstream"
	// OwnerMiniKCM is mini-kcm alone.
	OwnerMiniKCM Owner = "mini-kcm"
	// OwnerBoth is the fight: two controllers act on the same objects and undo each
	// other's work (pods created twice, statuses that flap).
	OwnerBoth Owner = "BOTH"
	// OwnerNeither means nobody acts: ReplicaSets are not scaled, Endpoints go stale.
	OwnerNeither Owner = "NEITHER"
	// OwnerUnknown is the answer when kube-controller-manager's flags could not be read.
	OwnerUnknown Owner = "UNKNOWN"
)

// Instance is one kube-controller-manager whose flags were read.
type Instance struct {
	// Source says where: "static pod manifest PATH" or "pod kube-system/NAME".
	Source string
	// ManifestPath is the file the flags came from, empty for a pod.
	ManifestPath string
	// Node is the node it runs on, if known.
	Node  string
	Flags Flags
}

// UpstreamState is what the check found of kube-controller-manager.
type UpstreamState struct {
	// Instances are the command lines read: one manifest, or one pod per control-plane
	// node. None means the flags could not be read (Tried says where it looked).
	Instances []Instance
	Tried     []string
	// Running is whether kube-controller-manager runs its controllers now: its Lease is
	// held and renewed (without leader election, whether an instance was found).
	Running bool
	// RunningWhy says how Running was decided, for the report.
	RunningWhy string
	// Kubeadm is set when kubeadm manages the control plane, whose kubeadm-config
	// ConfigMap must change too.
	Kubeadm bool
	// OtherNodesUnread says why the pods of the other control-plane nodes could not be
	// read, when only the manifest was; "" when they were.
	OtherNodesUnread string
}

// enables reports whether any instance's --controllers turns controller on: any of them
// may be the one that leads.
func (u UpstreamState) enables(controller string) bool {
	for _, in := range u.Instances {
		if slices.Contains(controllersflag.Enabled(Upstream, in.Flags.Controllers), controller) {
			return true
		}
	}
	return false
}

// mixed lists the controllers among names that some instances enable and others do
// not, each with where.
func (u UpstreamState) mixed(names []string) []string {
	byWhere := map[string][]string{}
	var order []string
	for _, name := range names {
		var on, off []string
		for _, in := range u.Instances {
			if slices.Contains(controllersflag.Enabled(Upstream, in.Flags.Controllers), name) {
				on = append(on, in.Source)
			} else {
				off = append(off, in.Source)
			}
		}
		if len(on) > 0 && len(off) > 0 {
			where := fmt.Sprintf("on in %s, off in %s", strings.Join(on, ", "), strings.Join(off, ", "))
			if _, ok := byWhere[where]; !ok {
				order = append(order, where)
			}
			byWhere[where] = append(byWhere[where], name)
		}
	}
	var out []string
	for _, where := range order {
		out = append(out, strings.Join(byWhere[where], ", ")+" "+where)
	}
	return out
}

// MiniKCMState is what the check found of mini-kcm.
type MiniKCMState struct {
	// Lease is namespace/name of mini-kcm's Lease.
	Lease string
	// Running is whether the Lease is held and renewed: a leader runs the controllers.
	Running bool
	// RunningWhy says who holds the Lease and when it was renewed, or why nobody does.
	RunningWhy string
	// Controllers is mini-kcm's --controllers, as its replicas' pods run it, or the
	// value the check was given when it names one or no pod could be read (the Lease
	// does not say which controllers its holder runs); ControllersFrom says which.
	Controllers     []string
	ControllersFrom string
	// Disagree lists the replicas' different --controllers, when they differ: which
	// of them leads decides what runs.
	Disagree []string
	// Sharded is set when the replicas run --shards above 1 or a plan exists: the
	// Lease's holder coordinates, and each shard's holder runs the controllers on its
	// namespaces. Shards is the plan's count, ShardsHeld how many have a live holder,
	// and UnheldShards says which have none and why.
	Sharded      bool
	Shards       int
	ShardsHeld   int
	UnheldShards []string
	// FenceProbe says what the probe of the apiserver's fence found (Sources.ProbeFence),
	// "" when it did not run; FenceRefused is set when the fence refused the leader.
	FenceProbe, FenceRefused string
	// FenceLease is the namespace/name of the Lease the fence's binding judges by, when
	// it is not mini-kcm's Lease.
	FenceLease string
}

// Verdict is who runs one of our controllers.
type Verdict struct {
	Controller        string
	Upstream, MiniKCM bool
	Owner             Owner
}

// Report is the result of a check: a verdict per controller and every problem found,
// each with its fix. No problem means each controller has exactly one owner (the wanted
// one, if one was wanted).
type Report struct {
	Upstream UpstreamState
	MiniKCM  MiniKCMState
	Verdicts []Verdict
	Problems []string
}

// OK reports whether the hand-over state is sound.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Evaluate decides who runs each of reg's controllers and lists the problems. want is
// OwnerUpstream, OwnerMiniKCM or "" (either, as long as there is exactly one).
func Evaluate(reg *controllers.Registry, up UpstreamState, mk MiniKCMState, want Owner) Report {
	r := Report{Upstream: up, MiniKCM: mk}
	known := len(up.Instances) > 0
	ours := controllersflag.Enabled(reg, mk.Controllers)
	for _, name := range reg.Names() {
		v := Verdict{Controller: name, Upstream: up.Running && up.enables(name), MiniKCM: mk.Running && slices.Contains(ours, name)}
		switch {
		case !known:
			v.Owner = OwnerUnknown
		case v.Upstream && v.MiniKCM:
			v.Owner = OwnerBoth
		case v.Upstream:
			v.Owner = OwnerUpstream
		case v.MiniKCM:
			v.Owner = OwnerMiniKCM
		default:
			v.Owner = OwnerNeither
		}
		r.Verdicts = append(r.Verdicts, v)
	}
	if !known {
		r.Problems = append(r.Problems, fmt.Sprintf("cannot read kube-controller-manager's --controllers (looked at: %s). "+
			"Fix: run the check on a control-plane node, pass --kcm-manifest=PATH, or use a kubeconfig that may list pods in "+
			"kube-system. Managed control planes, where kube-controller-manager's flags cannot be changed, are out of scope: "+
			"mini-kcm cannot take over there.", strings.Join(up.Tried, "; ")))
		return r
	}
	if up.OtherNodesUnread != "" {
		r.Problems = append(r.Problems, fmt.Sprintf("cannot read the kube-controller-manager pods of the other control-plane "+
			"nodes (%s): one of them may still run the controllers. Fix: use a kubeconfig that may list pods in kube-system "+
			"(the admin kubeconfig may).", up.OtherNodesUnread))
	}
	if mixed := up.mixed(reg.Names()); len(mixed) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("kube-controller-manager's instances disagree: %s. Whichever holds "+
			"its Lease decides, so a failover of kube-controller-manager changes who runs them. Fix: the same --controllers "+
			"on every control-plane node.", strings.Join(mixed, "; ")))
	}
	if len(mk.Disagree) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("mini-kcm's replicas disagree: %s; whichever leads decides. Fix: give "+
			"every replica the same --controllers (one install, one value).", strings.Join(mk.Disagree, "; ")))
	}
	if mk.Running && len(mk.UnheldShards) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("mini-kcm is sharded and %d of %d shards have no holder (%s): the "+
			"controllers run on none of their namespaces. Fix: wait for the coordinator to hand them out (mini-kcm leader "+
			"prints the plan), and keep at least one replica running per the install.", len(mk.UnheldShards),
			mk.Shards, strings.Join(mk.UnheldShards, "; ")))
	}
	switch {
	case mk.FenceRefused != "" && mk.FenceLease != "":
		r.Problems = append(r.Problems, fmt.Sprintf("the apiserver refuses the writes of mini-kcm's leader: %s. The "+
			"binding %s judges by the Lease %s, not by mini-kcm's %s. Fix: set its paramRef to mini-kcm's Lease (the "+
			"replicas' --leader-elect-resource-namespace and -name) and apply it again; until then mini-kcm's controllers "+
			"write nothing.", mk.FenceRefused, fenceBinding, mk.FenceLease, mk.Lease))
	case mk.FenceRefused != "":
		r.Problems = append(r.Problems, fmt.Sprintf("the apiserver refuses the writes of mini-kcm's leader: %s. Its "+
			"fence judges by a Lease whose holder is not the leader: a kube-apiserver does this when it judges by the "+
			"Lease as it was, after deploy/fence/ was uninstalled and installed again (kubernetes#130887: once no binding "+
			"names Leases as parameters, its informer of them may stop for good). Fix: restart kube-apiserver on every "+
			"control-plane node (kubeadm: move its static pod manifest out of /etc/kubernetes/manifests and back), then "+
			"check again; until then mini-kcm's controllers write nothing.", mk.FenceRefused))
	}
	for _, in := range up.Instances {
		for _, err := range controllersflag.Unknown(Upstream, in.Flags.Controllers) {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: --controllers: %v in kube-controller-manager %s, which refuses to start "+
				"with it. Fix: remove it from --controllers.", in.Source, err, upstreamVersion))
		}
	}
	byOwner := map[Owner][]string{}
	for _, v := range r.Verdicts {
		byOwner[v.Owner] = append(byOwner[v.Owner], v.Controller)
	}
	if both := byOwner[OwnerBoth]; len(both) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("kube-controller-manager and mini-kcm both run %s: they fight over the same "+
			"objects (pods created twice, statuses that flap). Fix: %s", strings.Join(both, ", "), r.upstreamFix(both, false)))
	}
	if neither := byOwner[OwnerNeither]; len(neither) > 0 {
		fix := fmt.Sprintf("start mini-kcm (kubectl apply -k deploy/) and wait until a leader holds its Lease %s, or give "+
			"them back: %s", mk.Lease, r.upstreamFix(neither, true))
		if mk.Running {
			fix = fmt.Sprintf("enable them in mini-kcm's --controllers, or give them back: %s", r.upstreamFix(neither, true))
		}
		r.Problems = append(r.Problems, fmt.Sprintf("nobody runs %s (mini-kcm: %s; kube-controller-manager: %s): "+
			"ReplicaSets are not scaled and Endpoints go stale. Fix: %s", strings.Join(neither, ", "), mk.RunningWhy, up.RunningWhy, fix))
	}
	switch want {
	case OwnerMiniKCM:
		if names := byOwner[OwnerUpstream]; len(names) > 0 {
			fix := r.upstreamFix(names, false)
			if !mk.Running {
				fix = fmt.Sprintf("first start mini-kcm and see a leader hold its Lease %s (mini-kcm: %s), then %s", mk.Lease, mk.RunningWhy, fix)
			}
			r.Problems = append(r.Problems, fmt.Sprintf("kube-controller-manager still runs %s, wanted: mini-kcm. Fix: %s",
				strings.Join(names, ", "), fix))
		}
	case OwnerUpstream:
		if names := byOwner[OwnerMiniKCM]; len(names) > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("mini-kcm runs %s, wanted: kube-controller-manager. Fix: %s, then, "+
				"without a pause (until then both run them), remove mini-kcm (kubectl delete -k deploy/; deploy/README.md, "+
				"Uninstalling): the other order leaves a moment with neither",
				strings.Join(names, ", "), r.upstreamFix(names, true)))
		}
	}
	return r
}

// upstreamFix says how to change kube-controller-manager's --controllers so that it
// stops (or, with enable, starts again) running names, and where: each instance's
// manifest or pod, and with kubeadm its ClusterConfiguration too.
func (r Report) upstreamFix(names []string, enable bool) string {
	var parts []string
	seen := map[string]bool{}
	for _, in := range r.Upstream.Instances {
		enabled := controllersflag.Enabled(Upstream, in.Flags.Controllers)
		if !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(enabled, n) != enable }) {
			continue // this instance already has them as wanted
		}
		value := withControllers(in.Flags.Controllers, names, enable)
		where := "in " + in.Source
		if in.ManifestPath == "" {
			where = "in the static pod manifest (or whatever writes the command line) of " + in.Source
		}
		line := fmt.Sprintf("set --controllers=%s %s", value, where)
		if !seen[line] {
			seen[line] = true
			parts = append(parts, line)
		}
	}
	fix := strings.Join(parts, "; ")
	if r.Upstream.Kubeadm {
		value := withControllers(r.Upstream.Instances[0].Flags.Controllers, names, enable)
		fix += fmt.Sprintf(" on every control-plane node; kubeadm: also set it in the kubeadm-config ConfigMap (kubectl -n "+
			"kube-system edit configmap kubeadm-config: ClusterConfiguration controllerManager.extraArgs, "+
			"- name: controllers, value: %q), or the next kubeadm upgrade writes the old flag back", value)
	}
	return fix
}

// withControllers returns a --controllers value that keeps every other controller as
// entries has it and turns names off (or on, with enable): the entries naming them are
// dropped and, where the rest would not decide as wanted, "-name" (or "name") added.
// Upstream's rule is "the first entry naming a controller decides", so dropping first
// makes the added entries decide. Names upstream does not know are dropped too: it
// would refuse to start with them.
func withControllers(entries, names []string, enable bool) string {
	var kept []string
	for _, e := range entries {
		name, ok := Upstream.Canonical(strings.TrimPrefix(e, "-"))
		if e != controllersflag.AllOnByDefault && (!ok || slices.Contains(names, name)) {
			continue
		}
		kept = append(kept, e)
	}
	enabled := controllersflag.Enabled(Upstream, kept)
	for _, name := range names {
		if slices.Contains(enabled, name) == enable {
			continue
		}
		if enable {
			kept = append(kept, name)
		} else {
			kept = append(kept, "-"+name)
		}
	}
	if len(kept) == 0 {
		// An empty value turns every controller off; say so explicitly.
		return `""`
	}
	return strings.Join(kept, ",")
}

// Print writes the report for a person: where the facts came from, a table of
// controllers and owners, and the problems with their fixes.
func (r Report) Print(w io.Writer) {
	up := r.Upstream
	if len(up.Instances) == 0 {
		fmt.Fprintln(w, "kube-controller-manager: flags unknown")
	}
	for _, in := range up.Instances {
		fmt.Fprintf(w, "kube-controller-manager: --controllers=%s (%s)\n", strings.Join(in.Flags.Controllers, ","), in.Source)
	}
	if len(up.Instances) > 0 {
		fmt.Fprintf(w, "kube-controller-manager running: %t (%s)\n", up.Running, up.RunningWhy)
	}
	mk := r.MiniKCM
	fmt.Fprintf(w, "mini-kcm running: %t (%s; --controllers=%s, %s)\n", mk.Running, mk.RunningWhy,
		strings.Join(mk.Controllers, ","), mk.ControllersFrom)
	if mk.Sharded {
		fmt.Fprintf(w, "mini-kcm sharded: %d of %d shards held\n", mk.ShardsHeld, mk.Shards)
	}
	if mk.FenceProbe != "" {
		fmt.Fprintf(w, "mini-kcm's writes at the apiserver's fence: %s\n", mk.FenceProbe)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTROLLER\tUPSTREAM\tMINI-KCM\tRUN BY")
	for _, v := range r.Verdicts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Controller, onOff(v.Upstream, len(up.Instances) > 0), onOff(v.MiniKCM, true), v.Owner)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	if r.OK() {
		fmt.Fprintln(w, "OK: each controller has exactly one owner.")
		return
	}
	fmt.Fprintln(w, "Problems:")
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
}

func onOff(on, known bool) string {
	switch {
	case !known:
		return "?"
	case on:
		return "on"
	}
	return "off"
}
