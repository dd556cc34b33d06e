package controlplane

import "net"

// The addresses the apiserver's flags name in node mode; they exist only inside the
// node's network namespace (node_linux.go), but the flags are built on every platform.
var (
	// nodeAPIServerIP is the node's address and the kubernetes Service's endpoint.
	nodeAPIServerIP = net.IPv4(10, 255, 0, 1)
	// kubernetesServiceIP is the first address of serviceClusterIPRange.
	kubernetesServiceIP = net.IPv4(10, 96, 0, 1)
)
