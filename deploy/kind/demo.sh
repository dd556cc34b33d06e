#!/usr/bin/env bash
# Failover demo of mini-kcm on kind.
#
# 1. Creates (or reuses) a kind cluster whose kube-controller-manager runs without its
#    ReplicaSet, Deployment and Endpoints controllers (kind-config.yaml), and checks that.
# 2. Builds the image, loads it into the nodes, applies deploy/ (3 replicas in kube-system).
# 3. Applies deploy/sample/ (a Deployment and a Service), which only mini-kcm can roll out.
# 4. Deletes the leader pod (SIGTERM: it drains and releases the Lease) and times the
#    takeover, then kills the new leader's container (SIGKILL: the Lease must expire) and
#    times that takeover too.
# 5. Scales the sample app and shows the new leader reconciling it: ReplicaSet, pods and
#    Endpoints follow.
#
# Requires docker, kind and kubectl on PATH. Environment:
#   CLUSTER_NAME     kind cluster name (default mini-kcm); reused if it exists
#   KIND_NODE_IMAGE  node image (default: the kind release's own)
#   SKIP_BUILD=1     use the mini-kcm:dev image already in the local Docker
# Clean up with: kind delete cluster --name "${CLUSTER_NAME:-mini-kcm}"
set -euo pipefail

readonly CLUSTER_NAME=${CLUSTER_NAME:-mini-kcm}
# The image deploy/statefulset.yaml names; kind load makes it available on every node.
readonly IMAGE=mini-kcm:dev
readonly LEASE=mini-kube-controller-manager
readonly NS=kube-system
readonly DEMO_NS=mini-kcm-demo

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
readonly here repo

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# On any failure, say how to look and how to clean up.
on_exit() {
	local rc=$?
	((rc != 0)) || return 0
	printf '\nThe demo failed (exit %s). To look around:\n' "$rc" >&2
	printf '  kubectl --context kind-%s -n %s get pods,lease -o wide\n' "$CLUSTER_NAME" "$NS" >&2
	printf '  kubectl --context kind-%s -n %s logs -l app.kubernetes.io/name=mini-kcm --prefix --tail=50\n' "$CLUSTER_NAME" "$NS" >&2
	printf 'To clean up: kind delete cluster --name %s\n' "$CLUSTER_NAME" >&2
}
trap on_exit EXIT

# kc runs kubectl against the demo cluster only, whatever the current context is.
kc() { kubectl --context "kind-${CLUSTER_NAME}" "$@"; }

