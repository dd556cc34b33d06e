#!/usr/bin/env bash
# The pod network of make test-kind's cluster, run by deploy/kind/demo.sh as its
# KIND_POST_CREATE hook right after `kind create cluster` (CLUSTER_NAME and KUBECONFIG
# set). The node image has no kindnetd (kind's default CNI, an image from a registry),
# so the cluster is created with disableDefaultCNI and this lays on every node a bridge
# CNI config for the node's podCIDR (Debian's CNI plugins), and a route to every other
# node's podCIDR via that node's IP: all nodes sit on kind's one podman network.
# It first checks that the nodes got the ulimits of run.sh's CONTAINERS_CONF, that is
# that kind's podman calls inherited it.
set -euo pipefail

: "${CLUSTER_NAME:?CLUSTER_NAME must name the kind cluster}"
want_nofile=${EXPECT_NOFILE:-}

declare -A ip cidr
nodes=$(kind get nodes --name "$CLUSTER_NAME")
[[ -n $nodes ]] || { echo "error: kind cluster $CLUSTER_NAME has no nodes" >&2; exit 1; }
for n in $nodes; do
	if [[ -n $want_nofile ]]; then
		# The hard limit of the node's init, which podman started with the configured ulimits.
		got=$(podman exec "$n" cat /proc/1/limits | awk '/^Max open files/ { print $5 }')
		[[ $got == "$want_nofile" ]] || {
			echo "error: node $n has a nofile hard limit of $got, not CONTAINERS_CONF's $want_nofile: kind's podman did not inherit CONTAINERS_CONF=${CONTAINERS_CONF:-}" >&2
			exit 1
		}
	fi
	ip[$n]=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$n")
	cidr[$n]=$(kubectl --context "kind-$CLUSTER_NAME" get node "$n" -o jsonpath='{.spec.podCIDR}')
	[[ -n ${ip[$n]} && -n ${cidr[$n]} ]] || { echo "error: node $n: IP '${ip[$n]}', podCIDR '${cidr[$n]}'" >&2; exit 1; }
	printf '    node %s: IP %s, pods %s%s\n' "$n" "${ip[$n]}" "${cidr[$n]}" "${want_nofile:+, nofile $want_nofile}"
done
for n in $nodes; do
	podman exec -i "$n" sh -c 'mkdir -p /etc/cni/net.d && cat >/etc/cni/net.d/10-mini-kcm.conflist' <<JSON
{
  "cniVersion": "0.4.0",
  "name": "mini-kcm",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${cidr[$n]}"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
	for m in $nodes; do
		[[ $m == "$n" ]] || podman exec "$n" ip route replace "${cidr[$m]}" via "${ip[$m]}"
	done
done
