#!/usr/bin/env bash
# The failover demo of mini-kcm on any cluster whose nodes already have the image: the
# steps after "there is a cluster and the image is on its nodes". deploy/kind/demo.sh
# calls it on kind; the real-node e2e suite (make demo-node) calls it on its own node.
#
# 1. Applies the mini-kcm install (deploy/, 3 replicas in kube-system) and the sample app
#    (deploy/sample/, a Deployment and a Service only mini-kcm can roll out), and waits
#    for the rollout, the Lease and the sample's Endpoints.
# 2. Graceful: deletes the leader pod (SIGTERM through the kubelet: the leader drains its
#    controllers and releases the Lease) and times the takeover.
# 3. Crash: SIGKILLs the new leader's container (nothing is released: the Lease must
#    expire) and times the takeover.
# 4. Freeze (unless FREEZE=0): SIGSTOPs the leader's process, times the takeover, then
#    SIGCONTs it: it finds the Lease in other hands and steps down into a standby, with
#    no exit and no restart (frozen_leader_restarts counts any the kubelet made).
# 5. Scales the sample app to 5 and shows the new leader reconciling it: ReplicaSet, pods,
#    Endpoints and EndpointSlices follow.
#
# Environment (in):
#   KUBECONFIG            required: the cluster to run on. Its current context is used.
#   SIGNAL_CONTAINER      required: an executable the script runs as
#                           "$SIGNAL_CONTAINER" SIGNAL NODE NAMESPACE POD CONTAINER
#                         to deliver SIGNAL (KILL, STOP or CONT) to the main process of
#                         that container on that node, the way the runtime would (KILL
#                         may stop the container through the runtime instead). It exits
#                         0 once the signal is delivered. deploy/kind/signal-container.sh
#                         is kind's (docker exec NODE crictl ...).
#   MINI_KCM_KUSTOMIZATION  the install to apply (default deploy/; an overlay of it that
#                         sets the image, or deploy/sharded is not for this demo).
#   SAMPLE_KUSTOMIZATION  the sample app to apply (default deploy/sample/).
#   FREEZE=0              skips step 4.
#   RESULTS_FILE          if set, gets one "name=value" line per measurement:
#                         graceful_takeover_ms, crash_takeover_ms, freeze_takeover_ms,
#                         frozen_leader_restarts, lease_duration_s, and frozen_holder and
#                         frozen_at_ms (its identity, the SIGSTOP's wall clock in Unix
#                         ms) for checking the frozen leader's writes in an audit log.
# Exit code (out): 0 when every step did what it says, 1 (with a message on stderr and
# hints to look around) when one did not.
set -euo pipefail

: "${KUBECONFIG:?set KUBECONFIG to the kubeconfig of the cluster to run the demo on}"
: "${SIGNAL_CONTAINER:?set SIGNAL_CONTAINER to a command that signals a container (see the top of this script)}"
export KUBECONFIG

readonly LEASE=mini-kube-controller-manager
readonly NS=kube-system
readonly DEMO_NS=mini-kcm-demo

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
deploy=$(cd "$here/.." && pwd)
readonly here deploy
readonly MINI_KCM_KUSTOMIZATION=${MINI_KCM_KUSTOMIZATION:-$deploy}
readonly SAMPLE_KUSTOMIZATION=${SAMPLE_KUSTOMIZATION:-$deploy/sample}

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# On any failure, say how to look around.
on_exit() {
	local rc=$?
	((rc != 0)) || return 0
	printf '\nThe failover demo failed (exit %s). To look around:\n' "$rc" >&2
	printf '  KUBECONFIG=%s kubectl -n %s get pods,lease -o wide\n' "$KUBECONFIG" "$NS" >&2
	printf '  KUBECONFIG=%s kubectl -n %s logs -l app.kubernetes.io/name=mini-kcm --prefix --tail=50\n' "$KUBECONFIG" "$NS" >&2
}
trap on_exit EXIT

kc() { kubectl "$@"; }

result() {
	if [[ -n ${RESULTS_FILE:-} ]]; then
		printf '%s=%s\n' "$1" "$2" >>"$RESULTS_FILE"
	fi
}

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

# as_seconds MS prints MS as seconds with milliseconds.
as_seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

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

