#!/usr/bin/env bash
# The container signal hook of deploy/demo/failover.sh on the local node of
# test/e2e/node (make demo-node):
#   signal-container.sh SIGNAL NODE NAMESPACE POD CONTAINER
# The node's containerd listens on a socket of the test's run directory, which the test
# passes in MINI_KCM_NODE_CONTAINERD; the container is found from the pod's status with
# kubectl (KUBECONFIG, as the demo script exports it). Every signal goes through the
# runtime, `ctr task kill`, to the container's main process: KILL is a crash (no
# SIGTERM, no drain, no release), STOP and CONT freeze and resume it. There is one node,
# so NODE is only checked against the pod's.
set -euo pipefail

(($# == 5)) || { echo "usage: $0 KILL|STOP|CONT NODE NAMESPACE POD CONTAINER" >&2; exit 2; }
: "${MINI_KCM_NODE_CONTAINERD:?set MINI_KCM_NODE_CONTAINERD to the containerd socket of the node (the test sets it)}"
sig=$1 node=$2 namespace=$3 pod=$4 name=$5

case $sig in
KILL | STOP | CONT) ;;
*)
	echo "unknown signal ${sig}: want KILL, STOP or CONT" >&2
	exit 2
	;;
esac

container=$(kubectl -n "$namespace" get pod "$pod" \
	-o jsonpath="{.spec.nodeName} {.status.containerStatuses[?(@.name==\"${name}\")].containerID}")
read -r on id <<<"$container"
[[ $on == "$node" ]] || { echo "pod ${namespace}/${pod} is on node '${on}', not ${node}" >&2; exit 1; }
id=${id#containerd://}
[[ -n $id ]] || { echo "pod ${namespace}/${pod} has no container ${name} with an ID" >&2; exit 1; }
ctr --address "$MINI_KCM_NODE_CONTAINERD" --namespace k8s.io task kill --signal "SIG${sig}" "$id"
printf '    %s: container %.13s of pod %s/%s on node %s\n' "$sig" "$id" "$namespace" "$pod" "$node"
