#!/usr/bin/env bash
# run.sh BUILD_DIR [SECONDS] - run every libFuzzer target built in BUILD_DIR
# (meson -Dfuzz=true, see the Makefile's `fuzz` target) for SECONDS each
# (default 30), one after the other: the machine has 2 CPUs.
#
# Seeds come from fuzz/corpus/<target>/ and are copied into the scratch
# corpus fuzz/corpus-<target>/ (git-ignored), which grows across runs; the
# repository's seeds are never written. Crash reproducers land in
# BUILD_DIR/fuzz-artifacts/. Exits non-zero if any fuzzer crashed or is
# missing.
set -u

build=${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS]}
secs=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
targets="http wal resp btree pload_http pload_resp hll rdb"

# UBSan only prints by default; a finding must fail the run.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

status=0
for t in $targets; do
	fuzzer=$build/fuzz/fuzz_$t
	if [ ! -x "$fuzzer" ]; then
		echo "run.sh: $fuzzer not built (meson setup with -Dfuzz=true, then ninja)" >&2
		status=1
		continue
	fi
	corpus=$here/corpus-$t
	artifacts=$build/fuzz-artifacts
	mkdir -p "$corpus" "$artifacts"
	if [ -d "$here/corpus/$t" ]; then
		cp -n "$here/corpus/$t"/* "$corpus"/ 2>/dev/null || true
	fi
	echo "== fuzz_$t for ${secs}s, corpus $corpus"
	if ! "$fuzzer" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$artifacts/$t-" "$corpus"; then
		echo "run.sh: fuzz_$t FAILED; reproduce with: $fuzzer $artifacts/$t-crash-*" >&2
		status=1
	fi
done
exit $status
