#!/usr/bin/env bash
# make test-kind: deploy/kind/demo.sh, the failover demo users run on kind, run under
# kind's podman provider on this machine, from a node image built here (no registry,
# no Docker), and everything it started removed again, also when it fails.
#
#  1. Installs podman and mmdebstrap from Debian's archive when missing (root only).
#  2. Builds what is missing from the binary cache ($MINI_KCM_BIN_DIR, as
#     hack/build-control-plane.sh): the control plane, and kubeadm, kind and crictl
#     (hack/build-control-plane.sh --kind). bin/mini-kcm is make test-kind's (make build).
#  3. Builds the kind node image (build-node-image.sh) into the cache beside the
#     binaries, $MINI_KCM_BIN_DIR/../kind, when missing: its file name carries a hash of
#     hack/kind/node/ and build-node-image.sh, so changing them builds a new one.
#  4. podman-imports it, writes the image archive the demo loads (mini-kcm from
#     bin/mini-kcm, and the sample server as the agnhost image deploy/sample/ names, with
#     hack/tools/images' node-images), and the kind config: deploy/kind/kind-config.yaml
#     with this harness's additions appended (no kindnetd, no CoreDNS, cgroup v1).
#  5. Runs deploy/kind/demo.sh with podman (KIND_EXPERIMENTAL_PROVIDER=podman), that
#     config, image and archive, and cni.sh as its post-create hook.
#  6. On exit: deletes the cluster, the kind podman network, the node image from podman's
#     storage (the cache keeps its tarball), the iptables chains netavark created, the
#     /run/netns mount and /lib/modules when this run made them; then checks that none is
#     left and fails if one is.
#
# Podman runs with CONTAINERS_CONF pointing at a file of this run's (never
# /etc/containers/containers.conf): the nodes get default_ulimits within what a host
# without CAP_SYS_RESOURCE in its bounding set may grant (runc otherwise fails with
# "error setting rlimits for ready process"); cni.sh checks the nodes got them.
#
# Needs root (rootful podman, mmdebstrap, chroot). Environment: MINI_KCM_BIN_DIR (the
# binary cache), KIND_CLUSTER_NAME (default mini-kcm-test; the run refuses to touch an
# existing cluster of that name), DEBIAN_MIRROR (default http://deb.debian.org/debian),
# FREEZE=0 (as demo.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
kube_version=v1.37.2
bin_dir=${MINI_KCM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mini-kcm/${kube_version}/bin}
cache_dir=$(dirname "$bin_dir")/kind
cluster=${KIND_CLUSTER_NAME:-mini-kcm-test}
# The ulimits of the node containers: at most the hard limits this host grants.
nofile=20000 nproc=4096

step() { printf '\n\033[1m==> make test-kind: %s\033[0m (%ss)\n' "$*" "$((SECONDS - start))"; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}
start=$SECONDS

((EUID == 0)) || die "make test-kind needs root: kind's podman provider runs rootful podman here, and the node image build runs mmdebstrap and chroot. Run it (or make test-long, which runs it) as root"
[[ -x $repo/bin/mini-kcm ]] || die "$repo/bin/mini-kcm is missing: run make build (make test-kind does)"
# hard_limit_at_least OPTION WANT: the shell's hard limit (ulimit OPTION) is WANT or more.
hard_limit_at_least() {
	local got
	got=$(ulimit -H "$1")
	[[ $got == unlimited ]] || ((got >= $2))
}
hard_limit_at_least -n "$nofile" ||
	die "this shell's hard limit of open files is $(ulimit -Hn), below the $nofile the kind nodes get: raise it (ulimit -Hn $nofile as root)"
hard_limit_at_least -u "$nproc" ||
	die "this shell's hard limit of processes is $(ulimit -Hu), below the $nproc the kind nodes get: raise it (ulimit -Hu $nproc as root)"

