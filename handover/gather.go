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
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
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
	// if it exists, else the pods.
	ManifestPath string
	// ReadFile reads a manifest; os.ReadFile if nil.
	ReadFile func(string) ([]byte, error)
	// LeaseNamespace and LeaseName are mini-kcm's Lease.
	LeaseNamespace, LeaseName string
	// Controllers is mini-kcm's --controllers, which the check assumes.
	Controllers []string
	Now         time.Time
}

// Upstream reads kube-controller-manager's flags (from the manifest, else its pods),
// whether it runs (its Lease), and whether kubeadm manages it.
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
		st.Instances = append(st.Instances, Instance{Source: "static pod manifest " + path, ManifestPath: path, Flags: flags})
		st.Kubeadm = st.Kubeadm || strings.Contains(string(data), kubeadmKubeconfig)
	case explicit:
		return st, fmt.Errorf("reading the manifest given by --kcm-manifest: %w", err)
	case errors.Is(err, fs.ErrNotExist):
		st.Tried = append(st.Tried, path+": no such file")
	default:
		st.Tried = append(st.Tried, fmt.Sprintf("%s: %v", path, err))
	}
	if len(st.Instances) == 0 {
		pods, err := s.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: componentLabel})
		switch {
		case err != nil:
			st.Tried = append(st.Tried, fmt.Sprintf("pods in kube-system with label %s: %v", componentLabel, err))
		case len(pods.Items) == 0:
			st.Tried = append(st.Tried, fmt.Sprintf("pods in kube-system with label %s: none", componentLabel))
		}
		if err == nil {
			for _, pod := range pods.Items {
				commandLine := commandLineOf(&pod)
				st.Instances = append(st.Instances, Instance{Source: "pod kube-system/" + pod.Name, Flags: ParseFlags(commandLine)})
				st.Kubeadm = st.Kubeadm || slices.ContainsFunc(commandLine, func(a string) bool { return strings.Contains(a, kubeadmKubeconfig) })
			}
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

// MiniKCM reads mini-kcm's Lease.
func (s Sources) MiniKCM(ctx context.Context) (MiniKCMState, error) {
	st := MiniKCMState{Lease: s.LeaseNamespace + "/" + s.LeaseName, Controllers: s.Controllers}
	held, why, err := s.leaseHeld(ctx, s.LeaseNamespace, s.LeaseName)
	if err != nil {
		return st, fmt.Errorf("reading mini-kcm's Lease %s: %w", st.Lease, err)
	}
	st.Running, st.RunningWhy = held, why
	return st, nil
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
