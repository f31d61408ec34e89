#!/bin/sh
# Builds (meson + ninja in ./build) and runs the quantization benchmark: tensorfs against
# ggml_quantize_chunk from the npm package's libggml-base.so, one thread, side by side.
# usage: scripts/bench/quant.sh [-r rounds] [-m MiB] [TYPE...]
set -eu
cd "$(dirname "$0")/../.."
if [ ! -f build/build.ninja ]; then
	meson setup build --buildtype=release
fi
ninja -C build scripts/bench/bench_quant
export TFS_LLAMA_LIB="${TFS_LLAMA_LIB:-$(pwd)/build/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}"
exec ./build/scripts/bench/bench_quant "$@"
