#!/bin/bash
# bench/ab.sh - the same benchmarks on two builds, taken in turn in one run, for a change that
# must not change speed (a restructuring): dequantization and quantization (the C benchmarks
# of each build), reading a 1 GiB model through the mount, and the repack after a metadata
# change.  Each benchmark prints its own side-by-side ratios; compare A's with B's.
#
#   scripts/bench/ab.sh OLD_BUILD_DIR [NEW_BUILD_DIR] [-r ROUNDS]
#
# A build directory holds fs/tensorfs and the benchmark programs (scripts/bench/bench_* or,
# before they moved, scripts/bench_*).  NEW_BUILD_DIR defaults to build/.  ROUNDS (default 2):
# how often each pair is taken, alternating A and B.  Needs root (FUSE), numpy, and the npm
# package's libggml-base.so for the quantization benchmark (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n '2,13p' "$0"; exit 2; }
A=$(cd "$1" && pwd)
B=$(cd "${2:-build}" && pwd)
rounds=2
[ "${3:-}" = -r ] && rounds=${4:-2}
export TFS_LLAMA_LIB="${TFS_LLAMA_LIB:-$(pwd)/build/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}"

prog() { # BUILD NAME: the benchmark program of that build
	if [ -x "$1/scripts/bench/bench_$2" ]; then echo "$1/scripts/bench/bench_$2"
	else echo "$1/scripts/bench_$2"; fi
}
for b in "$A" "$B"; do
	for p in fs/tensorfs; do [ -x "$b/$p" ] || { echo "ab: $b/$p missing" >&2; exit 1; }; done
	for n in dequant quant; do [ -x "$(prog "$b" $n)" ] || { echo "ab: no bench_$n in $b" >&2; exit 1; }; done
done
echo "A = $A"
echo "B = $B"
for r in $(seq "$rounds"); do
	for side in A B; do
		b=$A; [ $side = B ] && b=$B
		echo "==== round $r, $side: dequantization (GB/s; ratio to memcpy)"
		"$(prog "$b" dequant)" -r 3 -m 64 Q4_K Q8_0 Q6_K F16 BF16 IQ4_XS
		echo "==== round $r, $side: quantization (MB/s; ratio to ggml)"
		"$(prog "$b" quant)" -r 3 -m 16 Q4_K Q8_0 Q6_K Q4_0 IQ4_NL
	done
done
work=$(mktemp -d /var/tmp/tfs-ab-XXXXXX)
trap 'rm -rf "$work"' EXIT
for r in $(seq "$rounds"); do
	for side in A B; do
		b=$A; [ $side = B ] && b=$B
		echo "==== round $r, $side: reading through the mount (scripts/bench/read.sh)"
		TENSORFS=$b/fs/tensorfs RUNS=3 bash scripts/bench/read.sh "$work/read"
	done
done
echo "==== repack after a metadata change: B, with A's repack in every round (TENSORFS_B)"
TENSORFS=$B/fs/tensorfs TENSORFS_B=$A/fs/tensorfs bash scripts/bench/repack.sh -d "$work/repack" -n "$((rounds + 1))"
