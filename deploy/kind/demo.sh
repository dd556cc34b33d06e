#!/usr/bin/env bash
# Failover demo of mini-kcm on kind.
#
# 1. Creates (or reuses) a kind cluster whose kube-controller-manager runs without its
#    ReplicaSet, Deployment, Endpoints and EndpointSlice controllers (kind-config.yaml),
#    and checks that.
# 2. Builds the image and loads it into the nodes.
# 3. Runs the failover demo that every cluster shares, deploy/demo/failover.sh: applies
#    deploy/ and deploy/sample/, deletes the leader pod (SIGTERM), kills the next
#    leader's container (SIGKILL), freezes the next one (SIGSTOP, then SIGCONT), times
#    each takeover and shows the sample app reconciled (see the top of that script).
#    The containers are signalled through kind's nodes (signal-container.sh).
#
# Requires docker, kind and kubectl on PATH. Environment:
#   CLUSTER_NAME     kind cluster name (default mini-kcm); reused if it exists
#   KIND_NODE_IMAGE  node image (default: the kind release's own)
#   SKIP_BUILD=1     use the image (deploy/image/'s) already in the local Docker
#   FREEZE=0         skip the freeze step
# Clean up with: kind delete cluster --name "${CLUSTER_NAME:-mini-kcm}"
set -euo pipefail

readonly CLUSTER_NAME=${CLUSTER_NAME:-mini-kcm}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
readonly here repo

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# The image every install runs, from its one setting (deploy/image/, which
# `make deploy-image IMAGE=...` sets), read from the static pod's rendering; the demo
# builds it and kind load makes it available on every node.
IMAGE=$(kubectl kustomize "$repo/deploy/static-pod/pod" | awk '$1 == "image:" { print $2; exit }')
readonly IMAGE
[[ -n $IMAGE ]] || die "kubectl kustomize $repo/deploy/static-pod/pod names no image"

# The kind cluster's kubeconfig for the shared demo, removed on exit.
kubeconfig=

# On any failure, say how to clean up (failover.sh says how to look around).
on_exit() {
	local rc=$?
	[[ -z $kubeconfig ]] || rm -f "$kubeconfig"
	((rc != 0)) || return 0
	printf 'The kind demo failed (exit %s). To clean up: kind delete cluster --name %s\n' "$rc" "$CLUSTER_NAME" >&2
}
trap on_exit EXIT

# kc runs kubectl against the demo cluster only, whatever the current context is.
kc() { kubectl --context "kind-${CLUSTER_NAME}" "$@"; }

# wait_for TIMEOUT_SECONDS COMMAND... retries COMMAND every half second and fails when it
# has not succeeded within the timeout.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 0.5
	done
}

kcm_has_our_flag() {
	local cmd
	cmd=$(kc -n kube-system get pods -l component=kube-controller-manager \
		-o jsonpath='{.items[*].spec.containers[*].command}' 2>/dev/null) || return 1
	[[ $cmd == *"--controllers=*,bootstrapsigner,tokencleaner,-deployment-controller,-endpoints-controller,-endpointslice-controller,-replicaset-controller"* ]]
}

step "Checking tools"
command -v docker >/dev/null 2>&1 || die "docker not found on PATH: install Docker (https://docs.docker.com/get-docker/)"
command -v kind >/dev/null 2>&1 || die "kind not found on PATH: install it (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
command -v kubectl >/dev/null 2>&1 || die "kubectl not found on PATH: install it (https://kubernetes.io/docs/tasks/tools/)"
docker info >/dev/null 2>&1 || die "docker is installed but its daemon is not reachable: start Docker, or check this user may use it"
info "docker, kind and kubectl found"

step "Cluster ${CLUSTER_NAME}"
clusters=$(kind get clusters 2>/dev/null || true)
if grep -qx "$CLUSTER_NAME" <<<"$clusters"; then
	info "reusing the existing kind cluster ${CLUSTER_NAME}"
else
	create=(kind create cluster --name "$CLUSTER_NAME" --config "$here/kind-config.yaml" --wait 180s)
	if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
		create+=(--image "$KIND_NODE_IMAGE")
	fi
	"${create[@]}"
fi
# Without this check a kind/kubeadm version whose config the patch does not match would
# leave two ReplicaSet controllers fighting over every pod.
wait_for 60 kcm_has_our_flag ||
	die "kube-controller-manager does not run with --controllers=*,bootstrapsigner,tokencleaner,-deployment-controller,-endpoints-controller,-endpointslice-controller,-replicaset-controller; check kubeadmConfigPatches in $here/kind-config.yaml"
info "kube-controller-manager runs without its replicaset, deployment, endpoints and endpointslice controllers"

step "Image ${IMAGE}"
if [[ ${SKIP_BUILD:-} != 1 ]]; then
	# make image stamps the version information as make build does.
	make -C "$repo" image IMAGE="$IMAGE"
fi
kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"

# The shared demo runs on this cluster only, whatever the current context is.
kubeconfig=$(mktemp)
kind get kubeconfig --name "$CLUSTER_NAME" >"$kubeconfig"
KUBECONFIG=$kubeconfig SIGNAL_CONTAINER=$here/signal-container.sh "$repo/deploy/demo/failover.sh"
info "clean up: kind delete cluster --name ${CLUSTER_NAME}"
