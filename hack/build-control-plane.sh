#!/usr/bin/env bash
# Builds the real control plane used by tests, benchmarks and `make run`: etcd,
# kube-apiserver, kube-scheduler, kube-controller-manager (which e2e suites and
# benchmarks run beside mini-kcm) and the KWOK fake kubelet, all from source through the
# Go module proxy; and what the local node (test/e2e/node) runs: kubelet, kube-proxy,
# kubectl (which applies deploy/ with its built-in kustomize, as users do), and the
# image tools of hack/tools/images (the pause and sample-server programs, node-images).
# It always builds all of them: whatever `make test` needs, it builds.
# `--list` prints their names (test/controlplane checks them against what it launches).
#
# Binaries are cached outside the checkout, keyed by version, and only missing ones are
# built, so a warm run costs nothing. Override the cache with MINI_KCM_BIN_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kube_version=v1.37.2
bin_dir=${MINI_KCM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mini-kcm/${kube_version}/bin}

# build NAME MODULE_DIR PACKAGE
build() {
	local name=$1 module=$2 pkg=$3 ldflags='-s -w'
	if [[ $module == kube ]]; then
		# Stamp the version, as the upstream release build does, so /version tells the truth.
		ldflags+=" -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	fi
	if [[ -x "$bin_dir/$name" ]]; then
		return
	fi
	local start=$SECONDS
	echo ">> building $name from $pkg" >&2
	# Build into a temp name and rename, so an interrupted build never leaves a
	# half-written binary that a later run would trust.
	(cd "$here/tools/$module" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$bin_dir/.$name.tmp" "$pkg")
	mv "$bin_dir/.$name.tmp" "$bin_dir/$name"
	echo ">> built $name in $((SECONDS - start))s" >&2
}

binaries=(etcd kube-apiserver kube-scheduler kwok kube-controller-manager
	kubelet kube-proxy kubectl pause sample-server node-images)
if [[ "${1:-}" == --list ]]; then
	printf '%s\n' "${binaries[@]}"
	exit 0
fi
mkdir -p "$bin_dir"
missing=()
for name in "${binaries[@]}"; do
	[[ -x "$bin_dir/$name" ]] || missing+=("$name")
done
if ((${#missing[@]} == 0)); then
	echo "$bin_dir"
	exit 0
fi

# Two builds at once (two terminals, make -j) would only compete for the CPU; the
# second waits for the first and then finds the binaries built.
if command -v flock >/dev/null; then
	exec 9>"$bin_dir/.build.lock"
	if ! flock -n 9; then
		echo ">> another build of the control plane is running; waiting for it" >&2
		flock 9
	fi
fi

total_start=$SECONDS
echo ">> control plane binaries missing from $bin_dir: ${missing[*]}" >&2
estimate="a minute or two per binary"
if [[ " ${missing[*]} " == *" kube-apiserver "* ]]; then
	estimate="about 13 minutes on 2 cores, 8 of them for kube-apiserver"
fi
echo ">> building them from source through the Go module proxy, once ($estimate);" >&2
echo ">> later runs reuse them" >&2

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver
build kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager
# The node's binaries reuse most of the packages built above: about a minute each.
build kubelet kube k8s.io/kubernetes/cmd/kubelet
build kube-proxy kube k8s.io/kubernetes/cmd/kube-proxy
build kubectl kube k8s.io/kubernetes/cmd/kubectl
build pause images ./pause
build sample-server images ./sample-server
build node-images images ./node-images
echo ">> control plane built in $((SECONDS - total_start))s" >&2
echo "$bin_dir"
