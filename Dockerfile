# mini-kcm container image: one static binary on distroless, run as an unprivileged user.
#
#   docker build -t mini-kcm:dev --build-arg VERSION="$(git describe --tags --always --dirty)" .
#
# BuildKit (the default builder since Docker 23) is required for the cache mounts. Builds
# for another architecture cross-compile natively: docker buildx build --platform linux/arm64 .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Modules first, in their own layer: a code change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
# CGO off: a static binary that needs no libc in the final image. -trimpath keeps build
# paths out of the binary (reproducible builds); -s -w drop the symbol table and DWARF,
# which stack traces do not need.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath \
      -ldflags="-s -w -X github.com/mini-kcm/mini-kcm/app.version=${VERSION}" \
      -o /out/mini-kcm ./cmd/mini-kcm

# distroless/static: CA certificates, tzdata and /etc/passwd with the nonroot user, and
# no shell or package manager for an attacker to use.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="mini-kcm" \
      org.opencontainers.image.description="ReplicaSet, Deployment and Endpoints controllers of kube-controller-manager, with leader election" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/mini-kcm /usr/local/bin/mini-kcm
# Numeric, so that the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mini-kcm"]
