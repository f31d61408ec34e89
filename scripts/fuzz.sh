#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ into build-fuzz (clang, ASan+UBSan) and runs
# each for SECONDS (default 10).  Fails on any finding: a sanitizer report, a crash, a broken
# invariant of an opened model, a timeout (10 s per input) or a leak; the input is kept as
# build-fuzz/findings/<harness>-crash-<sha1>.
#
# Usage: bash scripts/fuzz.sh [SECONDS] [HARNESS...]
#   TFS_FUZZ_JOBS=N   harnesses run side by side (default 1)
#   TFS_FUZZ_BUILD_ONLY=1   only build them
#   TFS_FUZZ_OPT=0   a new build-fuzz at -O0 (default -O1: faster to run, 3x slower to build)
#
# Every harness first replays its seeds (tests/data files of its format, tests/fuzz/seeds/<h>/)
# and the regression inputs of tests/data/fuzz/<h>/, then mutates them; the corpus it grows is
# kept in build-fuzz/corpus/<h>/ for the next run.  Without clang: "SKIP: clang not found".
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:-10}
[ $# -gt 0 ] && shift
all=(gguf safetensors st_index ollama_manifest ollama_blob journal value imatrix hf_vocab hf_meta hf_plan s3)
harnesses=("${all[@]}")
[ $# -gt 0 ] && harnesses=("$@")
jobs=${TFS_FUZZ_JOBS:-1}

if ! command -v clang >/dev/null 2>&1; then
	echo "SKIP: clang not found (the libFuzzer harnesses need it; Debian: clang libclang-rt-14-dev)"
	exit 0
fi

# -O1 with line tables only (the stacks of a report still name lines): the build took 164 s
# of CPU at -O2 -g, 134 s so; libFuzzer's own advice for its targets is -O1 or -O2.
# TFS_FUZZ_OPT=0 (scripts/test.sh's few seconds a harness): 29 s of CPU instead of 88 s, for
# 55-70% of -O1's executions a second (fuzz_gguf 156K against 293K in 5 s).  The level is
# set when build-fuzz is made; remove build-fuzz to change it.
if [ ! -f build-fuzz/build.ninja ]; then
	CC=clang meson setup build-fuzz -Dfuzz=enabled -Db_sanitize=address,undefined \
		-Db_lundef=false -Doptimization="${TFS_FUZZ_OPT:-1}" -Ddebug=false \
		"-Dc_args=-fsanitize=fuzzer-no-link -gline-tables-only" -Dwerror=true >/dev/null || exit 1
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("tests/fuzz/fuzz_$h"); done
ninja -C build-fuzz "${targets[@]}" >/dev/null || { echo "fuzz: build failed" >&2; exit 1; }
# TFS_FUZZ_BUILD_ONLY=1: the build alone (scripts/test.sh makes it early, at low priority)
[ "${TFS_FUZZ_BUILD_ONLY:-}" = 1 ] && exit 0

# seeds: a fresh directory per harness, filled from tests/data
seed_files() {
	case $1 in
	gguf) find tests/data/gguf examples -name '*.gguf' -size -1M ;;
	safetensors) find tests/data/safetensors -name '*.safetensors' ;;
	ollama_manifest) find tests/data/ollama/models/manifests -type f ;;
	ollama_blob) find tests/data/ollama/models/blobs -type f -size -64k ;;
	esac
	[ -d "tests/fuzz/seeds/$1" ] && find "tests/fuzz/seeds/$1" -type f
	[ -d "tests/data/fuzz/$1" ] && find "tests/data/fuzz/$1" -type f
}

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
mkdir -p build-fuzz/findings build-fuzz/logs

run_one() {
	local h=$1 seeds=build-fuzz/seeds/$1 corpus=build-fuzz/corpus/$1 log=build-fuzz/logs/$1.log
	rm -rf "$seeds"
	mkdir -p "$seeds" "$corpus"
	# named by content: files of the same name in different directories all count
	seed_files "$h" | while read -r f; do cp "$f" "$seeds/$(sha1sum <"$f" | cut -c1-40)"; done
	build-fuzz/tests/fuzz/fuzz_"$h" "$corpus" "$seeds" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
		-artifact_prefix="build-fuzz/findings/$h-" >"$log" 2>&1
	local rc=$? execs rate
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	if [ $rc -eq 0 ]; then
		echo "fuzz_$h: ok, ${execs:-?} execs in ${secs}s (${rate:-?}/s), corpus $(ls "$corpus" | wc -l)"
	else
		echo "fuzz_$h: FINDING (exit $rc), see $log:"
		grep -E "FUZZ FINDING|ERROR: |runtime error|SUMMARY|Test unit written" "$log" | head -8
	fi
	return $rc
}

fail=0
running=0
pids=()
for h in "${harnesses[@]}"; do
	run_one "$h" &
	pids+=($!)
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait "${pids[0]}" || fail=1
		pids=("${pids[@]:1}")
		running=$((running - 1))
	fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ $fail -eq 0 ] && echo "fuzz: ${#harnesses[@]} harnesses, ${secs}s each, no findings"
exit $fail
