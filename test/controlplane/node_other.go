//go:build !linux

package controlplane

import (
	"context"
	"crypto/tls"
	"net/http"
)

// Node component names, also the names of their log files.
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
	KubeProxy  = "kube-proxy"
)

// NodeName is the name of the real node.
const NodeName = "mini-kcm-node"

// PauseImage is the node's sandbox image.
const PauseImage = "registry.local/pause:dev"

// NodeInstallCommand installs what the node needs on Debian or Ubuntu.
const NodeInstallCommand = "apt-get install -y containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux curl"

type node struct{}

// NodeSupported returns why this machine cannot run the node: it is not Linux.
func NodeSupported() error { return errNodeNeedsLinux }

// MountPoints fails: there is no node, and no mount table to check, off Linux.
func MountPoints() ([]string, error) { return nil, errNodeNeedsLinux }

// NodeDir returns "": there is no node off Linux.
func (cp *ControlPlane) NodeDir() string { return "" }

// StaticPodDir returns "": there is no node off Linux.
func (cp *ControlPlane) StaticPodDir() string { return "" }

// ContainerdAddress returns "": there is no node off Linux.
func (cp *ControlPlane) ContainerdAddress() string { return "" }

// NodeKubeconfig fails: there is no node off Linux.
func (cp *ControlPlane) NodeKubeconfig(string, ...string) (string, error) {
	return "", errNodeNeedsLinux
}

// Ctr fails: there is no node off Linux.
func (cp *ControlPlane) Ctr(context.Context, ...string) ([]byte, error) {
	return nil, errNodeNeedsLinux
}

// ContainerPID fails: there is no node off Linux.
func (cp *ControlPlane) ContainerPID(context.Context, string) (int, error) {
	return 0, errNodeNeedsLinux
}

func (cp *ControlPlane) startNode(context.Context) error { return errNodeNeedsLinux }
func (cp *ControlPlane) stopNode()                       {}
func cleanupAbandonedNodes()                             {}

// KubeletAPI needs the node, which needs Linux.
func (cp *ControlPlane) KubeletAPI(*tls.Certificate) (*http.Client, string) { return nil, "" }

// PodNetworkClient needs the node, which needs Linux.
func (cp *ControlPlane) PodNetworkClient() *http.Client { return nil }
