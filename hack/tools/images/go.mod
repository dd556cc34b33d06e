// Module images builds container images without a container daemon. For the local node
// (test/controlplane's node mode), which runs locally built images with no registry: the
// pause image's program, a small sample server standing in for agnhost, and node-images,
// which assembles them and the static mini-kcm binary into image tarballs for
// `ctr images import`. For `make release`: release-image, mini-kcm's multi-arch image
// index as an OCI image layout and archive. Both lay out their images with
// internal/binimage. It is separate from the main module so that go-containerregistry
// never enters the product's dependency graph.
module github.com/mini-kcm/mini-kcm/hack/tools/images

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
