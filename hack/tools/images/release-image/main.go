// Command release-image writes mini-kcm's release image without a container daemon: an
// OCI image index with one image per platform, each the static binary built for that
// platform laid out by internal/binimage. It writes the index twice, as an OCI image
// layout directory (what `crane push` and `skopeo copy oci:` read) and as that layout
// tarred, an OCI archive (what `ctr images import` reads), and prints the index's
// digest, which the release's manifests pin.
//
//	release-image --layout DIR --archive FILE --name registry.local/mini-kcm:v0.1.0 \
//		--version v0.1.0 --revision COMMIT [--source URL] \
//		linux/amd64=mini-kcm-linux-amd64 linux/arm64=mini-kcm-linux-arm64
//
// The same binaries and flags give the same digests: the images' timestamps are the
// Unix epoch (the build date is in the binary, where --version prints it), the index
// lists the platforms in a fixed order and the archive's entries are sorted and dated
// the epoch too.
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/mini-kcm/mini-kcm/hack/tools/images/internal/binimage"
)

// command is the entrypoint's name in every image, /usr/local/bin/mini-kcm as in the
// Dockerfile's image, whatever the binary's file is called.
const command = "mini-kcm"

// The annotations of an image layout's index.json that name an image: the OCI one
// holds only the tag (the spec's reference name is relative to the layout, and
// containerd's own export writes the tag there too); containerd's holds the full name,
// under which `ctr images import` stores the image.
const (
	refNameAnnotation        = "org.opencontainers.image.ref.name"
	containerdNameAnnotation = "io.containerd.image.name"
)

// platformBinary is one image of the index: the static binary built for a platform.
type platformBinary struct {
	platform v1.Platform
	path     string
}

func main() {
	layoutDir := flag.String("layout", "", "the OCI image layout directory to write (must not exist)")
	archive := flag.String("archive", "", "the OCI archive to write: the layout, tarred")
	refText := flag.String("name", "", "the image's full name, host/path:tag, e.g. registry.local/mini-kcm:v0.1.0")
	version := flag.String("version", "", "org.opencontainers.image.version")
	revision := flag.String("revision", "", "org.opencontainers.image.revision: the commit the binaries were built from")
	source := flag.String("source", "", "org.opencontainers.image.source: the repository's URL (left out when empty)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s --layout DIR --archive FILE --name REF [flags] OS/ARCH=STATIC_BINARY...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *layoutDir == "" || *archive == "" || *refText == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	// Spelled out in full: containerd's CRI normalises a short name such as
	// mini-kcm:v0.1.0 to docker.io/library/mini-kcm:v0.1.0 and would not find the
	// image that ctr imported under the short one.
	ref, err := name.NewTag(*refText, name.StrictValidation)
	if err != nil {
		log.Fatalf("--name %q: want a full image name such as registry.local/mini-kcm:v0.1.0: %v", *refText, err)
	}
	var binaries []platformBinary
	for _, arg := range flag.Args() {
		platformText, path, ok := strings.Cut(arg, "=")
		if !ok {
			log.Fatalf("%q: want OS/ARCH=STATIC_BINARY, e.g. linux/amd64=mini-kcm-linux-amd64", arg)
		}
		platform, err := v1.ParsePlatform(platformText)
		if err != nil || platform.OS != "linux" || platform.Architecture == "" {
			log.Fatalf("%q: want a linux platform such as linux/arm64", platformText)
		}
		binaries = append(binaries, platformBinary{platform: *platform, path: path})
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "mini-kcm",
		"org.opencontainers.image.description": "ReplicaSet, Deployment, Endpoints and EndpointSlice controllers of kube-controller-manager, with leader election",
		"org.opencontainers.image.version":     *version,
		"org.opencontainers.image.revision":    *revision,
		"org.opencontainers.image.source":      *source,
	}
	for key, value := range labels {
		if value == "" {
			delete(labels, key)
		}
	}

	index, err := buildIndex(binaries, labels)
	if err != nil {
		log.Fatal(err)
	}
	if err := writeLayout(*layoutDir, index, ref); err != nil {
		log.Fatalf("writing the image layout %s: %v", *layoutDir, err)
	}
	if err := writeArchive(*layoutDir, *archive); err != nil {
		log.Fatalf("writing the OCI archive %s: %v", *archive, err)
	}
	digest, err := index.Digest()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(digest)
}

// buildIndex returns the OCI index of one image per binary, ordered by platform so
// that the digest does not depend on the order of the arguments. labels are each
// image's config labels (what docker and podman inspect show) and the annotations of
// each manifest and of the index (what registries and crane show).
func buildIndex(binaries []platformBinary, labels map[string]string) (v1.ImageIndex, error) {
	binaries = slices.Clone(binaries)
	slices.SortFunc(binaries, func(a, b platformBinary) int { return strings.Compare(a.platform.String(), b.platform.String()) })
	var index v1.ImageIndex = empty.Index
	for i, b := range binaries {
		if i > 0 && b.platform.Equals(binaries[i-1].platform) {
			return nil, fmt.Errorf("platform %s given twice", b.platform)
		}
		img, err := binimage.Image(b.path, command, b.platform.Architecture)
		if err != nil {
			return nil, fmt.Errorf("the %s image from %s: %w", b.platform, b.path, err)
		}
		config, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		config = config.DeepCopy()
		config.Variant = b.platform.Variant
		config.Config.Labels = labels
		if img, err = mutate.ConfigFile(img, config); err != nil {
			return nil, err
		}
		img = mutate.Annotations(img, labels).(v1.Image)
		platform := b.platform
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
	}
	index = mutate.Annotations(index, labels).(v1.ImageIndex)
	if mt, err := index.MediaType(); err != nil || mt != types.OCIImageIndex {
		return nil, fmt.Errorf("the index's media type is %q (%v), want %s", mt, err, types.OCIImageIndex)
	}
	return index, nil
}

// writeLayout writes index as the only entry of a new OCI image layout at dir, named
// ref for those who read the names of index.json.
func writeLayout(dir string, index v1.ImageIndex, ref name.Tag) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists: remove it first, a layout holds one release", dir)
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return path.AppendIndex(index, layout.WithAnnotations(map[string]string{
		refNameAnnotation:        ref.TagStr(),
		containerdNameAnnotation: ref.Name(),
	}))
}

// writeArchive tars the layout at dir into file: its files in lexical order, dated the
// Unix epoch, owned by root, directories 0755 and files 0644, so that the archive too
// is the same for the same layout.
func writeArchive(dir, file string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is neither a file nor a directory", path)
		}
		paths = append(paths, path)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	w := tar.NewWriter(f)
	epoch := time.Unix(0, 0).UTC()
	for _, path := range paths {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		header := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatUSTAR}
		if info.IsDir() {
			header.Typeflag, header.Name, header.Mode = tar.TypeDir, header.Name+"/", 0o755
			if err := w.WriteHeader(header); err != nil {
				return err
			}
			continue
		}
		header.Typeflag, header.Mode, header.Size = tar.TypeReg, 0o644, info.Size()
		if err := w.WriteHeader(header); err != nil {
			return err
		}
		if err := copyFile(w, path); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
