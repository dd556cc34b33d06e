// Command node-images writes container images for the local node as one docker-format
// tarball, which `ctr -n k8s.io images import` loads with no registry involved. Each
// image is one static binary laid out like the Dockerfile's distroless result: the
// binary in /usr/local/bin as the entrypoint, /etc/passwd and /etc/group naming the
// nonroot user 65532, a world-writable /tmp, no shell, and user 65532:65532 (numeric, so
// that the kubelet can check runAsNonRoot without reading /etc/passwd).
//
//	node-images --out images.tar registry.local/mini-kcm:dev=bin/mini-kcm registry.local/pause:dev=...
//
// Names are spelled out in full (host/path:tag): containerd's CRI normalises a short
// name such as mini-kcm:dev to docker.io/library/mini-kcm:dev before looking it up, and
// would not find an image imported under the short one.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// nonroot is distroless's unprivileged user, the one the Dockerfile's image runs as.
const nonroot = 65532

func main() {
	out := flag.String("out", "", "the tarball to write")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s --out FILE REF=STATIC_BINARY...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	images := map[name.Reference]v1.Image{}
	for _, arg := range flag.Args() {
		refText, binary, ok := strings.Cut(arg, "=")
		if !ok {
			log.Fatalf("%q: want REF=STATIC_BINARY, e.g. registry.local/mini-kcm:dev=bin/mini-kcm", arg)
		}
		ref, err := name.NewTag(refText, name.StrictValidation)
		if err != nil {
			log.Fatalf("%q: want a full image name such as registry.local/mini-kcm:dev (the CRI rewrites short ones): %v", refText, err)
		}
		img, err := binaryImage(binary)
		if err != nil {
			log.Fatalf("building %s from %s: %v", refText, binary, err)
		}
		images[ref] = img
	}
	tmp := *out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, images); err != nil {
		log.Fatalf("writing %s: %v", *out, err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		log.Fatal(err)
	}
}

// binaryImage returns a one-layer image running the binary at path as user 65532.
func binaryImage(path string) (v1.Image, error) {
	binary, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entrypoint := "/usr/local/bin/" + filepath.Base(path)
	layerTar, err := rootFS(entrypoint, binary)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	config = config.DeepCopy()
	config.OS, config.Architecture = "linux", runtime.GOARCH
	config.Config.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
	config.Config.Entrypoint = []string{entrypoint}
	config.Config.Env = []string{"PATH=/usr/local/bin"}
	return mutate.ConfigFile(img, config)
}

// rootFS is the image's only layer, with fixed timestamps so that the same binary
// always gives the same image.
func rootFS(entrypoint string, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dir := func(name string, mode int64, uid int) error {
		return w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: epoch})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot)
	for _, step := range []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, nonroot) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
		func() error { return file(strings.TrimPrefix(entrypoint, "/"), 0o755, binary) },
		w.Close,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
