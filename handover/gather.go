package handover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/sharding"
)

const (
	// DefaultManifestPath is where kubeadm (and kind, which uses it) writes
	// kube-controller-manager's static pod manifest.
	DefaultManifestPath = "/etc/kubernetes/manifests/kube-controller-manager.yaml"
	// componentLabel selects kube-controller-manager's static pods: kubeadm and kind
	// label them component=kube-controller-manager.
	componentLabel = "component=kube-controller-manager"
	// kubeadmConfigMap is kubeadm's ClusterConfiguration, which `kubeadm upgrade`
	// renders the manifests from.
	kubeadmConfigMap = "kubeadm-config"
	// kubeadmKubeconfig is the kubeconfig kubeadm gives kube-controller-manager; a
	// command line that names it was written by kubeadm.
	kubeadmKubeconfig = "/etc/kubernetes/controller-manager.conf"
	// upstreamContainer is the container name in kubeadm's and kind's manifests.
	upstreamContainer = "kube-controller-manager"
)

// Sources is where the check reads the facts.
type Sources struct {
	Client kubernetes.Interface
	// ManifestPath is the static pod manifest to read; empty means DefaultManifestPath
	// if it exists. kube-controller-manager's pods are read too, for the other
	// control-plane nodes.
	ManifestPath string
	// NodeName is the node whose manifest ManifestPath is: its pod is skipped when the
	// manifest was read (the file is what the kubelet runs next; the pod may lag it).
	NodeName string
	// ReadFile reads a manifest; os.ReadFile if nil.
	ReadFile func(string) ([]byte, error)
	// LeaseNamespace and LeaseName are mini-kcm's Lease.
	LeaseNamespace, LeaseName string
	// Controllers is the --controllers the check assumes mini-kcm's leader runs when no
	// replica's pod can be read; ControllersGiven says that the caller named it.
	Controllers      []string
	ControllersGiven bool
	// Impersonate returns a client acting as user with the given extra, for the probe of
	// the apiserver's fence (ProbeFence); nil skips the probe.
	Impersonate func(user string, extra map[string][]string) (kubernetes.Interface, error)
	Now         time.Time
}

// Upstream reads kube-controller-manager's flags, from the static pod manifest of this
// node and the pods of every control-plane node, whether it runs (its Lease), and
// whether kubeadm manages it.
func (s Sources) Upstream(ctx context.Context) (UpstreamState, error) {
	var st UpstreamState
	read := s.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	path, explicit := s.ManifestPath, s.ManifestPath != ""
	if !explicit {
		path = DefaultManifestPath
	}
	data, err := read(path)
	switch {
	case err == nil:
		flags, err := ParseManifest(data)
		if err != nil {
			return st, fmt.Errorf("reading %s: %w", path, err)
		}
		st.Instances = append(st.Instances, Instance{Source: "static pod manifest " + path, ManifestPath: path, Node: s.NodeName, Flags: flags})
		st.Kubeadm = st.Kubeadm || strings.Contains(string(data), kubeadmKubeconfig)
	case explicit:
		return st, fmt.Errorf("reading the manifest given by --kcm-manifest: %w", err)
	case errors.Is(err, fs.ErrNotExist):
		st.Tried = append(st.Tried, path+": no such file")
	default:
		st.Tried = append(st.Tried, fmt.Sprintf("%s: %v", path, err))
	}
	fromManifest := len(st.Instances) > 0
	pods, err := s.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: componentLabel})
	switch {
	case err != nil && fromManifest:
		// This node is known, the others are not: a second control-plane node that
		// still runs the controllers would go unseen.
		st.OtherNodesUnread = fmt.Sprintf("pods in kube-system with label %s: %v", componentLabel, err)
	case err != nil:
		st.Tried = append(st.Tried, fmt.Sprintf("pods in kube-system with label %s: %v", componentLabel, err))
	case len(pods.Items) == 0 && !fromManifest:
		st.Tried = append(st.Tried, fmt.Sprintf("pods in kube-system with label %s: none", componentLabel))
	}
	if err == nil {
		for _, pod := range pods.Items {
			if fromManifest && s.NodeName != "" && pod.Spec.NodeName == s.NodeName {
				continue
			}
			commandLine := commandLineOf(&pod)
			source := "pod kube-system/" + pod.Name
			if pod.Spec.NodeName != "" {
				source += " on node " + pod.Spec.NodeName
			}
			st.Instances = append(st.Instances, Instance{Source: source, Node: pod.Spec.NodeName, Flags: ParseFlags(commandLine)})
			st.Kubeadm = st.Kubeadm || slices.ContainsFunc(commandLine, func(a string) bool { return strings.Contains(a, kubeadmKubeconfig) })
		}
	}
	if len(st.Instances) == 0 {
		return st, nil
	}
	if _, err := s.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, kubeadmConfigMap, metav1.GetOptions{}); err == nil {
		st.Kubeadm = true
	}
	st.Running, st.RunningWhy = s.upstreamRunning(ctx, st.Instances)
	return st, nil
}

