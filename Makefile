# mini-kcm developer entry points. Everything works on a fresh machine with Go (and a C
# compiler for the race detector, see RACE): the control plane used by the e2e tests and
# `make run` is built from source through the Go module proxy on first use (about 26
# minutes on 2 cores with empty Go caches, about 1 minute with warm ones) and cached
# outside the checkout in $(BIN_DIR).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
# The version information stamped into the binary, into component-base's version
# package like upstream's hack/lib/version.sh does for Kubernetes: --version prints it,
# kubernetes_build_info reports it and every client's user agent carries the version.
# VERSION is semver, as Kubernetes' tools expect: "git describe" from the last v* tag
# (v0.3.0-5-gabc1234-dirty) or, before the first tag, component-base's placeholder with
# the commit filled in (v0.0.0-master+abc1234def56).
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || \
	echo "v0.0.0-master+$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)")
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# Untracked files do not make the tree dirty, as for "git describe --dirty".
GIT_TREE_STATE ?= $(if $(GIT_COMMIT),$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),dirty,clean))
# SOURCE_DATE_EPOCH makes the date, and with it the binary, reproducible.
BUILD_DATE ?= $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%dT%H:%M:%SZ)
VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
	-X k8s.io/component-base/version.gitCommit=$(GIT_COMMIT) \
	-X k8s.io/component-base/version.gitTreeState=$(GIT_TREE_STATE) \
	-X k8s.io/component-base/version.buildDate=$(BUILD_DATE)
# -s -w drop the symbol table and DWARF, which stack traces do not need.
LDFLAGS := -s -w $(VERSION_LDFLAGS)
# Pinned so that lint results do not change under our feet; bump deliberately.
STATICCHECK_VERSION := v0.8.2
# An execution count, not a duration: go1.26's fuzz coordinator can fail a duration
# budget with a spurious "context deadline exceeded" on a loaded machine (golang/go#75804).
FUZZTIME ?= 30000x
# Unit tests: everything but the harness, e2e suites and benchmarks under test/, and
# the simulators' apiserver (test/simapiserver), which is a unit under test itself.
UNIT_PKGS = $$($(GO) list ./... | grep -v '/test/') ./test/simapiserver

# The race detector needs cgo and a C compiler. RACE=auto (the default) uses it when both
# are there and says so loudly when not; RACE=1 makes their absence an error; RACE=0
# turns it off.
RACE ?= auto
CGO_OK := $(shell [[ "$$($(GO) env CGO_ENABLED)" == 1 ]] && command -v "$$($(GO) env CC)" >/dev/null && echo 1)
ifeq ($(RACE),0)
RACE_FLAG :=
else ifeq ($(CGO_OK),1)
RACE_FLAG := -race
else ifeq ($(RACE),1)
$(error RACE=1 but the race detector needs cgo and a C compiler: install one (Debian: apt-get install gcc) and keep CGO_ENABLED=1)
else
RACE_FLAG :=
endif
# Printed by the targets that would use the race detector, when it is off for lack of cgo.
RACE_NOTE := $(if $(RACE_FLAG)$(filter 0,$(RACE)),@true,@echo "WARNING: testing WITHOUT the race detector: it needs cgo and a C compiler (CGO_ENABLED=0, or no $$($(GO) env CC)). Install gcc (Debian: apt-get install gcc), or set RACE=0 to silence this." >&2)

export MINI_KCM_BIN_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mini-kcm/v1.37.2/bin
BIN_DIR := $(MINI_KCM_BIN_DIR)

# component-base's metrics registry parses the stamped version when the binary starts
# and panics unless it starts with vMAJOR.MINOR.PATCH: refuse to build such a binary.
.PHONY: check-version
check-version:
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || \
		{ echo "VERSION=$(VERSION) must start with vMAJOR.MINOR.PATCH, e.g. v0.3.0 or v0.0.0-dev" >&2; exit 1; }

.PHONY: build
build: check-version ## Build bin/mini-kcm with the version stamped in.
	@# Static, like the image and the control-plane binaries (and so the upstream
	@# kube-controller-manager that make bench compares against).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/mini-kcm ./cmd/mini-kcm

