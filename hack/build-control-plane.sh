#!/usr/bin/env bash
# Builds the real control plane used by tests, benchmarks and `make run`: etcd,
# kube-apiserver, kube-scheduler, kube-controller-manager (which e2e suites and
# benchmarks run beside mini-kcm) and the KWOK fake kubelet, all from source through the
# Go module proxy; and what the local node (test/e2e/node) runs: kubelet, kube-proxy,
# kubectl (which applies deploy/ with its built-in kustomize, as users do), and the
# image tools of hack/tools/images (the pause and sample-server programs, node-images),
# and Prometheus (hack/tools/prometheus) with the Prometheus Operator and its config
# reloader (hack/tools/prometheus-operator), which run the shipped monitoring on the node.
# It always builds all of them: whatever `make test` needs, it builds.
# `--list` prints their names (test/controlplane checks them against what it launches).
# `--kind` builds instead what only make test-kind (hack/kind/run.sh) needs: kubeadm
# (from the kube module, with the same flags, so the packages it shares with the
# binaries above come from the build cache), kind and crictl.
#
# Binaries are cached outside the checkout, keyed by version, and only missing ones are
# built, so a warm run costs nothing. Override the cache with MINI_KCM_BIN_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kube_version=v1.37.2
bin_dir=${MINI_KCM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mini-kcm/${kube_version}/bin}

# progress WHAT TOTAL reads `go build -v`: package names, counted, with a line every 30s;
# anything else (errors) passes through.
progress() {
	local what=$1 total=$2 n=0 start=$SECONDS last=$SECONDS line
	while IFS= read -r line; do
		case $line in
		'#'* | 'go: '* | *.go:* | $'\t'* | *' '*) echo "$line" ;;
		*)
			n=$((n + 1))
			if ((SECONDS - last >= 30)); then
				echo ">> $what: compiled $n of at most $total packages ($((SECONDS - start))s)"
				last=$SECONDS
			fi
			;;
		esac
	done
}

# build MODULE_DIR NAME=PACKAGE... builds the named binaries that are missing, in one
# `go build` per module: one action graph compiles shared packages once and links the
# binaries side by side, instead of one core idling through each link in turn. While it
# runs it prints how many packages it has compiled, so a cold build (kube-apiserver
# alone compiles about 2 000) shows progress between its start and its end.
build() {
	local module=$1 ldflags='-s -w' names=() pkgs=() spec
	shift
	for spec in "$@"; do
		[[ -x "$bin_dir/${spec%%=*}" ]] && continue
		names+=("${spec%%=*}")
		pkgs+=("${spec#*=}")
	done
	((${#names[@]})) || return 0
	if [[ $module == kube ]]; then
		# Stamp the version, as the upstream release build does, so /version tells the truth.
		ldflags+=" -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	fi
	local start=$SECONDS total tmp out
	total=$(cd "$here/tools/$module" && CGO_ENABLED=0 go list -deps "${pkgs[@]}" | grep -c .)
	echo ">> building ${names[*]} ($total packages, fewer to compile where cached)" >&2
	# Build into a temporary directory and rename, so an interrupted build never leaves a
	# half-written binary that a later run would trust. With several packages,
	# `go build -o DIR/` names each binary after its package's last path element, as the
	# names here are.
	tmp=$(mktemp -d "$bin_dir/.build.XXXXXX")
	out=$tmp/
	((${#pkgs[@]} > 1)) || out=$tmp/${names[0]}
	(cd "$here/tools/$module" && CGO_ENABLED=0 go build -v -trimpath -ldflags="$ldflags" -o "$out" "${pkgs[@]}") 2>&1 |
		progress "${names[*]}" "$total" >&2
	local rc=${PIPESTATUS[0]} name
	if ((rc != 0)); then
		rm -rf "$tmp"
		echo ">> building ${names[*]} failed (go build exited $rc)" >&2
		return "$rc"
	fi
	for name in "${names[@]}"; do
		mv "$tmp/$name" "$bin_dir/$name"
	done
	rm -rf "$tmp"
	echo ">> built ${names[*]} in $((SECONDS - start))s" >&2
}

binaries=(etcd kube-apiserver kube-scheduler kwok kube-controller-manager
	kubelet kube-proxy kubectl pause sample-server node-images prometheus
	prometheus-operator prometheus-config-reloader)
if [[ "${1:-}" == --list ]]; then
	printf '%s\n' "${binaries[@]}"
	exit 0
fi
mkdir -p "$bin_dir"
if [[ "${1:-}" == --kind ]]; then
	# Not part of the default build (make test does not need them); same cache and lock.
	if command -v flock >/dev/null; then
		exec 9>"$bin_dir/.build.lock"
		flock -n 9 || { echo ">> another build of the control plane is running; waiting for it" >&2; flock 9; }
	fi
	build kube kubeadm=k8s.io/kubernetes/cmd/kubeadm
	build kind kind=sigs.k8s.io/kind
	build crictl crictl=sigs.k8s.io/cri-tools/cmd/crictl
	echo "$bin_dir"
	exit 0
fi
# exit_if_built prints the cache and exits when no binary is missing; else it leaves
# their names in missing.
exit_if_built() {
	missing=()
	for name in "${binaries[@]}"; do
		[[ -x "$bin_dir/$name" ]] || missing+=("$name")
	done
	if ((${#missing[@]} == 0)); then
		echo "$bin_dir"
		exit 0
	fi
}
exit_if_built

# Two builds at once (two terminals, make -j) would only compete for the CPU; the
# second waits for the first and then finds the binaries built.
if command -v flock >/dev/null; then
	exec 9>"$bin_dir/.build.lock"
	if ! flock -n 9; then
		echo ">> another build of the control plane is running; waiting for it" >&2
		flock 9
		exit_if_built
	fi
fi

total_start=$SECONDS
echo ">> control plane binaries missing from $bin_dir: ${missing[*]}" >&2
estimate="a minute or two per binary"
if [[ " ${missing[*]} " == *" kube-apiserver "* ]]; then
	estimate="about 26 minutes on 2 cores with empty Go caches"
fi
echo ">> building them from source through the Go module proxy, once ($estimate);" >&2
echo ">> later runs reuse them" >&2

# Two modules at once: the small ones (etcd, kwok, the image tools) build beside the
# large kube one and use the cores its links and its narrow stretches leave idle.
build kube kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy \
	kubectl=k8s.io/kubernetes/cmd/kubectl &
kube_pid=$!
others_rc=0
build etcd etcd=go.etcd.io/etcd/server/v3 || others_rc=$?
((others_rc)) || build kwok kwok=sigs.k8s.io/kwok/cmd/kwok || others_rc=$?
((others_rc)) || build images pause=./pause sample-server=./sample-server node-images=./node-images || others_rc=$?
# Without the web UI's assets (the builtinassets tag): the HTTP API the tests read is whole.
((others_rc)) || build prometheus prometheus=github.com/prometheus/prometheus/cmd/prometheus || others_rc=$?
# One binary per build: the operator's package is named operator, and the cache names it
# for what it is. The second build finds the packages they share compiled.
((others_rc)) || build prometheus-operator \
	prometheus-operator=github.com/prometheus-operator/prometheus-operator/cmd/operator || others_rc=$?
((others_rc)) || build prometheus-operator \
	prometheus-config-reloader=github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader || others_rc=$?
kube_rc=0
wait "$kube_pid" || kube_rc=$?
if ((others_rc || kube_rc)); then
	echo ">> building the control plane failed; the output above says why" >&2
	exit 1
fi
echo ">> control plane built in $((SECONDS - total_start))s" >&2
echo "$bin_dir"