// upstreamRunning decides from kube-controller-manager's Lease whether it runs its
// controllers: a leader-elected kube-controller-manager runs them only while it holds
// the Lease, and one whose manifest was moved away leaves its Lease to expire.
func (s Sources) upstreamRunning(ctx context.Context, instances []Instance) (bool, string) {
	flags := instances[0].Flags
	if !slices.ContainsFunc(instances, func(in Instance) bool { return in.Flags.LeaderElect }) {
		return true, "--leader-elect=false: every instance runs its controllers"
	}
	held, why, err := s.leaseHeld(ctx, flags.LeaseNamespace, flags.LeaseName)
	if err != nil {
		return true, fmt.Sprintf("cannot read its Lease (%v); assuming it runs", err)
	}
	return held, why
}

// MiniKCM reads mini-kcm's Lease, the --controllers its replicas run (from their pods:
// the Lease does not say), and, sharded, whether every shard has a holder.
func (s Sources) MiniKCM(ctx context.Context) (MiniKCMState, error) {
	st := MiniKCMState{Lease: s.LeaseNamespace + "/" + s.LeaseName, Controllers: s.Controllers,
		ControllersFrom: "assumed: the check's --controllers"}
	held, why, err := s.leaseHeld(ctx, s.LeaseNamespace, s.LeaseName)
	if err != nil {
		return st, fmt.Errorf("reading mini-kcm's Lease %s: %w", st.Lease, err)
	}
	st.Running, st.RunningWhy = held, why
	if err := s.replicas(ctx, &st); err != nil {
		st.ControllersFrom += fmt.Sprintf(" (its replicas' pods could not be read: %v)", err)
	}
	if err := s.shards(ctx, &st); err != nil {
		return st, fmt.Errorf("reading mini-kcm's shard Leases: %w", err)
	}
	return st, nil
}

// replicaLabel selects mini-kcm's pods: every install of deploy/ labels them so.
const replicaLabel = "app.kubernetes.io/name=mini-kcm"

// replicas reads the --controllers and --shards of mini-kcm's pods that elect on the
// check's Lease. Unless the caller named --controllers, theirs replace the assumed
// value; replicas that disagree are a problem, since which of them leads decides.
func (s Sources) replicas(ctx context.Context, st *MiniKCMState) error {
	pods, err := s.Client.CoreV1().Pods(s.LeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: replicaLabel})
	if err != nil {
		return err
	}
	byValue := map[string][]string{}
	var values []string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		f := parseCommandLine(commandLineOf(&pod), Flags{LeaderElect: true, LeaseNamespace: metav1.NamespaceSystem, LeaseName: s.LeaseName})
		if f.LeaseNamespace != s.LeaseNamespace || f.LeaseName != s.LeaseName {
			continue
		}
		value := strings.Join(f.Controllers, ",")
		if _, ok := byValue[value]; !ok {
			values = append(values, value)
		}
		byValue[value] = append(byValue[value], pod.Name)
		st.Sharded = st.Sharded || f.Shards > 1
	}
	if len(values) == 0 {
		return nil
	}
	if len(values) > 1 {
		for _, v := range values {
			st.Disagree = append(st.Disagree, fmt.Sprintf("--controllers=%s in %s", v, strings.Join(byValue[v], ", ")))
		}
	}
	if !s.ControllersGiven {
		st.Controllers = strings.Split(values[0], ",")
		if values[0] == "" {
			st.Controllers = nil
		}
		st.ControllersFrom = fmt.Sprintf("from the pods %s", strings.Join(byValue[values[0]], ", "))
	}
	return nil
}