# now_ms prints the wall clock in milliseconds: bash 5's EPOCHREALTIME, else perl (macOS
# ships bash 3.2 and a date(1) without %N), else whole seconds.
now_ms() {
	if [[ -n ${EPOCHREALTIME:-} ]]; then
		local us=${EPOCHREALTIME/[.,]/}
		echo $((10#$us / 1000))
	elif command -v perl >/dev/null 2>&1; then
		perl -MTime::HiRes=time -e 'printf "%d\n", time() * 1000'
	else
		echo $(($(date +%s) * 1000))
	fi
}

# seconds_since START_MS prints the time since START_MS as seconds with milliseconds.
seconds_since() {
	local ms=$(($(now_ms) - $1))
	printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}

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

lease_holder() {
	kc -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true
}
has_leader() { [[ -n $(lease_holder) ]]; }

# wait_for_new_holder OLD TIMEOUT_SECONDS polls the Lease every 100ms until someone other
# than OLD holds it, and prints the new holder. A released Lease (empty holder) is not a
# takeover yet.
wait_for_new_holder() {
	local old=$1 deadline=$((SECONDS + $2)) holder
	while :; do
		holder=$(lease_holder)
		if [[ -n $holder && $holder != "$old" ]]; then
			echo "$holder"
			return 0
		fi
		((SECONDS < deadline)) || die "no new leader within $2s (still: '${holder}')"
		sleep 0.1
	done
}

# The identity is <hostname>_<uuid>, and a pod's hostname is its name.
pod_of() { echo "${1%%_*}"; }

ready_addresses() {
	kc -n "$DEMO_NS" get endpoints sample \
		-o jsonpath='{range .subsets[*].addresses[*]}{.ip}{"\n"}{end}' 2>/dev/null | grep -c . || true
}
has_ready_addresses() { [[ $(ready_addresses) -eq $1 ]]; }

kcm_has_our_flag() {
	local cmd
	cmd=$(kc -n kube-system get pods -l component=kube-controller-manager \
		-o jsonpath='{.items[*].spec.containers[*].command}' 2>/dev/null) || return 1
	[[ $cmd == *"--controllers=*,bootstrapsigner,tokencleaner,-replicaset-controller,-deployment-controller,-endpoints-controller,-endpointslice-controller"* ]]
}

show_leader() {
	kc -n "$NS" get lease "$LEASE" \
		-o jsonpath='{"    holder: "}{.spec.holderIdentity}{"\n    transitions: "}{.spec.leaseTransitions}{"\n    renewed: "}{.spec.renewTime}{"\n"}'
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
	die "kube-controller-manager does not run with --controllers=*,bootstrapsigner,tokencleaner,-replicaset-controller,-deployment-controller,-endpoints-controller,-endpointslice-controller; check kubeadmConfigPatches in $here/kind-config.yaml"
info "kube-controller-manager runs without its replicaset, deployment, endpoints and endpointslice controllers"

step "Image ${IMAGE}"
if [[ ${SKIP_BUILD:-} != 1 ]]; then
	# make image stamps the version information as make build does.
	make -C "$repo" image IMAGE="$IMAGE"
fi
kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"

step "Deploying mini-kcm (kubectl apply --server-side -k deploy/)"
existed=false
if kc -n "$NS" get statefulset mini-kcm >/dev/null 2>&1; then
	existed=true
fi
kc apply --server-side -k "$repo/deploy"
if $existed; then
	# Same tag, new image: restart the pods so that they run what was just loaded.
	kc -n "$NS" rollout restart statefulset/mini-kcm
fi
kc -n "$NS" rollout status statefulset/mini-kcm --timeout=180s
wait_for 60 has_leader || die "no replica acquired Lease ${NS}/${LEASE} within 60s"
kc -n "$NS" get pods -l app.kubernetes.io/name=mini-kcm -o wide

step "Deploying the sample app (kubectl apply --server-side -k deploy/sample/)"
# --force-conflicts: a re-run takes spec.replicas back from the earlier `kubectl scale`.
kc apply --server-side --force-conflicts -k "$repo/deploy/sample"
kc -n "$DEMO_NS" rollout status deployment/sample --timeout=300s
wait_for 60 has_ready_addresses 3 || die "Endpoints ${DEMO_NS}/sample did not list 3 ready addresses within 60s"
kc -n "$DEMO_NS" get deployment,replicaset,pods -o wide
kc -n "$DEMO_NS" get endpoints sample 2>/dev/null

step "Leader"
show_leader
leader=$(lease_holder)

step "Failover 1: graceful (delete the leader pod; it releases the Lease on SIGTERM)"
pod=$(pod_of "$leader")
info "deleting pod ${NS}/${pod}"
start=$(now_ms)
kc -n "$NS" delete pod "$pod" --wait=false
leader=$(wait_for_new_holder "$leader" 60)
graceful=$(seconds_since "$start")
info "new leader $(pod_of "$leader") (${leader}) after ${graceful}s"

step "Failover 2: crash (SIGKILL the leader's container; the Lease has to expire)"
pod=$(pod_of "$leader")
node=$(kc -n "$NS" get pod "$pod" -o jsonpath='{.spec.nodeName}')
# kind nodes are containers named after the node. `crictl stop --timeout 0` skips SIGTERM
# and kills at once: no drain, no release, as in a crash or an OOM kill.
container=$(docker exec "$node" crictl ps --quiet --name '^mini-kcm$' \
	--label "io.kubernetes.pod.name=${pod}" --label "io.kubernetes.pod.namespace=${NS}")
[[ -n $container ]] || die "no running mini-kcm container for pod ${pod} on node ${node}"
info "killing container ${container:0:13} of pod ${NS}/${pod} on node ${node}"
start=$(now_ms)
docker exec "$node" crictl stop --timeout 0 "$container" >/dev/null
leader=$(wait_for_new_holder "$leader" 90)
crash=$(seconds_since "$start")
info "new leader $(pod_of "$leader") (${leader}) after ${crash}s (about the 15s lease duration)"

step "The new leader reconciles: scaling the sample app to 5"
kc -n "$DEMO_NS" scale deployment/sample --replicas=5
kc -n "$DEMO_NS" rollout status deployment/sample --timeout=180s
wait_for 60 has_ready_addresses 5 || die "Endpoints ${DEMO_NS}/sample did not list 5 ready addresses within 60s"
kc -n "$DEMO_NS" get deployment,replicaset,pods -o wide
kc -n "$DEMO_NS" get endpoints sample 2>/dev/null
info "latest events written by mini-kcm's controllers (source, reason, object, message):"
kc -n "$DEMO_NS" get events --sort-by=.lastTimestamp --no-headers \
	-o custom-columns=SOURCE:.source.component,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message |
	grep -E '^(replicaset-controller|deployment-controller|endpoint-controller) ' | tail -n 15 || true
info "leader elections:"
kc -n "$NS" get events --field-selector "involvedObject.kind=Lease,involvedObject.name=${LEASE}" \
	--sort-by=.lastTimestamp -o custom-columns=TIME:.lastTimestamp,MESSAGE:.message

step "Summary"
info "graceful takeover: ${graceful}s    crash takeover: ${crash}s"
show_leader
info "clean up: kind delete cluster --name ${CLUSTER_NAME}"
