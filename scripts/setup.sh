#!/usr/bin/env bash
# Installs what is missing (Debian 12, as root) and builds tensorfs into ./build.
# Usage: bash scripts/setup.sh [--release]
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(gcc meson ninja-build pkg-config libfuse3-dev fuse3 libjansson-dev libssl-dev
      libcriterion-dev python3-numpy attr)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# the independent GGUF reader used by the write tests comes from npm
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# clang and its libFuzzer/sanitizer runtimes, for scripts/fuzz.sh only: the build is gcc's,
# and without clang the fuzz harnesses are skipped (so a non-root setup does not need them)
for p in clang libclang-rt-14-dev; do
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

buildtype=debugoptimized
[ "${1:-}" = "--release" ] && buildtype=release
if [ ! -f build/build.ninja ]; then
	meson setup build --buildtype="$buildtype" -Dwerror=true >/dev/null
fi
ninja -C build >/dev/null
echo "setup: built build/fs/tensorfs" >&2