restarts_of() {
	kc -n "$NS" get pod "$1" -o jsonpath='{.status.containerStatuses[?(@.name=="mini-kcm")].restartCount}'
}

node_of() {
	local node
	node=$(kc -n "$NS" get pod "$1" -o jsonpath='{.spec.nodeName}')
	[[ -n $node ]] || die "pod ${NS}/${1} is on no node"
	echo "$node"
}

# signal SIGNAL POD NODE delivers SIGNAL to the mini-kcm container of POD on NODE through
# the caller's hook. The callers look the node up before they start a clock: a kubectl
# call added about half a second to the takeovers measured on a loaded real node.
signal() {
	local sig=$1 pod=$2 node=$3
	"$SIGNAL_CONTAINER" "$sig" "$node" "$NS" "$pod" mini-kcm ||
		die "$SIGNAL_CONTAINER $sig $node $NS $pod mini-kcm failed"
}

ready_addresses() {
	kc -n "$DEMO_NS" get endpoints sample \
		-o jsonpath='{range .subsets[*].addresses[*]}{.ip}{"\n"}{end}' 2>/dev/null | grep -c . || true
}
has_ready_addresses() { [[ $(ready_addresses) -eq $1 ]]; }

ready_slice_endpoints() {
	kc -n "$DEMO_NS" get endpointslices -l kubernetes.io/service-name=sample \
		-o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' 2>/dev/null | grep -c . || true
}
has_ready_slice_endpoints() { [[ $(ready_slice_endpoints) -eq $1 ]]; }

all_replicas_ready() {
	[[ $(kc -n "$NS" get statefulset mini-kcm -o jsonpath='{.status.readyReplicas}') == 3 ]]
}

show_leader() {
	kc -n "$NS" get lease "$LEASE" \
		-o jsonpath='{"    holder: "}{.spec.holderIdentity}{"\n    transitions: "}{.spec.leaseTransitions}{"\n    renewed: "}{.spec.renewTime}{"\n"}'
}

step "Deploying mini-kcm (kubectl apply --server-side -k ${MINI_KCM_KUSTOMIZATION})"
existed=false
if kc -n "$NS" get statefulset mini-kcm >/dev/null 2>&1; then
	existed=true
fi
kc apply --server-side -k "$MINI_KCM_KUSTOMIZATION"
if $existed; then
	# Same tag, maybe a new image: restart the pods so that they run what is on the nodes.
	kc -n "$NS" rollout restart statefulset/mini-kcm
fi
kc -n "$NS" rollout status statefulset/mini-kcm --timeout=180s
wait_for 60 has_leader || die "no replica acquired Lease ${NS}/${LEASE} within 60s"
kc -n "$NS" get pods -l app.kubernetes.io/name=mini-kcm -o wide
lease_duration=$(kc -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.leaseDurationSeconds}')
result lease_duration_s "$lease_duration"

step "Deploying the sample app (kubectl apply --server-side -k ${SAMPLE_KUSTOMIZATION})"
# --force-conflicts: a re-run takes spec.replicas back from the earlier `kubectl scale`.
kc apply --server-side --force-conflicts -k "$SAMPLE_KUSTOMIZATION"
kc -n "$DEMO_NS" rollout status deployment/sample --timeout=300s
wait_for 60 has_ready_addresses 3 || die "Endpoints ${DEMO_NS}/sample did not list 3 ready addresses within 60s"
kc -n "$DEMO_NS" get deployment,replicaset,pods -o wide
kc -n "$DEMO_NS" get endpoints,endpointslices 2>/dev/null

step "Leader"
show_leader
leader=$(lease_holder)

step "Failover 1: graceful (delete the leader pod; it releases the Lease on SIGTERM)"
pod=$(pod_of "$leader")
info "deleting pod ${NS}/${pod}"
start=$(now_ms)
kc -n "$NS" delete pod "$pod" --wait=false
leader=$(wait_for_new_holder "$leader" 60)
graceful=$(($(now_ms) - start))
result graceful_takeover_ms "$graceful"
info "new leader $(pod_of "$leader") (${leader}) after $(as_seconds "$graceful")s"

