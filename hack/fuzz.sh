#!/usr/bin/env bash
# Runs every fuzz target of the main module for a short time (FUZZTIME, default 30000x
# each): long enough to catch a panic on odd input in CI, short enough to run always.
# The seed corpus of every target also runs in plain `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# A count rather than a duration: with a duration, go1.26's fuzz coordinator can report
# a spurious "context deadline exceeded" when the budget ends on a loaded machine
# (golang/go#75804, fixed in go1.27).
fuzztime=${FUZZTIME:-30000x}

# Only packages whose tests declare a fuzz target; the tools modules under hack/ are
# separate modules and are skipped.
mapfile -t dirs < <(grep -rl --include='*_test.go' --exclude-dir=hack --exclude-dir=.git '^func Fuzz' . | xargs -r -n1 dirname | sort -u)
# The repository has fuzz targets; finding none means the search broke, which must not
# pass as a fuzz run.
if ((${#dirs[@]} == 0)); then
	echo ">> FAIL: no fuzz targets found (the search for '^func Fuzz' in *_test.go found nothing)" >&2
	exit 1
fi
ran=0
for dir in "${dirs[@]}"; do
	# -vet=off: make lint vets every package (see make test-unit).
	# Listed by a static -trimpath build, as make lint and the control plane build, so
	# that it reuses what they compiled instead of compiling every dependency once more
	# (the fuzz-instrumented build below cannot share: it instruments them all).
	for target in $(CGO_ENABLED=0 GOFLAGS=-trimpath go test -vet=off -list '^Fuzz' "$dir" | grep '^Fuzz' || true); do
		echo ">> fuzzing $dir $target for $fuzztime"
		go test -vet=off -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$dir"
		ran=$((ran + 1))
	done
done
if ((ran == 0)); then
	echo ">> FAIL: files declare fuzz targets in ${dirs[*]}, but go test -list found none" >&2
	exit 1
fi
echo ">> fuzzed $ran targets"
