# mini-kcm developer entry points. Everything works on a fresh machine with only Go:
# the control plane used by the e2e tests and `make run` is built from source through
# the Go module proxy on first use (about 12 minutes on 2 cores) and cached outside the
# checkout in $(BIN_DIR).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# app.version is what --version prints and what every client's user agent carries;
# -s -w drop the symbol table and DWARF, which stack traces do not need.
LDFLAGS := -s -w -X github.com/mini-kcm/mini-kcm/app.version=$(VERSION)
# Pinned so that lint results do not change under our feet; bump deliberately.
STATICCHECK_VERSION := v0.8.2
# An execution count, not a duration: go1.26's fuzz coordinator can fail a duration
# budget with a spurious "context deadline exceeded" on a loaded machine (golang/go#75804).
FUZZTIME ?= 30000x
# Unit tests: everything but the harness, e2e suites and benchmarks under test/.
UNIT_PKGS = $$($(GO) list ./... | grep -v '/test/')

export MINI_KCM_BIN_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mini-kcm/v1.37.2/bin
BIN_DIR := $(MINI_KCM_BIN_DIR)

.PHONY: build
build: ## Build bin/mini-kcm with the version stamped in.
	@# Static, like the image and the control-plane binaries (and so the upstream
	@# kube-controller-manager that make bench compares against).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/mini-kcm ./cmd/mini-kcm

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver, kube-scheduler and kwok from source if missing.
	@hack/build-control-plane.sh

.PHONY: run
run: build control-plane ## Local cluster with 3 mini-kcm replicas and a sample app; Ctrl-C stops all.
	$(GO) build -o bin/localcluster ./test/cmd/localcluster
	bin/localcluster --mini-kcm bin/mini-kcm

.PHONY: test
test: lint test-unit test-fuzz test-e2e ## What CI runs: lint, unit tests (race), a short fuzz pass, e2e suites.

.PHONY: test-unit
test-unit: ## Unit tests with the race detector.
	$(GO) test -race -count=1 $(UNIT_PKGS)

.PHONY: test-fuzz
test-fuzz: ## Each fuzz target for FUZZTIME (default 30000 executions).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# The e2e replicas run a race-detector build of mini-kcm, so a data race in the real
# binary under real concurrency fails the suite. Packages run one at a time (-p 1):
# each starts its own control plane, and two at once would only compete for the CPU.
.PHONY: test-e2e
test-e2e: control-plane ## E2E suites against a real local control plane.
	$(GO) build -race -o bin/mini-kcm-race ./cmd/mini-kcm
	MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -p 1 -count=1 -timeout 30m \
		$$($(GO) list ./test/... | grep -v /test/cmd/demo-failover)
	@# The failover demo runs verbosely so that CI's log shows both takeovers.
	MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -count=1 -v -timeout 5m ./test/cmd/demo-failover/

.PHONY: test-long
test-long: control-plane ## Long HA soaks (~10 min): 2000-pod failover, upstream timings, a Service over 5000 pods.
	$(GO) build -race -o bin/mini-kcm-race ./cmd/mini-kcm
	MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -tags long -run Long -p 1 -count=1 -timeout 60m -v ./test/e2e/ha/

.PHONY: demo-failover
demo-failover: build control-plane ## Leader failover on the local control plane: SIGTERM and SIGKILL takeovers, default timings.
	$(GO) run ./test/cmd/demo-failover --mini-kcm bin/mini-kcm

IMAGE ?= mini-kcm:dev

.PHONY: image
image: ## Build the container image $(IMAGE) with the version stamped in (Docker with BuildKit).
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: kind-demo
kind-demo: ## Failover demo in a kind cluster (needs Docker, kind and kubectl).
	deploy/kind/demo.sh

.PHONY: bench
bench: build ## Side-by-side benchmarks against upstream kube-controller-manager (~12 min; BENCH_SCALE=N for more).
	@WITH_UPSTREAM_KCM=1 hack/build-control-plane.sh >/dev/null
	$(GO) test -run '^$$' -bench . -benchmem ./test/bench/micro/
	@# Every workload at upstream's default rate limit (20/30), and the Endpoints workload
	@# again at a raised one, as operators run it (Gardener: 100/200).
	$(GO) run ./test/bench/cmd/kcmbench --mini-kcm bin/mini-kcm \
		--kube-api-qps=20 --kube-api-burst=30 --raised-kube-api-qps=200 --raised-kube-api-burst=400

.PHONY: lint
lint: ## gofmt, go vet and staticcheck.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n "$$unformatted" ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

.PHONY: clean
clean: ## Remove build output (not the control plane cache in $(BIN_DIR)).
	rm -rf bin

.PHONY: clean-control-plane
clean-control-plane: ## Remove the cached control plane binaries.
	rm -rf "$(BIN_DIR)"

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'
