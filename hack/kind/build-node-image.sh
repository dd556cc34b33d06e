#!/usr/bin/env bash
# Builds the kind node image for make test-kind (hack/kind/run.sh) from the project's own
# Kubernetes v1.37.2 binaries and Debian's archive, with no registry:
#   build-node-image.sh OUT.tar
# OUT.tar is the node's root filesystem, for
#   podman import --change 'ENTRYPOINT [...]' OUT.tar   (run.sh does that)
#
#  1. A Debian bookworm root filesystem (mmdebstrap) with Debian's containerd 1.6, runc
#     and CNI plugins, and kind v0.33.0's base-image files (hack/kind/node/, adapted; its
#     README says how and why), set up as kind's base Dockerfile does.
#  2. kubeadm, kubelet, kubectl and crictl from the binary cache (hack/build-control-plane.sh
#     and its --kind mode).
#  3. The images kubeadm v1.37.2 needs, preloaded in /kind/images and imported at first
#     boot (kind-preload-images.service):
#     - kube-apiserver, kube-controller-manager, kube-scheduler and etcd: one static binary
#       each, run as root (kubeadm's static pods read root-only keys), `podman import`ed;
#     - kube-proxy on a minimal Debian root filesystem (it runs iptables and nft);
#     - pause with the project's node-images tool.
#     No CoreDNS and no kindnetd image: run.sh skips kubeadm's CoreDNS addon and lays a
#     bridge CNI config itself (cni.sh).
# Needs root (mmdebstrap's root mode, chroot, rootful podman), mmdebstrap and podman.
set -euo pipefail

(($# == 1)) || { echo "usage: $0 OUT.tar" >&2; exit 2; }
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kube_version=v1.37.2
bin_dir=${MINI_KCM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mini-kcm/${kube_version}/bin}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm

die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}
progress() { printf '>> node image: %s (%ss)\n' "$*" "$((SECONDS - start))" >&2; }
start=$SECONDS

((EUID == 0)) || die "building the kind node image needs root (mmdebstrap, chroot, podman import)"
for tool in mmdebstrap podman; do
	command -v "$tool" >/dev/null || die "$tool not found: apt-get install $tool (hack/kind/run.sh does it when root)"
done
for b in kubeadm kubelet kubectl crictl kube-apiserver kube-controller-manager kube-scheduler etcd kube-proxy pause node-images; do
	[[ -x $bin_dir/$b ]] || die "$bin_dir/$b is missing: run hack/build-control-plane.sh and hack/build-control-plane.sh --kind"
done

# Everything is built in a temporary directory beside OUT and renamed at the end, so
# an interrupted build never leaves an image a later run would trust.
work=$(mktemp -d "$(dirname "$out")/.node-image.XXXXXX")
# The control-plane images are made in podman's storage only to be saved into an archive.
podman_images=()
cleanup() {
	((${#podman_images[@]} == 0)) || podman rmi --force "${podman_images[@]}" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

rootfs=$work/rootfs
progress "debootstrapping Debian $suite into the node's root filesystem (1-3 minutes)"
mmdebstrap --quiet --variant=minbase \
	--include=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,jq,procps,socat,ebtables,iputils-ping \
	"$suite" "$rootfs" "$mirror"

progress "installing kind's base files and the Kubernetes binaries"
# As kind's images/base/Dockerfile copies images/base/files (README.md is ours).
cp -r --no-preserve=ownership "$here/node/." "$rootfs/"
rm "$rootfs/README.md"
mkdir -p "$rootfs/kind/images" "$rootfs/kind/manifests" "$rootfs/etc/kubernetes/manifests"
# containerd looks for CNI plugins in /opt/cni/bin; Debian installs them in /usr/lib/cni.
mkdir -p "$rootfs/opt/cni"
ln -sfn /usr/lib/cni "$rootfs/opt/cni/bin"
# cri-base.json as kind makes it: containerd's default spec with the product-files
# hook, without rlimits (the node's own apply). The node's jq: the host need not have it.
chroot "$rootfs" sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"} | del(.process.rlimits)"' \
	>"$rootfs/etc/containerd/cri-base.json"
install -m 0755 "$bin_dir/kubelet" "$bin_dir/kubectl" "$bin_dir/kubeadm" "$rootfs/usr/bin/"
install -m 0755 "$bin_dir/crictl" "$rootfs/usr/local/bin/"
echo "$kube_version" >"$rootfs/kind/version"

# The RUN steps of kind's base Dockerfile: no services but ours, systemd as init.
chroot "$rootfs" sh -euc '
	find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
	rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
		/lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
		/lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
	echo "ReadKMsg=no" >>/etc/systemd/journald.conf
	ln -sf /usr/lib/systemd/systemd /sbin/init
	systemctl enable --quiet kubelet.service containerd.service undo-mount-hacks.service kind-preload-images.service
	systemctl mask --quiet systemd-binfmt.service
	rm -f /etc/machine-id
	touch /etc/machine-id
'

progress "building the control-plane images"
# bin_image REF BINARY: one static binary as the entrypoint, run as root.
bin_image() {
	local ref=$1 bin=$2 d name
	name=$(basename "$bin")
	d=$work/image-$name
	mkdir -p "$d/usr/local/bin" "$d/tmp" "$d/etc"
	chmod 1777 "$d/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\n' >"$d/etc/passwd"
	printf 'root:x:0:\n' >"$d/etc/group"
	install -m 0755 "$bin" "$d/usr/local/bin/$name"
	podman_images+=("$ref")
	tar -C "$d" --owner=0 --group=0 -c . | podman import --quiet \
		--change "ENTRYPOINT [\"/usr/local/bin/$name\"]" \
		--change 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$ref" >/dev/null
}
bin_image "registry.k8s.io/kube-apiserver:$kube_version" "$bin_dir/kube-apiserver"
bin_image "registry.k8s.io/kube-controller-manager:$kube_version" "$bin_dir/kube-controller-manager"
bin_image "registry.k8s.io/kube-scheduler:$kube_version" "$bin_dir/kube-scheduler"
bin_image registry.k8s.io/etcd:3.7.0-0 "$bin_dir/etcd"

progress "building the kube-proxy image (a minimal Debian with iptables and nft)"
proxy=$work/proxy-rootfs
mmdebstrap --quiet --variant=minbase --include=iptables,nftables,conntrack,ipset,kmod "$suite" "$proxy" "$mirror"
install -m 0755 "$bin_dir/kube-proxy" "$proxy/usr/local/bin/kube-proxy"
podman_images+=("registry.k8s.io/kube-proxy:$kube_version")
tar -C "$proxy" --numeric-owner -c . | podman import --quiet \
	--change 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' \
	--change 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "registry.k8s.io/kube-proxy:$kube_version" >/dev/null
podman save --quiet -m --format docker-archive -o "$rootfs/kind/images/control-plane.tar" "${podman_images[@]}"
podman rmi --force "${podman_images[@]}" >/dev/null
podman_images=()
# The sandbox image (containerd's config.toml names it), as the real-node suite builds it.
"$bin_dir/node-images" --out "$rootfs/kind/images/pause.tar" "registry.k8s.io/pause:3.10.2=$bin_dir/pause"

progress "writing $out"
tar -C "$rootfs" --numeric-owner -cf "$work/node.tar" .
mv "$work/node.tar" "$out"
progress "done: $(du -h "$out" | cut -f1)"