// shards reads, when mini-kcm is sharded, its plan and shard Leases: the Lease's holder
// then only coordinates, and the namespaces of a shard nobody holds have no controller.
func (s Sources) shards(ctx context.Context, st *MiniKCMState) error {
	list, err := s.Client.CoordinationV1().Leases(s.LeaseNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(map[string]string{sharding.LabelSet: s.LeaseName}).String()})
	if err != nil {
		if st.Sharded {
			return err
		}
		return nil
	}
	leases := make([]*coordinationv1.Lease, 0, len(list.Items))
	for i := range list.Items {
		leases = append(leases, &list.Items[i])
	}
	set, err := sharding.ReadLeaseSet(s.LeaseName, leases, func(l *coordinationv1.Lease) bool { return sharding.ExpiredByRenewTime(l, s.Now) })
	if err != nil {
		return err
	}
	if set.Active == nil {
		if st.Sharded {
			st.UnheldShards = append(st.UnheldShards, "no plan yet (the coordinator writes the first one)")
		}
		return nil
	}
	st.Sharded = true
	for i := range set.Active.Plan.Shards() {
		l, ok := set.Shards[i]
		switch {
		case !ok:
			st.UnheldShards = append(st.UnheldShards, fmt.Sprintf("shard %d (no Lease yet)", i))
		case l.Labels[sharding.LabelEpoch] != set.Active.Label(i):
			st.UnheldShards = append(st.UnheldShards, fmt.Sprintf("shard %d (being handed over)", i))
		default:
			if held, why := LeaseHeld(l, s.Now); !held {
				st.UnheldShards = append(st.UnheldShards, fmt.Sprintf("shard %d (Lease %s %s)", i, l.Name, why))
			}
		}
	}
	st.ShardsHeld = set.Active.Plan.Shards() - len(st.UnheldShards)
	st.Shards = set.Active.Plan.Shards()
	return nil
}

// The probe of the apiserver's fence: a dry-run create of an Endpoints object as the
// endpoints controller's ServiceAccount with the Lease holder's extra, as the leader's
// writes carry it. The apiserver runs admission for a dry run and stores nothing.
const (
	fenceBinding       = "mini-kcm-lease-fence"
	fenceProbeAccount  = "mini-kcm-endpoints-controller"
	fenceProbeEndpoint = "mini-kcm-handover-check-probe"
)

