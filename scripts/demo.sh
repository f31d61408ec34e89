#!/usr/bin/env bash
# The main job on the built-in sample model: installs what is missing for it (the build's
# packages and numpy: the tests' references stay with scripts/test.sh), builds,
# mounts examples/tiny-llama.gguf, shows metadata and a tensor through numpy,
# and unmounts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --demo
T=build/fs/tensorfs
MNT=$(mktemp -d /tmp/tensorfs-demo.XXXXXX)
cleanup() { mountpoint -q "$MNT" && { $T unmount "$MNT" || fusermount3 -u "$MNT"; }; rmdir "$MNT" 2>/dev/null || true; }
trap cleanup EXIT

say() { printf '\n$ %s\n' "$*"; }
say mount.tensorfs examples/tiny-llama.gguf "$MNT"
$T mount examples/tiny-llama.gguf "$MNT"
say ls "$MNT" "$MNT/metadata"
ls "$MNT"; ls "$MNT/metadata"
say cat "$MNT/metadata/general.architecture"
cat "$MNT/metadata/general.architecture"
say ls -l "$MNT/tensors" \| head -5
ls -l "$MNT/tensors" | head -5
say getfattr -d "$MNT/tensors/blk.0.ffn_down.weight"
getfattr -d --absolute-names "$MNT/tensors/blk.0.ffn_down.weight"
say python3 numpy on tensors/output_norm.weight, f32/ and npy/ of a Q8_0 tensor
/usr/bin/python3 - "$MNT" <<'PY'
import sys, numpy as np
m = sys.argv[1]
a = np.fromfile(m + "/tensors/output_norm.weight", dtype="<f4")
print("output_norm.weight", a.shape, a.dtype, "mean %.4f" % a.mean())
w = np.fromfile(m + "/f32/blk.0.ffn_down.weight", dtype="<f4").reshape(64, 256)
print("f32/blk.0.ffn_down.weight (Q8_0 -> float32)", w.shape, "std %.4f" % w.std())
n = np.load(m + "/npy/blk.0.ffn_down.weight.npy", mmap_mode="r")
print("npy/blk.0.ffn_down.weight.npy", n.shape, n.dtype, "same values:", bool((n == w).all()))
PY
say tensorfs unmount "$MNT"
$T unmount "$MNT"
echo "demo: ok"
