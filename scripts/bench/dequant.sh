#!/bin/sh
# Builds (meson + ninja in ./build, optimized) and runs the dequantization benchmark.
# usage: scripts/bench/dequant.sh [-r rounds] [-m MiB] [TYPE...]
set -eu
cd "$(dirname "$0")/../.."
if [ ! -f build/build.ninja ]; then
	meson setup build --buildtype=release
fi
ninja -C build scripts/bench/bench_dequant
exec ./build/scripts/bench/bench_dequant "$@"
