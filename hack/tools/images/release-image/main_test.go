package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testLabels = map[string]string{"org.opencontainers.image.version": "v0.1.0"}

// fakeBinaries writes a stand-in binary per architecture, its contents given, and
// returns them arm64 first, the reverse of the index's order.
func fakeBinaries(t *testing.T, contents string) []platformBinary {
	t.Helper()
	dir := t.TempDir()
	var binaries []platformBinary
	for _, arch := range []string{"arm64", "amd64"} {
		path := filepath.Join(dir, "mini-kcm-linux-"+arch)
		if err := os.WriteFile(path, []byte(contents+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		binaries = append(binaries, platformBinary{platform: v1.Platform{OS: "linux", Architecture: arch}, path: path})
	}
	return binaries
}

func TestTheIndexHasAnImagePerPlatformWhoseConfigNamesItsArchitecture(t *testing.T) {
	index, err := buildIndex(fakeBinaries(t, "binary for "), testLabels)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != types.OCIImageIndex || manifest.Annotations["org.opencontainers.image.version"] != "v0.1.0" {
		t.Errorf("the index has media type %q and annotations %v, want %s and the version", manifest.MediaType, manifest.Annotations, types.OCIImageIndex)
	}
	var platforms []string
	for _, desc := range manifest.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		platforms = append(platforms, desc.Platform.String())
		if desc.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %q, want %s", desc.Platform, desc.MediaType, types.OCIManifestSchema1)
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		config, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if config.OS != desc.Platform.OS || config.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: the config says %s/%s", desc.Platform, config.OS, config.Architecture)
		}
		if !slices.Equal(config.Config.Entrypoint, []string{"/usr/local/bin/mini-kcm"}) || config.Config.User != "65532:65532" {
			t.Errorf("%s: entrypoint %v as user %q, want /usr/local/bin/mini-kcm as 65532:65532", desc.Platform, config.Config.Entrypoint, config.Config.User)
		}
		if config.Config.Labels["org.opencontainers.image.version"] != "v0.1.0" {
			t.Errorf("%s: labels %v, want the version", desc.Platform, config.Config.Labels)
		}
		imgManifest, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if imgManifest.Config.MediaType != types.OCIConfigJSON || len(imgManifest.Layers) != 1 || imgManifest.Layers[0].MediaType != types.OCILayer {
			t.Errorf("%s: config %q and layers %v, want an OCI config and one OCI layer", desc.Platform, imgManifest.Config.MediaType, imgManifest.Layers)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("the index's platforms are %v, want %v in that order", platforms, want)
	}
}

func TestTheSameBinariesGiveTheSameDigestsAndTheSameArchive(t *testing.T) {
	ref, err := name.NewTag("registry.local/mini-kcm:v0.1.0", name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	write := func(contents string) (v1.Hash, []byte) {
		t.Helper()
		index, err := buildIndex(fakeBinaries(t, contents), testLabels)
		if err != nil {
			t.Fatal(err)
		}
		_, archive := writeRelease(t, index, ref)
		digest, err := index.Digest()
		if err != nil {
			t.Fatal(err)
		}
		tarred, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		return digest, tarred
	}
	first, firstArchive := write("binary for ")
	second, secondArchive := write("binary for ")
	if first != second || !bytes.Equal(firstArchive, secondArchive) {
		t.Errorf("the same binaries gave the indexes %s and %s, archives equal: %v", first, second, bytes.Equal(firstArchive, secondArchive))
	}
	if other, _ := write("another binary for "); other == first {
		t.Errorf("other binaries gave the same index %s", other)
	}
}

func TestTheLayoutNamesTheIndexAndTheArchiveHoldsTheLayout(t *testing.T) {
	index, err := buildIndex(fakeBinaries(t, "binary for "), testLabels)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag("registry.local/mini-kcm:v0.1.0", name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	layoutDir, archive := writeRelease(t, index, ref)
	if err := writeLayout(layoutDir, index, ref); err == nil {
		t.Error("a second layout was written over the first")
	}

	fromLayout, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := fromLayout.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the one index", len(top.Manifests))
	}
	entry := top.Manifests[0]
	if entry.Digest != digest || entry.MediaType != types.OCIImageIndex {
		t.Errorf("index.json lists %s (%s), want the index %s", entry.Digest, entry.MediaType, digest)
	}
	if got := entry.Annotations[refNameAnnotation]; got != "v0.1.0" {
		t.Errorf("%s = %q, want the tag v0.1.0", refNameAnnotation, got)
	}
	if got := entry.Annotations[containerdNameAnnotation]; got != "registry.local/mini-kcm:v0.1.0" {
		t.Errorf("%s = %q, want the full name", containerdNameAnnotation, got)
	}

	// The archive holds every file of the layout, byte for byte.
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := 0
	for r := tar.NewReader(f); ; {
		header, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if header.Typeflag != tar.TypeReg {
			continue
		}
		files++
		tarred, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := os.ReadFile(filepath.Join(layoutDir, header.Name))
		if err != nil || !bytes.Equal(tarred, onDisk) {
			t.Errorf("%s in the archive differs from the layout's (%v)", header.Name, err)
		}
	}
	// oci-layout, index.json, the index, and per image its manifest, config and layer.
	if want := 3 + 2*3; files != want {
		t.Errorf("the archive holds %d files, want %d", files, want)
	}
}

// writeRelease writes index as main does, a layout and its archive in a new directory,
// and returns their paths.
func writeRelease(t *testing.T, index v1.ImageIndex, ref name.Tag) (layoutDir, archive string) {
	t.Helper()
	dir := t.TempDir()
	layoutDir, archive = filepath.Join(dir, "image"), filepath.Join(dir, "image.oci.tar")
	if err := writeLayout(layoutDir, index, ref); err != nil {
		t.Fatal(err)
	}
	if err := writeArchive(layoutDir, archive); err != nil {
		t.Fatal(err)
	}
	return layoutDir, archive
}
