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
# Requires docker (or podman), kind and kubectl on PATH. Environment:
#   CLUSTER_NAME     kind cluster name (default mini-kcm); reused if it exists
#   KIND_NODE_IMAGE  node image (default: the kind release's own)
#   SKIP_BUILD=1     use the image (deploy/image/'s) already in the local Docker (or podman)
#   FREEZE=0         skip the freeze step
#   KIND_EXPERIMENTAL_PROVIDER=podman
#                    use kind's podman provider and podman for everything docker does;
#                    also chosen when docker is not on PATH and podman is. `make image`
#                    needs Docker: with podman, build the image into podman and set
#                    SKIP_BUILD=1, or give IMAGE_ARCHIVE
#   IMAGE_ARCHIVE    an image archive (docker-archive) holding the image, loaded with
#                    `kind load image-archive` instead of building; it may hold more
#                    images, which are loaded too
#   KIND_CONFIG      the kind config (default kind-config.yaml beside this script); it
#                    must keep that file's kube-controller-manager --controllers value
#   KIND_POST_CREATE a command run once the new cluster's nodes exist (CLUSTER_NAME and
#                    KUBECONFIG set), e.g. one laying a CNI when the config disables
#                    kind's; the script then waits for the nodes to be Ready
# make test-kind (hack/kind/run.sh) runs this script with podman and all of these.
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
	printf 'The kind demo failed (exit %s). To clean up: %skind delete cluster --name %s\n' "$rc" \
		"${KIND_EXPERIMENTAL_PROVIDER:+KIND_EXPERIMENTAL_PROVIDER=$KIND_EXPERIMENTAL_PROVIDER }" "$CLUSTER_NAME" >&2
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
# The container CLI: kind's provider, which signal-container.sh (run by failover.sh)
# chooses the same way.
if [[ ${KIND_EXPERIMENTAL_PROVIDER:-} == podman ]] ||
	{ ! command -v docker >/dev/null 2>&1 && command -v podman >/dev/null 2>&1; }; then
	cli=podman
	export KIND_EXPERIMENTAL_PROVIDER=podman
else
	cli=docker
fi
readonly cli
if [[ $cli == docker ]]; then
	command -v docker >/dev/null 2>&1 || die "docker not found on PATH: install Docker (https://docs.docker.com/get-docker/), or podman (then KIND_EXPERIMENTAL_PROVIDER=podman)"
fi
command -v kind >/dev/null 2>&1 || die "kind not found on PATH: install it (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
command -v kubectl >/dev/null 2>&1 || die "kubectl not found on PATH: install it (https://kubernetes.io/docs/tasks/tools/)"
if [[ $cli == docker ]]; then
	docker info >/dev/null 2>&1 || die "docker is installed but its daemon is not reachable: start Docker, or check this user may use it"
else
	podman info >/dev/null 2>&1 || die "podman info failed: run it to see why (kind's podman provider needs rootful podman or a working rootless setup)"
fi
info "$cli, kind and kubectl found"
kind_config=${KIND_CONFIG:-$here/kind-config.yaml}
readonly kind_config
[[ -r $kind_config ]] || die "KIND_CONFIG=$kind_config is not a readable file"

step "Cluster ${CLUSTER_NAME}"
clusters=$(kind get clusters 2>/dev/null || true)
if grep -qx "$CLUSTER_NAME" <<<"$clusters"; then
	info "reusing the existing kind cluster ${CLUSTER_NAME}"
else
	create=(kind create cluster --name "$CLUSTER_NAME" --config "$kind_config")
	# Without kind's CNI the nodes are Ready only after the hook: wait for them below.
	[[ -n ${KIND_POST_CREATE:-} ]] || create+=(--wait 180s)
	if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
		create+=(--image "$KIND_NODE_IMAGE")
	fi
	"${create[@]}"
	if [[ -n ${KIND_POST_CREATE:-} ]]; then
		info "running KIND_POST_CREATE: $KIND_POST_CREATE"
		# env: CLUSTER_NAME is readonly here, and exported only when it came from outside.
		env CLUSTER_NAME="$CLUSTER_NAME" $KIND_POST_CREATE || die "KIND_POST_CREATE ($KIND_POST_CREATE) failed"
		kc wait --for=condition=Ready node --all --timeout=180s
	fi
fi
# Without this check a kind/kubeadm version whose config the patch does not match would
# leave two ReplicaSet controllers fighting over every pod.
wait_for 60 kcm_has_our_flag ||
	die "kube-controller-manager does not run with --controllers=*,bootstrapsigner,tokencleaner,-deployment-controller,-endpoints-controller,-endpointslice-controller,-replicaset-controller; check kubeadmConfigPatches in $kind_config"
info "kube-controller-manager runs without its replicaset, deployment, endpoints and endpointslice controllers"

step "Image ${IMAGE}"
if [[ -n ${IMAGE_ARCHIVE:-} ]]; then
	[[ -r $IMAGE_ARCHIVE ]] || die "IMAGE_ARCHIVE=$IMAGE_ARCHIVE is not a readable file"
	kind load image-archive "$IMAGE_ARCHIVE" --name "$CLUSTER_NAME"
elif [[ $cli == docker ]]; then
	if [[ ${SKIP_BUILD:-} != 1 ]]; then
		# make image stamps the version information as make build does.
		make -C "$repo" image IMAGE="$IMAGE"
	fi
	kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"
else
	# kind's `load docker-image` runs the docker CLI whatever the provider: save the
	# image from podman and load the archive.
	[[ ${SKIP_BUILD:-} == 1 ]] ||
		die "make image needs Docker: with podman, build $IMAGE into podman and set SKIP_BUILD=1, or set IMAGE_ARCHIVE"
	archive=$(mktemp)
	rm -f "$archive" # podman save refuses to write over a file
	podman save --format docker-archive -o "$archive" "$IMAGE" ||
		{ rm -f "$archive"; die "podman save $IMAGE failed: is it in podman's storage (podman images)?"; }
	kind load image-archive "$archive" --name "$CLUSTER_NAME" || { rm -f "$archive"; die "kind load image-archive failed"; }
	rm -f "$archive"
fi

# The shared demo runs on this cluster only, whatever the current context is.
kubeconfig=$(mktemp)
kind get kubeconfig --name "$CLUSTER_NAME" >"$kubeconfig"
KUBECONFIG=$kubeconfig SIGNAL_CONTAINER=$here/signal-container.sh "$repo/deploy/demo/failover.sh"
info "clean up: ${KIND_EXPERIMENTAL_PROVIDER:+KIND_EXPERIMENTAL_PROVIDER=$KIND_EXPERIMENTAL_PROVIDER }kind delete cluster --name ${CLUSTER_NAME}"