// ProbeFence reports whether the apiserver admits a write of the leader of mini-kcm's
// Lease, as its controllers send it, when the fence of deploy/fence/ is installed. A
// fence that judges by another Lease than the leader's refuses every write of the
// leader, which the replicas' readiness (it reads only) cannot show: a binding whose
// paramRef names another Lease than the replicas' --leader-elect-resource-name, or a
// kube-apiserver that judges by the Lease as it was (kubernetes#130887: once no binding
// names a parameter kind, its informer of them may stop for good). It needs mini-kcm
// running unsharded (a shard's writes carry a shard Lease of their own) and
// Impersonate.
func (s Sources) ProbeFence(ctx context.Context, st *MiniKCMState) {
	if s.Impersonate == nil || !st.Running || st.Sharded {
		return
	}
	binding, err := s.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, fenceBinding, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			st.FenceProbe = fmt.Sprintf("not probed: reading the binding %s: %v", fenceBinding, err)
		}
		return
	}
	if ref := binding.Spec.ParamRef; ref != nil && (ref.Name != s.LeaseName || ref.Namespace != s.LeaseNamespace) {
		st.FenceLease = ref.Namespace + "/" + ref.Name
	}
	lease, err := s.Client.CoordinationV1().Leases(s.LeaseNamespace).Get(ctx, s.LeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		st.FenceProbe = fmt.Sprintf("not probed: reading the Lease's holder: %v", err)
		return
	}
	user := serviceAccountUser(s.LeaseNamespace, fenceProbeAccount)
	client, err := s.Impersonate(user, map[string][]string{leaderelection.LeaseHolderExtra: {*lease.Spec.HolderIdentity}})
	if err != nil {
		st.FenceProbe = fmt.Sprintf("not probed: %v", err)
		return
	}
	//lint:ignore SA1019 the probe writes as the Endpoints controller, which maintains the deprecated Endpoints API.
	probe := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: s.LeaseNamespace, Name: fenceProbeEndpoint}}
	_, err = client.CoreV1().Endpoints(s.LeaseNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	what := fmt.Sprintf("a dry-run create of Endpoints %s/%s as %s with holder %s", s.LeaseNamespace, fenceProbeEndpoint, user,
		*lease.Spec.HolderIdentity)
	switch {
	case err == nil || apierrors.IsAlreadyExists(err):
		st.FenceProbe = "admitted: " + what
	case strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+fenceBinding+"'"):
		st.FenceRefused = fmt.Sprintf("%s was refused by the apiserver's fence: %v", what, err)
		st.FenceProbe = "REFUSED: " + what
	default:
		st.FenceProbe = fmt.Sprintf("not probed: %s failed: %v", what, err)
	}
}

// serviceAccountUser is the user name of a ServiceAccount's tokens.
func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// leaseHeld reports whether the Lease namespace/name is held and renewed, with the
// holder and the age of its last renewal, or why not. A missing Lease is not an error.
func (s Sources) leaseHeld(ctx context.Context, namespace, name string) (bool, string, error) {
	lease, err := s.Client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("Lease %s/%s does not exist", namespace, name), nil
	}
	if err != nil {
		return false, "", err
	}
	held, why := LeaseHeld(lease, s.Now)
	return held, fmt.Sprintf("Lease %s/%s %s", namespace, name, why), nil
}

// LeaseHeld reports whether lease has a holder that renewed it within its duration, as
// of now, and says so in words.
func LeaseHeld(lease *coordinationv1.Lease, now time.Time) (bool, string) {
	spec := lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity == "" {
		return false, "released, nobody holds it"
	}
	holder := *spec.HolderIdentity
	if spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return false, fmt.Sprintf("names %s but was never renewed", holder)
	}
	age := now.Sub(spec.RenewTime.Time)
	if age >= time.Duration(*spec.LeaseDurationSeconds)*time.Second {
		return false, fmt.Sprintf("expired: %s renewed it %s ago", holder, duration.HumanDuration(age))
	}
	return true, fmt.Sprintf("held by %s, renewed %s ago", holder, duration.HumanDuration(age))
}

// ParseManifest reads kube-controller-manager's flags from its static pod manifest.
func ParseManifest(data []byte) (Flags, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return Flags{}, fmt.Errorf("parsing the pod manifest: %w", err)
	}
	if pod.Kind != "Pod" || len(pod.Spec.Containers) == 0 {
		return Flags{}, fmt.Errorf("not a pod manifest with containers (kind %q)", pod.Kind)
	}
	return ParseFlags(commandLineOf(&pod)), nil
}

// commandLineOf returns the command and args of the kube-controller-manager container
// (by name, else the first container).
func commandLineOf(pod *corev1.Pod) []string {
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	c := pod.Spec.Containers[0]
	for _, candidate := range pod.Spec.Containers {
		if candidate.Name == upstreamContainer {
			c = candidate
		}
	}
	return slices.Concat(c.Command, c.Args)
}
