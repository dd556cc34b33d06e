// Package binimage builds the project's one-binary images without a container daemon.
// Each is one layer laid out like the Dockerfile's distroless result: the binary in
// /usr/local/bin as the entrypoint, /etc/passwd and /etc/group naming the nonroot user
// 65532, a world-writable /tmp, no shell, and user 65532:65532 (numeric, so that the
// kubelet can check runAsNonRoot without reading /etc/passwd). Unlike distroless it has
// no CA bundle and no time zone data, which none of our binaries needs: mini-kcm trusts
// the CA of its kubeconfig or ServiceAccount, and without zone data Go's time is UTC.
//
// The same binary always gives the same image, byte for byte: every timestamp is the
// Unix epoch, as ko's are, so a digest names the binary and nothing about the build.
package binimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Nonroot is distroless's unprivileged user, the one the Dockerfile's image runs as.
const Nonroot = 65532

// epoch is every timestamp in an image: the layer's files and the config's created.
var epoch = time.Unix(0, 0).UTC()

// Image returns an OCI image for linux/arch whose only layer holds the static binary at
// path as /usr/local/bin/command, its entrypoint, run as user 65532.
func Image(path, command, arch string) (v1.Image, error) {
	binary, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entrypoint := "/usr/local/bin/" + command
	layerTar, err := rootFS(entrypoint, binary)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	// OCI media types throughout, so that an index of these images is an OCI index of
	// OCI manifests rather than a mix with Docker's schema 2.
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	config = config.DeepCopy()
	config.Created = v1.Time{Time: epoch}
	config.OS, config.Architecture = "linux", arch
	config.Config.User = fmt.Sprintf("%d:%d", Nonroot, Nonroot)
	config.Config.Entrypoint = []string{entrypoint}
	config.Config.Env = []string{"PATH=/usr/local/bin"}
	return mutate.ConfigFile(img, config)
}

// rootFS is the image's only layer.
func rootFS(entrypoint string, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
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
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", Nonroot, Nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", Nonroot)
	for _, step := range []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, Nonroot) },
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
