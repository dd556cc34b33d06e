#!/usr/bin/env bash
# The container signal hook of deploy/demo/failover.sh on kind:
#   signal-container.sh SIGNAL NODE NAMESPACE POD CONTAINER
# kind nodes are containers named after the node, running containerd with crictl.
# KILL stops the container at once through the runtime (`crictl stop --timeout 0` skips
# SIGTERM: no drain, no release, as in a crash or an OOM kill); STOP and CONT go to the
# container's main process, found with `crictl inspect` (pods share the node container's
# PID namespace). The node containers are docker's, or podman's under kind's podman
# provider (KIND_EXPERIMENTAL_PROVIDER=podman, or no docker but podman on PATH), as
# demo.sh chooses.
set -euo pipefail

(($# == 5)) || { echo "usage: $0 KILL|STOP|CONT NODE NAMESPACE POD CONTAINER" >&2; exit 2; }
sig=$1 node=$2 namespace=$3 pod=$4 name=$5
cli=docker
if [[ ${KIND_EXPERIMENTAL_PROVIDER:-} == podman ]] ||
	{ ! command -v docker >/dev/null 2>&1 && command -v podman >/dev/null 2>&1; }; then
	cli=podman
fi

container=$("$cli" exec "$node" crictl ps --quiet --name "^${name}\$" \
	--label "io.kubernetes.pod.name=${pod}" --label "io.kubernetes.pod.namespace=${namespace}")
[[ -n $container ]] || { echo "no running container ${name} of pod ${namespace}/${pod} on node ${node}" >&2; exit 1; }
case $sig in
KILL)
	"$cli" exec "$node" crictl stop --timeout 0 "$container" >/dev/null
	;;
STOP | CONT)
	pid=$("$cli" exec "$node" crictl inspect --output go-template --template '{{.info.pid}}' "$container")
	"$cli" exec "$node" kill -"$sig" "$pid"
	;;
*)
	echo "unknown signal ${sig}: want KILL, STOP or CONT" >&2
	exit 2
	;;
esac
printf '    %s: container %.13s of pod %s/%s on node %s\n' "$sig" "$container" "$namespace" "$pod" "$node"