step "Failover 2: crash (SIGKILL the leader's container; the Lease has to expire)"
pod=$(pod_of "$leader")
node=$(node_of "$pod")
info "killing the mini-kcm container of pod ${NS}/${pod}"
start=$(now_ms)
signal KILL "$pod" "$node"
leader=$(wait_for_new_holder "$leader" 90)
crash=$(($(now_ms) - start))
result crash_takeover_ms "$crash"
info "new leader $(pod_of "$leader") (${leader}) after $(as_seconds "$crash")s (the ${lease_duration}s lease duration after the last renewal, plus up to a retry period)"

freeze=
if [[ ${FREEZE:-1} != 0 ]]; then
	step "Failover 3: freeze (SIGSTOP the leader's process; SIGCONT it after the takeover)"
	# The earlier victims first come back, so that the frozen leader has standbys.
	wait_for 120 all_replicas_ready || die "the StatefulSet did not get 3 ready replicas back within 120s"
	frozen=$(pod_of "$leader")
	restarts=$(restarts_of "$frozen")
	node=$(node_of "$frozen")
	info "freezing the mini-kcm process of pod ${NS}/${frozen}"
	start=$(now_ms)
	result frozen_holder "$leader"
	leader_before_freeze=$leader
	result frozen_at_ms "$start"
	signal STOP "$frozen" "$node"
	leader=$(wait_for_new_holder "$leader" 90)
	freeze=$(($(now_ms) - start))
	result freeze_takeover_ms "$freeze"
	info "new leader $(pod_of "$leader") (${leader}) after $(as_seconds "$freeze")s; resuming ${frozen}"
	signal CONT "$frozen" "$node"
	# The resumed process writes nothing (its fence closed by its clock while it was
	# frozen), finds the Lease in other hands at its next renewal, drains and stays up
	# as a standby: no restart.
	# It records "<identity> stopped leading" on the Lease as it steps down.
	frozen_holder=$leader_before_freeze
	stepped_down() {
		local messages
		messages=$(kc -n "$NS" get events --field-selector "involvedObject.kind=Lease,involvedObject.name=${LEASE}" \
			-o jsonpath='{range .items[*]}{.message}{"\n"}{end}') || return 1
		[[ $messages == *"${frozen_holder} stopped leading"* ]] &&
			[[ $(kc -n "$NS" get pod "$frozen" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
	}
	wait_for 90 stepped_down || die "the resumed old leader ${frozen} did not step down to a ready standby within 90s"
	result frozen_leader_restarts "$(($(restarts_of "$frozen") - restarts))"
	info "${frozen} stepped down on resuming and stands by again (restarts: $(restarts_of "$frozen"), as before)"
fi

step "The new leader reconciles: scaling the sample app to 5"
kc -n "$DEMO_NS" scale deployment/sample --replicas=5
kc -n "$DEMO_NS" rollout status deployment/sample --timeout=180s
wait_for 60 has_ready_addresses 5 || die "Endpoints ${DEMO_NS}/sample did not list 5 ready addresses within 60s"
wait_for 60 has_ready_slice_endpoints 5 || die "the EndpointSlices of ${DEMO_NS}/sample did not list 5 ready endpoints within 60s"
kc -n "$DEMO_NS" get deployment,replicaset,pods -o wide
kc -n "$DEMO_NS" get endpoints,endpointslices 2>/dev/null
info "latest events written by mini-kcm's controllers (source, reason, object, message):"
kc -n "$DEMO_NS" get events --sort-by=.lastTimestamp --no-headers \
	-o custom-columns=SOURCE:.source.component,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message |
	grep -E '^(replicaset-controller|deployment-controller|endpoint-controller|endpoint-slice-controller) ' | tail -n 15 || true
info "leader elections:"
kc -n "$NS" get events --field-selector "involvedObject.kind=Lease,involvedObject.name=${LEASE}" \
	--sort-by=.lastTimestamp -o custom-columns=TIME:.lastTimestamp,MESSAGE:.message

step "Summary"
summary="graceful takeover: $(as_seconds "$graceful")s    crash takeover: $(as_seconds "$crash")s"
if [[ -n $freeze ]]; then
	summary+="    freeze takeover: $(as_seconds "$freeze")s"
fi
info "$summary"
show_leader
