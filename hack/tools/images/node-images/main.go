// Command node-images writes container images for the local node as one docker-format
// tarball, which `ctr -n k8s.io images import` loads with no registry involved. Each
// image is one static binary laid out by internal/binimage (the Dockerfile's
// distroless layout: the binary as /usr/local/bin's entrypoint, user 65532, no shell),
// for the architecture node-images itself was built for, which is the node's.
//
//	node-images --out images.tar registry.local/mini-kcm:dev=bin/mini-kcm registry.local/pause:dev=...
//
// Names are spelled out in full (host/path:tag): containerd's CRI normalises a short
// name such as mini-kcm:dev to docker.io/library/mini-kcm:dev before looking it up, and
// would not find an image imported under the short one.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mini-kcm/mini-kcm/hack/tools/images/internal/binimage"
)

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
		img, err := binimage.Image(binary, filepath.Base(binary), runtime.GOARCH)
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