.PHONY: generate
generate: ## Write deploy/'s controller RBAC and fence identities, and the shard filter's typed wrappers, from the controller registry (commit the result).
	$(GO) run ./hack/gen-rbac -deploy deploy

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok from source if missing.
	@hack/build-control-plane.sh

.PHONY: run
# SHARDS=N runs the replicas active-active on N shards (mini-kcm --shards).
SHARDS ?= 1

run: build control-plane ## Local cluster with 3 mini-kcm replicas and a sample app (SHARDS=N: sharded); Ctrl-C stops all.
	$(GO) build -o bin/localcluster ./test/cmd/localcluster
	bin/localcluster --mini-kcm bin/mini-kcm --shards=$(SHARDS)

# Every step runs even when one before it failed, so that one failure does not hide the
# others (CI gets one run); the target then fails naming each failed step.
TEST_STEPS := lint test-unit test-fuzz test-e2e

.PHONY: test
test: ## What CI runs: lint, unit tests (race), a short fuzz pass, e2e suites; every step runs, then it fails listing the failed ones.
	@# A missing control plane (about 26 minutes to build on 2 cores with empty Go
	@# cache) builds in the background, at low priority, while the steps before test-e2e
	@# run: it takes the CPU they leave idle, and test-e2e waits for it (the build script
	@# holds a lock). With every binary cached this costs nothing.
	@# Each step reports its CPU seconds as well as its wall time: on a busy machine the
	@# wall time says little about where a cold run's time goes, the CPU time does.
	@failed=(); \
	if [[ " $(TEST_STEPS) " == *" test-e2e "* ]]; then \
		{ TIMEFORMAT="[control-plane, in the background] >> %Rs wall, %Us user + %Ss system CPU"; \
		  time { nice -n 10 hack/build-control-plane.sh 2>&1 >/dev/null | sed -u 's/^/[control-plane, in the background] /'; }; } & \
	fi; \
	for step in $(TEST_STEPS); do \
		echo "==== make $$step ($$(date -u +%H:%M:%S))"; \
		TIMEFORMAT="==== make $$step: %Rs wall, %Us user + %Ss system CPU"; \
		time $(MAKE) --no-print-directory $$step || failed+=("$$step"); \
	done; \
	wait; \
	if (( $${#failed[@]} )); then echo "FAILED: make $${failed[*]} (the output above says why)" >&2; exit 1; fi; \
	echo "==== make test: all of $(TEST_STEPS) passed ($$(date -u +%H:%M:%S))"

.PHONY: test-unit
test-unit: ## Unit tests with the race detector (when cgo is available, see RACE).
	@# -vet=off here and in test-e2e: make lint runs all of go vet over every package and
	@# test file (with -tags long), a superset of the checks go test runs first. go test's
	@# own vet, in each step's build settings, would analyse the whole dependency graph
	@# again on an empty cache: about 150 CPU-s per graph, measured on test/e2e/framework's.
	$(RACE_NOTE)
	@# The replica simulation (sharding/replicasim_test.go) skips under the race
	@# detector, whose runtime crashed in its bubbles; it runs here without it, static
	@# and -trimpath as make lint's vet compiled every package, so that no dependency is
	@# compiled a second time on an empty cache. Then the tests of hack/tools/images (make
	@# release's image), a module of its own. Every command runs.
	@status=0; \
	$(GO) test $(RACE_FLAG) -vet=off -count=1 $(UNIT_PKGS) || status=1; \
	CGO_ENABLED=0 GOFLAGS=-trimpath $(GO) test -vet=off -count=1 -run '^TestReplicaSim' ./sharding/ || status=1; \
	$(GO) test -C hack/tools/images -count=1 ./... || status=1; \
	exit $$status

.PHONY: test-fuzz
test-fuzz: ## Each fuzz target for FUZZTIME (default 30000 executions).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# The e2e replicas run a race-detector build of mini-kcm, so a data race in the real
# binary under real concurrency fails the suite. Packages run one at a time (-p 1):
# each starts its own control plane, and two at once would only compete for the CPU.
# The release the node suite runs the image of (make release; replaced by each run).
E2E_RELEASE_DIR := $(CURDIR)/_output/e2e/release
.PHONY: test-e2e
test-e2e: check-version control-plane build ## E2E suites against a real local control plane.
	$(RACE_NOTE)
	TIMEFORMAT="==== the race build: %Rs wall, %Us user + %Ss system CPU"; time $(GO) build $(RACE_FLAG) -ldflags "$(VERSION_LDFLAGS)" -o bin/mini-kcm-race ./cmd/mini-kcm
	@# The release first, which the node suite runs the image of: make release into
	@# $(E2E_RELEASE_DIR), so that CI builds what a release ships. A failure does not stop
	@# the runs below (the node suite then runs an image of bin/mini-kcm, and the target
	@# fails naming make release): the previous run's release is removed first, so a
	@# SHA256SUMS there says that this run's succeeded. On a line of its own, so that
	@# make -n, which runs every line naming $$(MAKE), only prints the runs below.
	@rm -rf $(E2E_RELEASE_DIR)
	-@TIMEFORMAT="==== the release: %Rs wall, %Us user + %Ss system CPU"; \
	time $(MAKE) --no-print-directory release RELEASE_DIR=$(E2E_RELEASE_DIR)
	@# The four runs below each run whatever the one before it did; the target fails
	@# after them, naming the ones that failed (and make release, if it failed).
	@# 1. Every suite but the node's and the demo's (go test itself runs every package
	@#    even when one fails).
	@# 2. deploy/ on a real kubelet, from the release's image (its OCI archive, imported
	@#    for the node's platform; the race build needs libc, which the image has not), or
	@#    from an image of bin/mini-kcm when the release failed. Verbose, so that CI's log
	@#    shows the failover figures, or the one line saying why the suite skipped (it
	@#    needs root and the packages in test/controlplane's NodeInstallCommand;
	@#    MINI_KCM_REQUIRE_NODE=1 makes their absence a failure).
	@# 3. The failover demo, verbosely so that CI's log shows both takeovers.
	@# 4. A short subset of the -tags long tests, so that their code runs and not only
	@#    compiles: five SIGKILL takeovers at the defaults (about 40s).
	@# The test binaries (not the product under test, which is built above) are static
	@# and -trimpath, as make build and the control plane: their packages are then the
	@# very ones those builds compiled.
	@# Each run reports its wall and CPU time, as make test's steps do: a cold run's e2e
	@# step took 2556 CPU-s where a warm one takes 920, with the same suite times, and
	@# these lines say which run spent the difference.
	@failed=(); export CGO_ENABLED=0 GOFLAGS=-trimpath; \
	node_image=(MINI_KCM_RELEASE_DIR=$(E2E_RELEASE_DIR)); \
	if [[ ! -f $(E2E_RELEASE_DIR)/SHA256SUMS ]]; then \
		failed+=("make release"); node_image=(MINI_KCM_NODE_BINARY=$(CURDIR)/bin/mini-kcm); \
	fi; \
	TIMEFORMAT="==== the e2e suites: %Rs wall, %Us user + %Ss system CPU"; \
	time MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race MINI_KCM_STATIC_BINARY=$(CURDIR)/bin/mini-kcm $(GO) test -vet=off -p 1 -count=1 -timeout 30m \
		$$($(GO) list ./test/... | grep -v -e /test/cmd/demo-failover -e /test/e2e/node) || failed+=("the e2e suites"); \
	TIMEFORMAT="==== the node suite: %Rs wall, %Us user + %Ss system CPU"; \
	time env "$${node_image[@]}" $(GO) test -vet=off -count=1 -v -timeout 20m ./test/e2e/node/ || failed+=("the node suite"); \
	TIMEFORMAT="==== the failover demo: %Rs wall, %Us user + %Ss system CPU"; \
	time MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -vet=off -count=1 -v -timeout 5m ./test/cmd/demo-failover/ || failed+=("the failover demo"); \
	TIMEFORMAT="==== the -tags long subset: %Rs wall, %Us user + %Ss system CPU"; \
	time MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -vet=off -tags long -count=1 -v -timeout 5m \
		-run '^TestLongSIGKILLToNewHolderAtDefaultTimings$$' ./test/e2e/ha/ || failed+=("the -tags long subset"); \
	if (( $${#failed[@]} )); then printf 'FAILED in make test-e2e: %s\n' "$${failed[@]}" >&2; exit 1; fi

.PHONY: test-long
test-long: check-version control-plane ## make test-kind, then long soaks: 2000-pod failover, upstream timings, a Service over 5000 pods, sharded balance at the defaults, the brownout, freeze, leader partition and SIGKILL side by side with kube-controller-manager (5 runs each); then 20 000 election and 100 000 sharding simulator schedules, and 2 000 of the real replicas' (hours on 2 cores).
	@# The kind demo first: a few minutes, and the only run of deploy/kind/demo.sh on a
	@# real kind cluster.
	$(MAKE) --no-print-directory test-kind
	$(GO) build $(RACE_FLAG) -ldflags "$(VERSION_LDFLAGS)" -o bin/mini-kcm-race ./cmd/mini-kcm
	MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -tags long -run Long -p 1 -count=1 -timeout 60m -v ./test/e2e/ha/ ./test/e2e/sharding/
	@# The leadership side by side (issue 30): the brownout (3s stalls and a 30s one of
	@# the apiserver every replica shares), the frozen leader, the leader cut off alone
	@# (its own connection) and the SIGKILLed leader, five runs each, with mini-kcm and
	@# then kube-controller-manager (MINI_KCM_E2E_UPSTREAM=1), each at its own defaults.
	@# Upstream's takeover times, leader changes and exits are figures, not failures.
	for upstream in 0 1; do \
		MINI_KCM_E2E_UPSTREAM=$$upstream MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) test -count=5 -timeout 90m -v \
			-run '^(TestABrownoutOfTheAPIServerChangesNoLeaderAndExitsNoReplica|TestFrozenLeaderWritesNothingAfterAStandbyTookOver|TestPartitionedLeaderStopsBeforeItsLeaseExpiresAndNoTwoReplicasWrite|TestSIGKILLedLeadersLeaseIsTakenAtItsExpiry)$$' \
			./test/e2e/ha/ | grep -E -e '^(--- |ok|FAIL)' -e 'HA-NUMBERS (brownout|freeze|partition|sigkill)'; \
	done
	@# 20 000 schedules of the election simulator (leaderelection/sim_test.go; 150 run in
	@# make test), then 100 000 of the sharding simulator (about 0.1 s each per CPU,
	@# without -race).
	$(GO) test -count=1 -timeout 4h -run TestSimulatedElection -v ./leaderelection/ -args -sim-seeds=20000
	$(GO) test -count=1 -timeout 12h -run TestSimulated -v ./sharding/ -args -sim-seeds=100000
	@# And 2 000 of the real replicas' simulation (sharding/replicasim_test.go; 12 in make
	@# test), about 0.7 s each on one CPU without -race.
	$(GO) test -count=1 -timeout 4h -run TestReplicaSimNever -v ./sharding/ -args -sim-seeds=2000

.PHONY: demo-failover
demo-failover: build control-plane ## Leader failover on the local control plane: SIGTERM, SIGKILL and SIGSTOP (then SIGCONT) takeovers, default timings.
	$(GO) run ./test/cmd/demo-failover --mini-kcm bin/mini-kcm

.PHONY: demo-node
demo-node: build control-plane ## deploy/kind's failover demo (deploy/demo/failover.sh) on a local real kubelet, no Docker (root; ~1 min once built).
	@# The e2e node suite's test of the script: it starts the node, imports the images,
	@# runs the script with the node's signal hook and checks its timings and the audit
	@# log. MINI_KCM_REQUIRE_NODE=1: a machine without what the node needs gets the reason.
	MINI_KCM_REQUIRE_NODE=1 MINI_KCM_NODE_BINARY=$(CURDIR)/bin/mini-kcm $(GO) test -count=1 -v -timeout 20m \
		-run TestTheFailoverDemoScriptRunsOnTheRealNode ./test/e2e/node/

# The image, tagged with the version: VERSION with "+" (not allowed in an image tag)
# replaced by "_", as Kubernetes' release images do (v0.0.0-master_abc1234def56 until the
# first tag). make image builds it, make deploy-image points every install at it.
IMAGE_REPO ?= mini-kcm
IMAGE_TAG ?= $(subst +,_,$(VERSION))
IMAGE ?= $(IMAGE_REPO):$(IMAGE_TAG)

.PHONY: image
image: check-version ## Build the container image $(IMAGE) (tagged with the version) with the version stamped in (Docker with BuildKit).
	@# The build context has no .git: the version information comes in as build arguments.
	docker build --build-arg VERSION=$(VERSION) --build-arg GIT_COMMIT=$(GIT_COMMIT) \
		--build-arg GIT_TREE_STATE=$(GIT_TREE_STATE) --build-arg BUILD_DATE=$(BUILD_DATE) -t $(IMAGE) .

.PHONY: deploy-image
deploy-image: ## Set the one image every install of deploy/ runs (deploy/image/) to $(IMAGE): kustomize edit set image.
	$(GO) build -C hack/tools/kustomize -o $(CURDIR)/bin/kustomize sigs.k8s.io/kustomize/kustomize/v5
	cd deploy/image && $(CURDIR)/bin/kustomize edit set image mini-kcm=$(IMAGE)
	@echo "deploy/, deploy/sharded/ and deploy/static-pod/pod/ now run $(IMAGE)"

# make release writes, under RELEASE_DIR, what an operator installs from: the static
# binaries of RELEASE_PLATFORMS, their OCI image index (hack/tools/images' release-image,
# no container daemon) as an image layout directory and as an OCI archive, every
# install's manifests pinned to that index by digest, and SHA256SUMS over all of it.
# RELEASE_IMAGE_REPO is the repository the image is named after, and pushed to: a full
# name, host/path, since containerd's CRI rewrites a short one (mini-kcm to
# docker.io/library/mini-kcm). deploy/README.md, "Installing a release", says how to use
# the directory.
RELEASE_DIR ?= _output/release/$(VERSION)
RELEASE_PLATFORMS := linux/amd64 linux/arm64
RELEASE_IMAGE_REPO ?= registry.local/mini-kcm
RELEASE_IMAGE = $(RELEASE_IMAGE_REPO):$(IMAGE_TAG)
# The image's org.opencontainers.image.source: the origin remote when it is an https
# URL, without any credentials in it; else none.
RELEASE_SOURCE ?= $(shell git remote get-url origin 2>/dev/null | sed -nE 's|^https://([^/@]*@)?|https://|p')
# Each install of deploy/, and the file of the release it renders to.
RELEASE_MANIFESTS := deploy=install.yaml deploy/sharded=install-sharded.yaml \
	deploy/static-pod=install-static-pod.yaml deploy/static-pod/pod=static-pod.yaml

.PHONY: release
release: check-version ## Release $(VERSION) in $(RELEASE_DIR): static binaries for linux/amd64 and linux/arm64, their multi-arch OCI image (layout and archive, no daemon), each install's manifests pinned to it by digest, SHA256SUMS.
	@# Everything is written to RELEASE_DIR.tmp and moved into place at the end, so that
	@# a failed run leaves no half release behind; an existing RELEASE_DIR is replaced
	@# only when it is an earlier release (it has SHA256SUMS).
	@dir="$(RELEASE_DIR)"; tmp="$$dir.tmp"; start=$$SECONDS; \
	if [[ -e "$$dir" && ! -f "$$dir/SHA256SUMS" ]]; then \
		echo "$$dir exists and is not a release (no SHA256SUMS): remove it or set RELEASE_DIR" >&2; exit 1; \
	fi; \
	rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	binaries=(); \
	for platform in $(RELEASE_PLATFORMS); do \
		binary="mini-kcm-$${platform/\//-}"; \
		echo ">> $$binary: mini-kcm $(VERSION), static"; \
		CGO_ENABLED=0 GOOS="$${platform%/*}" GOARCH="$${platform#*/}" $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o "$$tmp/$$binary" ./cmd/mini-kcm; \
		binaries+=("$$platform=$$tmp/$$binary"); \
	done; \
	echo ">> image/ and mini-kcm-image.oci.tar: $(RELEASE_IMAGE) for $(RELEASE_PLATFORMS)"; \
	$(GO) build -C hack/tools/images -o $(CURDIR)/bin/release-image ./release-image; \
	digest=$$(bin/release-image --layout "$$tmp/image" --archive "$$tmp/mini-kcm-image.oci.tar" \
		--name "$(RELEASE_IMAGE)" --version "$(VERSION)" --revision "$(GIT_COMMIT)" --source "$(RELEASE_SOURCE)" \
		"$${binaries[@]}"); \
	echo ">> the manifests of each install, with $(RELEASE_IMAGE_REPO)@$$digest"; \
	$(GO) build -C hack/tools/kustomize -o $(CURDIR)/bin/kustomize sigs.k8s.io/kustomize/kustomize/v5; \
	overlay=$$(mktemp -d); trap 'rm -rf "$$overlay"' EXIT; \
	for pair in $(RELEASE_MANIFESTS); do \
		printf '%s\n' "apiVersion: kustomize.config.k8s.io/v1beta1" "kind: Kustomization" \
			"resources:" "- $$(realpath --relative-to="$$overlay" "$${pair%%=*}")" \
			"images:" "- name: mini-kcm" "  newName: $(RELEASE_IMAGE_REPO)" "  digest: $$digest" \
			> "$$overlay/kustomization.yaml"; \
		bin/kustomize build "$$overlay" > "$$tmp/$${pair#*=}"; \
		echo ">>   $${pair%%=*}/ -> $${pair#*=}"; \
	done; \
	(cd "$$tmp" && find . -type f ! -path ./SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum > SHA256SUMS); \
	rm -rf "$$dir"; mv "$$tmp" "$$dir"; \
	echo ">> release $(VERSION) in $$dir in $$((SECONDS - start))s: $(RELEASE_IMAGE) = $(RELEASE_IMAGE_REPO)@$$digest"; \
	(cd "$$dir" && du -sh -- *)

.PHONY: kind-demo
kind-demo: ## Failover demo in a kind cluster (needs Docker or podman, kind and kubectl).
	deploy/kind/demo.sh

.PHONY: test-kind
test-kind: build ## deploy/kind/demo.sh under kind with podman, from a node image built here (root; installs podman and mmdebstrap if missing; ~6 min cold, cleans up after itself).
	@# hack/kind/run.sh builds what is missing (the control plane, kubeadm, kind and
	@# crictl in $(BIN_DIR), the node image beside it), runs the demo with kind's podman
	@# provider and removes the cluster, network, chains and mounts it made, also on failure.
	hack/kind/run.sh

.PHONY: bench
bench: build ## Side-by-side benchmarks against upstream kube-controller-manager (~20 min: the workloads took 14 at 526eaed; BENCH_SCALE=N for more).
	@hack/build-control-plane.sh >/dev/null
	$(GO) test -run '^$$' -bench . -benchmem ./test/bench/micro/
	@# The hot paths benchmarked beside their code: interning a cached pod, repacking a
	@# 300-pod Service's Endpoints.
	$(GO) test -run '^$$' -bench . -benchmem ./caches/cacheintern/ ./controllers/endpoints/subsets/
	@# What the shard coordinator's weighing costs the apiserver at 30 000 pods (~2 min).
	$(GO) test -run '^$$' -bench WeighingThePods -benchtime 5x ./test/bench/
	@# Every workload at upstream's default rate limit (20/30), and the Endpoints workload
	@# again at a raised one, as operators run it (Gardener: 100/200).
	$(GO) run ./test/bench/cmd/kcmbench --mini-kcm bin/mini-kcm \
		--kube-api-qps=20 --kube-api-burst=30 --raised-kube-api-qps=200 --raised-kube-api-burst=400

# Not part of bench, which it would nearly double: four control planes for the memory
# split (one leader and three sharded replicas, tenant-NNN and random namespace names)
# and four for the throughput by --shards.
.PHONY: bench-shards
bench-shards: build ## Sharded replicas against one leader (issue #17): pods cached, RSS and CPU per replica, pods/s by --shards (~10 min; BENCH_SCALE=N for more).
	@hack/build-control-plane.sh >/dev/null
	$(GO) run ./test/bench/cmd/shardbench --mini-kcm bin/mini-kcm

# Not part of bench: the scale workload of issue 33 (100 Deployments of 300 replicas over
# KWOK nodes, a Service each), both controller managers on fresh control planes, two
# rounds in alternating order, at upstream's scalability rate limit (100/100) and at the
# defaults (20/30). Hours at 30 000 pods on a 2-core machine; BENCH_SCALE=0.1 (3 000
# pods) and BENCH_SCALE_FLAGS='--rate-limits 100/100' take 20 minutes (docs/benchmarks.md
# lists the runs checked in and their commands).
.PHONY: bench-scale
bench-scale: build ## Side-by-side at 30 000 pods (issue 33): rounds, alternating order, min–max (hours; BENCH_SCALE=N multiplies the Deployments).
	@hack/build-control-plane.sh >/dev/null
	$(GO) run ./test/bench/cmd/scalebench --mini-kcm bin/mini-kcm $(BENCH_SCALE_FLAGS)

# Not part of bench: the outages of issue 47 (kube-apiserver frozen, stopped, killed and
# restarted, etcd stopped), side by side with kube-controller-manager, each at its shipped
# defaults, from the e2e outage test's RECOVERY lines (about 2.5 minutes a run).
.PHONY: bench-recovery
bench-recovery: build control-plane ## Recovery after control-plane outages, side by side with kube-controller-manager (ROUNDS=N runs of each, default 2; ~10 min).
	$(GO) run ./test/bench/cmd/recoverybench --mini-kcm bin/mini-kcm --rounds $(or $(ROUNDS),2)

# Not part of bench: the apiserver fence's window (issue 48), how long after a takeover
# the apiserver still admits a write of the old holder, over 35 takeovers (~2 minutes).
.PHONY: bench-fence
bench-fence: build control-plane ## The apiserver fence's window after a takeover, 5 runs of 7 takeovers (~2 min; results/fence-window.md, quoted by docs/fencing.md).
	$(GO) build $(RACE_FLAG) -ldflags "$(VERSION_LDFLAGS)" -o bin/mini-kcm-race ./cmd/mini-kcm
	MINI_KCM_BINARY=$(CURDIR)/bin/mini-kcm-race $(GO) run ./test/bench/cmd/fencebench --runs 5

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (also over the make test-long tests).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n "$$unformatted" ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@# -tags long adds the make test-long files and hides none, so one pass of each covers
	@# both builds; a file built only without the tag would escape it, so none may exist.
	@if git grep -l -e '^//go:build.*!long' -- '*.go'; then echo "the files above build only without -tags long, which lint does not see" >&2; exit 1; fi
	@# Static and -trimpath, as make build and the control plane build: the packages
	@# vet and staticcheck compile for their type information are then the very ones
	@# those builds compile (one compile each with an empty Go cache, not two).
	CGO_ENABLED=0 $(GO) vet -trimpath -tags long ./...
	CGO_ENABLED=0 GOFLAGS=-trimpath $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags long ./...

.PHONY: clean
clean: ## Remove build output (not the control plane cache in $(BIN_DIR)).
	rm -rf bin

.PHONY: clean-control-plane
clean-control-plane: ## Remove the cached control plane binaries.
	rm -rf "$(BIN_DIR)"

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'