step "host packages"
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v iptables >/dev/null || missing+=(iptables)
if ((${#missing[@]})); then
	command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get: install them with this system's package manager"
	echo "    installing ${missing[*]} from Debian's archive"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
echo "    podman $(podman version --format '{{.Client.Version}}'), mmdebstrap $(mmdebstrap --version | awk '{ print $2 }')"

step "binaries in $bin_dir"
"$repo/hack/build-control-plane.sh" >/dev/null
"$repo/hack/build-control-plane.sh" --kind >/dev/null
export PATH=$bin_dir:$PATH
kind_version=$(kind version)
[[ $kind_version == "kind v0.33.0 "* ]] || die "$bin_dir/kind is '$kind_version', not v0.33.0 (hack/tools/kind pins it): remove it and rerun"
echo "    $kind_version"

step "kind node image"
mkdir -p "$cache_dir"
key=$(cd "$here" && find node build-node-image.sh -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
node_tar=$cache_dir/node-$kube_version-$key.tar
if [[ -f $node_tar ]]; then
	echo "    cached: $node_tar"
else
	echo "    building $node_tar (about 3-5 minutes on 2 cores; once, until hack/kind/node or the build script changes)"
	for old in "$cache_dir"/node-*.tar; do
		[[ -e $old ]] || continue
		echo "    removing the outdated $old"
		rm -f "$old"
	done
	"$here/build-node-image.sh" "$node_tar"
fi

export KIND_EXPERIMENTAL_PROVIDER=podman
# Before the cleanup trap: a cluster that was there is not this run's to delete.
if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
	die "a kind cluster named $cluster exists already (podman provider): delete it (KIND_EXPERIMENTAL_PROVIDER=podman kind delete cluster --name $cluster) or set KIND_CLUSTER_NAME"
fi

# From here on, everything this run starts is removed on exit. Record what was there
# before, so that cleanup removes only what this run made.
work=$(mktemp -d)
node_image=localhost/mini-kcm-kind-node:$kube_version-$key
lib_modules_made= netns_was_mounted= kind_network_existed= node_image_imported= cleanup_started=
mountpoint -q /run/netns 2>/dev/null && netns_was_mounted=1
# netavark_chains prints "COMMAND TABLE CHAIN" for every netavark chain.
netavark_chains() {
	local cmd table
	for cmd in iptables ip6tables; do
		command -v "$cmd" >/dev/null || continue
		for table in filter nat; do
			"$cmd" -t "$table" -S 2>/dev/null | awk -v c="$cmd" -v t="$table" '$1 == "-N" && $2 ~ /^NETAVARK/ { print c, t, $2 }'
		done
	done
}
chains_before=$(netavark_chains)
overlay_mounts() { grep -c ' /var/lib/containers/storage/overlay' /proc/mounts || true; }
overlay_mounts_before=$(overlay_mounts)

export CONTAINERS_CONF=$work/containers.conf
cat >"$CONTAINERS_CONF" <<EOF
# make test-kind's (hack/kind/run.sh), for this run only.
[containers]
default_ulimits = [
  "nofile=$nofile:$nofile",
  "nproc=$nproc:$nproc",
]
EOF
podman network exists kind && kind_network_existed=1
# kind gives each node an anonymous volume for /var, which kind delete removes.
volumes_before=$(podman volume ls -q | sort)

# leftovers prints what this run may have left behind, one line each.
leftovers() {
	podman ps -a --filter "label=io.x-k8s.kind.cluster=$cluster" --format 'container {{.Names}}'
	[[ -n $kind_network_existed ]] || ! podman network exists kind || echo "podman network kind"
	[[ -z $node_image_imported ]] || ! podman image exists "$node_image" || echo "image $node_image"
	comm -13 <(echo "$volumes_before") <(podman volume ls -q | sort) | sed -n 's/^./podman volume &/p'
	comm -13 <(sort <<<"$chains_before") <(netavark_chains | sort) | sed -n 's/^./chain &/p'
	# A /run/netns holding namespaces is in use by someone else (ip netns, another test).
	[[ -n $netns_was_mounted ]] || ! mountpoint -q /run/netns 2>/dev/null || [[ -n $(ls -A /run/netns) ]] ||
		echo "mount /run/netns"
	[[ -z $lib_modules_made || ! -e /lib/modules ]] || echo "directory /lib/modules"
	local n
	n=$(overlay_mounts)
	((n <= overlay_mounts_before)) || echo "$((n - overlay_mounts_before)) more podman overlay mounts than before the run (grep /var/lib/containers/storage/overlay /proc/mounts)"
}

cleanup() {
	local rc=$? cmd table chain rule
	[[ -z $cleanup_started ]] || return
	cleanup_started=1
	set +e
	step "cleaning up"
	if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		kind delete cluster --name "$cluster" --kubeconfig "$work/kubeconfig"
	fi
	podman ps -aq --filter "label=io.x-k8s.kind.cluster=$cluster" | xargs -r podman rm --force --volumes >/dev/null
	[[ -n $kind_network_existed ]] || ! podman network exists kind || podman network rm kind >/dev/null
	[[ -z $node_image_imported ]] || podman rmi --force "$node_image" >/dev/null
	# netavark leaves its generic chains (and the jumps to them) when the last network
	# goes: remove those this run created.
	while read -r cmd table chain; do
		[[ -n $chain ]] || continue
		"$cmd" -t "$table" -S | awk -v c="$chain" '$1 == "-A" && / -j / { for (i = 1; i < NF; i++) if ($i == "-j" && $(i + 1) == c) { print; next } }' |
			while read -r rule; do
				eval "\"\$cmd\" -t \"\$table\" -D ${rule#-A }"
			done
		"$cmd" -t "$table" -F "$chain"
	done < <(comm -13 <(sort <<<"$chains_before") <(netavark_chains | sort))
	while read -r cmd table chain; do
		[[ -z $chain ]] || "$cmd" -t "$table" -X "$chain"
	done < <(comm -13 <(sort <<<"$chains_before") <(netavark_chains | sort))
	# podman bind-mounts /run/netns on itself for its network namespaces.
	# Not when it holds namespaces: then another user (ip netns, another test) shares it.
	if [[ -z $netns_was_mounted ]] && mountpoint -q /run/netns 2>/dev/null; then
		if [[ -z $(ls -A /run/netns) ]]; then
			umount /run/netns
		else
			echo "    leaving /run/netns mounted: it holds namespaces not of this run ($(ls /run/netns | tr '\n' ' '))"
		fi
	fi
	[[ -z $lib_modules_made ]] || rmdir /lib/modules
	local left
	left=$(leftovers)
	# Last: podman reads CONTAINERS_CONF, which lives in $work.
	rm -rf "$work"
	if [[ -n $left ]]; then
		printf 'error: make test-kind left behind (remove by hand):\n%s\n' "$left" >&2
		rc=1
	else
		echo "    nothing left behind: no kind container, volume, network, image, netavark chain or mount of this run"
	fi
	if ((rc == 0)); then
		step "passed"
	else
		printf '\nmake test-kind FAILED (exit %s) after %ss; the output above says why\n' "$rc" "$((SECONDS - start))" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# kind's podman provider always bind-mounts /lib/modules into the nodes, and podman
# fails on a missing source; a kernel without modules (some VMs) has no such directory.
if [[ ! -e /lib/modules ]]; then
	mkdir /lib/modules
	lib_modules_made=1
	echo "    made an empty /lib/modules for kind's bind mount (removed on exit)"
fi

node_image_imported=1
echo "    importing $node_tar as $node_image"
podman import --quiet \
	--change 'ENV container=docker' \
	--change 'STOPSIGNAL SIGRTMIN+3' \
	--change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
	"$node_tar" "$node_image" >/dev/null

step "the demo's images and kind config"
# The names the manifests use, spelled out in full as containerd's CRI looks them up
# (mini-kcm:dev is docker.io/library/mini-kcm:dev).
full_name() {
	local first=${1%%/*}
	if [[ $1 != */* ]]; then
		echo "docker.io/library/$1"
	elif [[ $first == *.* || $first == *:* || $first == localhost ]]; then
		echo "$1"
	else
		echo "docker.io/$1"
	fi
}
image=$(kubectl kustomize "$repo/deploy/static-pod/pod" | awk '$1 == "image:" { print $2; exit }')
sample_image=$(kubectl kustomize "$repo/deploy/sample" | awk '$1 == "image:" { print $2; exit }')
[[ -n $image && -n $sample_image ]] || die "could not read the images of deploy/static-pod/pod and deploy/sample"
"$bin_dir/node-images" --out "$work/images.tar" \
	"$(full_name "$image")=$repo/bin/mini-kcm" "$(full_name "$sample_image")=$bin_dir/sample-server"
echo "    $image from bin/mini-kcm, $sample_image from hack/tools/images' sample server"

# deploy/kind/kind-config.yaml, as users run it, plus what this harness needs. Appending
# to its kubeadmConfigPatches list is right only while that list ends the file and the
# file sets no networking: check both rather than produce a config kind reads otherwise.
user_config=$repo/deploy/kind/kind-config.yaml
last_key=$(grep -E '^[a-zA-Z]' "$user_config" | tail -1)
[[ $last_key == "kubeadmConfigPatches:" ]] && ! grep -q '^networking:' "$user_config" ||
	die "$user_config no longer ends with its kubeadmConfigPatches list, or sets networking: update how hack/kind/run.sh appends to it"
{
	cat "$user_config"
	cat <<'EOF'
# Appended by hack/kind/run.sh (make test-kind). The node image has no CoreDNS image
# (the demo needs no DNS) and skips kubeadm's preflight, as the run that proved this setup did.
- |
  apiVersion: kubeadm.k8s.io/v1beta4
  kind: InitConfiguration
  skipPhases:
  - preflight
  - addon/coredns
EOF
	if [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs ]]; then
		cat <<'EOF'
# This host mounts cgroup v1, which kubelet v1.35+ refuses unless told otherwise.
- |
  apiVersion: kubelet.config.k8s.io/v1beta1
  kind: KubeletConfiguration
  failCgroupV1: false
EOF
	fi
	cat <<'EOF'
# No kindnetd image: cni.sh lays a bridge CNI config and node-to-node routes.
networking:
  disableDefaultCNI: true
EOF
} >"$work/kind-config.yaml"

step "deploy/kind/demo.sh with podman"
KUBECONFIG=$work/kubeconfig CLUSTER_NAME=$cluster KIND_CONFIG=$work/kind-config.yaml \
	KIND_NODE_IMAGE=$node_image IMAGE_ARCHIVE=$work/images.tar \
	KIND_POST_CREATE="$here/cni.sh" EXPECT_NOFILE=$nofile \
	"$repo/deploy/kind/demo.sh"
