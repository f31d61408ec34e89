#!/bin/bash
# bench/repack.sh - how long `tensorfs unmount` takes to repack a big GGUF after one
# metadata change, against cp of the same file (and cp + sync), on the same file system,
# with a hot page cache; best of N runs each.  Also the daemon's peak RSS (VmHWM) during
# the repack.  Target: repack <= 1.2x cp.  Every round runs each measurement once, side by
# side (the machine is noisy: only ratios from one run mean anything).
#
# What a repack costs besides cp (measured on ext4 mounted with -o discard, virtio disk):
# the fsync (mandatory: `cp && sync` is the fair comparison), and freeing the replaced
# file, which the daemon pays when it closes the old source on exit and `tensorfs unmount`
# waits for: with online discard that is a synchronous TRIM of every freed block, about
# 0.6 s for 1.1 GiB ("rm of a hot copy" below).  `cp+sync+mv` pays it too (in the rename).
#
#   scripts/bench/repack.sh [-d DIR] [-s SIZE_MIB] [-n RUNS] [-k] [-r]
#     -d DIR   where the model is made (default /var/tmp/tfs-bench-repack; must not be tmpfs
#              for a meaningful figure)
#     -r       also on XFS (reflink=1) and btrfs images made and loop-mounted for the run
#              (root, xfsprogs, btrfs-progs), where the repack shares the unchanged
#              tensors' extents; prints the three file systems' figures side by side
# TFS_LLAMA_CPP=DIR (a llama.cpp checkout; gguf-py needs Debian's python3-numpy,
# python3-yaml, python3-sentencepiece) adds llama.cpp's gguf_new_metadata.py, the tool
# people use today for the same change, to every round.
#     -s MIB   model size (default 1100, i.e. > 1 GiB)
#     -n RUNS  runs of each measurement (default 3)
#     -k       keep DIR afterwards
# Needs root (FUSE mounts), python3 + numpy, and a built tensorfs (build/fs/tensorfs or
# $TENSORFS).  TENSORFS_B=<another binary> adds its repack to every round (A/B comparison).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
TENSORFS=${TENSORFS:-$here/build/fs/tensorfs}
dir=/var/tmp/tfs-bench-repack
size_mib=1100
runs=3
keep=0
reflink=0
while getopts "d:s:n:kr" o; do
	case $o in
	d) dir=$OPTARG ;;
	s) size_mib=$OPTARG ;;
	n) runs=$OPTARG ;;
	k) keep=1 ;;
	r) reflink=1 ;;
	*) sed -n '2,22p' "$0"; exit 2 ;;
	esac
done

# ==== -r: the same run on ext4 (DIR), then on XFS and btrfs images ====
if [ "$reflink" = 1 ]; then
	imgdir=$(mktemp -d /var/tmp/tfs-bench-fs.XXXXXX)
	cleanup_images() {
		for fs in xfs btrfs; do
			mountpoint -q "$imgdir/$fs" && umount "$imgdir/$fs"
		done
		rm -rf "$imgdir"
	}
	trap cleanup_images EXIT
	summary=()
	for fs in here xfs btrfs; do
		d=$dir
		if [ "$fs" != here ]; then
			mkdir -p "$imgdir/$fs"
			truncate -s $(((size_mib * 4 + 1024) << 20)) "$imgdir/$fs.img"
			case $fs in
			xfs) mkfs.xfs -q -m reflink=1 "$imgdir/$fs.img" ;;
			btrfs) mkfs.btrfs -q "$imgdir/$fs.img" ;;
			esac
			mount -o loop "$imgdir/$fs.img" "$imgdir/$fs"
			d=$imgdir/$fs/bench
		fi
		echo "==== $fs: $d"
		"$0" -d "$d" -s "$size_mib" -n "$runs" | tee "$imgdir/$fs.log"
		summary+=("$(printf '%-6s %s | %s | %s' "$fs" \
			"$(grep '^repack  ' "$imgdir/$fs.log" | awk '{print "repack " $5 " s"}')" \
			"$(grep '^repack / cp+sync ' "$imgdir/$fs.log" | sed 's/ *(.*//')" \
			"$(grep '^repack / gguf_new_metadata' "$imgdir/$fs.log" | sed 's/ *(.*//')")")
	done
	echo "==== summary (file system | repack | vs cp+sync | vs llama.cpp's gguf_new_metadata.py)"
	printf '%s\n' "${summary[@]}"
	exit 0
fi
[ -x "$TENSORFS" ] || { echo "no tensorfs binary at $TENSORFS (ninja -C build)" >&2; exit 1; }

mkdir -p "$dir"
model=$dir/model.gguf
mnt=$dir/mnt
mkdir -p "$mnt"
cleanup() {
	if grep -q " $mnt fuse.tensorfs " /proc/self/mounts 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	rm -f "$dir/copy.gguf" "$dir/victim.gguf"
	if [ "$keep" = 0 ]; then
		rm -rf "$dir"
	fi
}
trap cleanup EXIT

# Intervals are read from bash's own clock ($EPOCHREALTIME, no process): `date` costs 10-30 ms
# here, and was counted inside every interval, 10-20% of a repack that shares extents.
best() { printf '%s\n' "$@" | sort -g | head -1; }
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }

# ==== the model ====
if [ ! -f "$model" ] || [ "$(stat -c %s "$model")" -lt $((size_mib << 20)) ]; then
	echo "making a ${size_mib} MiB GGUF in $model ..."
	if [ -x "$here/scripts/bench/make-gguf.py" ] && "$here/scripts/bench/make-gguf.py" --help 2>/dev/null |
		grep -q -- "--size-mib"; then
		"$here/scripts/bench/make-gguf.py" --size-mib "$size_mib" "$model"
	else
		/usr/bin/python3 - "$model" "$size_mib" <<'EOF'
import struct, sys
import numpy as np
path, mib = sys.argv[1], int(sys.argv[2])
ntensors = 8
rows = (mib << 20) // ntensors // (4 * 4096)       # F32 [rows, 4096] each
align = 32
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b
kvs = [("general.architecture", "llama"), ("general.name", "bench")]
hdr = bytearray(b"GGUF" + struct.pack("<IQQ", 3, ntensors, len(kvs) + 1))
hdr += s("general.alignment") + struct.pack("<II", 4, align)
for k, v in kvs:
    hdr += s(k) + struct.pack("<I", 8) + s(v)
nbytes = rows * 4096 * 4
for i in range(ntensors):
    hdr += s("blk.%d.weight" % i) + struct.pack("<IQQIQ", 2, 4096, rows, 0, i * nbytes)
hdr += b"\0" * (-len(hdr) % align)
block = (np.arange(rows * 4096, dtype=np.float32) % 977 / 977).astype(np.float32)
with open(path, "wb") as f:
    f.write(hdr)
    for i in range(ntensors):
        (block + i).tofile(f)
EOF
	fi
fi
bytes=$(stat -c %s "$model")
echo "model: $model, $((bytes >> 20)) MiB, on $(df -T "$dir" | awk 'NR==2 {print $2 " " $1}')"
sync
cat "$model" >/dev/null   # hot cache

# ==== one round: cp, cp + sync, cp + sync + mv, rm, the repack(s) ====
elapsed() { python3 -c "print($2 - $1)"; }
t_cp=(); t_cps=(); t_rep=(); t_rm=(); t_rp=(); t_rpb=(); t_gnm=()
hwm_max=0

# the repack: mount rw, change one value, time `tensorfs unmount`
repack_once() { # BINARY RUN -> seconds in $last_t
	local bin=$1 i=$2 pid hwm_file hwm sampler a b
	cat "$model" >/dev/null
	"$bin" mount "$model" "$mnt" -o rw
	printf 'bench run %s' "$i" >"$mnt/metadata/general.name"
	pid=$(getfattr --absolute-names --only-values -n user.tensorfs.pid "$mnt")
	hwm_file=$dir/hwm
	: >"$hwm_file"
	# VmHWM only grows: the last sample before the daemon exits is its peak
	( while [ -r "/proc/$pid/status" ]; do
		v=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
		[ -n "$v" ] && echo "$v" >"$hwm_file"
		sleep 0.01
	done ) &
	sampler=$!
	a=$EPOCHREALTIME
	"$bin" unmount "$mnt" 2>"$dir/unmount.log" || { cat "$dir/unmount.log" >&2; exit 1; }
	b=$EPOCHREALTIME
	wait "$sampler" 2>/dev/null || true
	hwm=$(cat "$hwm_file"); hwm=${hwm:-0}
	[ "$hwm" -gt "$hwm_max" ] && hwm_max=$hwm
	grep -q "^done:" "$dir/unmount.log" || { cat "$dir/unmount.log" >&2; exit 1; }
	last_t=$(elapsed "$a" "$b")
}

for i in $(seq "$runs"); do
	rm -f "$dir/copy.gguf"; sync
	a=$EPOCHREALTIME; cp --reflink=never "$model" "$dir/copy.gguf"; b=$EPOCHREALTIME
	t_cp+=("$(elapsed "$a" "$b")")
	rm -f "$dir/copy.gguf"; sync
	a=$EPOCHREALTIME; cp --reflink=never "$model" "$dir/copy.gguf" && sync; b=$EPOCHREALTIME
	t_cps+=("$(elapsed "$a" "$b")")
	rm -f "$dir/copy.gguf"; sync
	# what a repack does besides copying: fsync, and replace a file (freeing the old one)
	cp --reflink=never "$model" "$dir/victim.gguf"; sync; cat "$dir/victim.gguf" >/dev/null
	a=$EPOCHREALTIME; cp --reflink=never "$model" "$dir/copy.gguf" && sync && mv "$dir/copy.gguf" "$dir/victim.gguf" && sync; b=$EPOCHREALTIME
	t_rep+=("$(elapsed "$a" "$b")")
	# freeing alone: rm of a hot, synced copy
	cat "$dir/victim.gguf" >/dev/null
	a=$EPOCHREALTIME; rm -f "$dir/victim.gguf" && sync; b=$EPOCHREALTIME
	t_rm+=("$(elapsed "$a" "$b")")
	sync
	# with TENSORFS_B, A and B take turns at going first (what ran before matters)
	if [ -n "${TENSORFS_B:-}" ] && [ $((i % 2)) = 0 ]; then
		repack_once "$TENSORFS_B" "b$i"; t_rpb+=("$last_t"); sync
	fi
	repack_once "$TENSORFS" "$i"
	t_rp+=("$last_t")
	if [ -n "${TFS_LLAMA_CPP:-}" ]; then
		rm -f "$dir/copy.gguf"; sync; cat "$model" >/dev/null
		a=$EPOCHREALTIME
		PYTHONPATH=$TFS_LLAMA_CPP/gguf-py /usr/bin/python3 \
			"$TFS_LLAMA_CPP/gguf-py/gguf/scripts/gguf_new_metadata.py" --force \
			--general-name "bench run $i" "$model" "$dir/copy.gguf" >/dev/null && sync
		b=$EPOCHREALTIME
		t_gnm+=("$(elapsed "$a" "$b")")
		rm -f "$dir/copy.gguf"
	fi
	sync
	if [ -n "${TENSORFS_B:-}" ] && [ $((i % 2)) = 1 ]; then
		repack_once "$TENSORFS_B" "b$i"; t_rpb+=("$last_t"); sync
	fi
done
name=$("$TENSORFS" info "$model" | awk '$1 == "general.name" {$1=$2=""; print}')
echo "general.name after the last repack:$name"

cp_b=$(best "${t_cp[@]}")
cps_b=$(best "${t_cps[@]}")
rep_b=$(best "${t_rep[@]}")
rm_b=$(best "${t_rm[@]}")
rp_b=$(best "${t_rp[@]}")
printf 'cp                  best of %d: %6.3f s  (%s)\n' "$runs" "$cp_b" "${t_cp[*]}"
printf 'cp && sync          best of %d: %6.3f s  (%s)\n' "$runs" "$cps_b" "${t_cps[*]}"
printf 'cp+sync+mv          best of %d: %6.3f s  (%s)\n' "$runs" "$rep_b" "${t_rep[*]}"
printf 'rm of a hot copy    best of %d: %6.3f s  (%s)\n' "$runs" "$rm_b" "${t_rm[*]}"
printf 'repack              best of %d: %6.3f s  (%s)\n' "$runs" "$rp_b" "${t_rp[*]}"
echo "repack / cp         = $(ratio "$rp_b" "$cp_b")x   (target <= 1.2x)"
echo "repack / cp+sync    = $(ratio "$rp_b" "$cps_b")x   (the repack fsyncs; cp does not)"
echo "repack / cp+sync+mv = $(ratio "$rp_b" "$rep_b")x   (and replaces the file: the old one is freed)"
echo "(repack - rm) / cp+sync = $(python3 -c "print('%.2f' % (($rp_b - $rm_b) / $cps_b))")x   (without freeing the old file)"
if [ -n "${TFS_LLAMA_CPP:-}" ]; then
	gnm_b=$(best "${t_gnm[@]}")
	printf 'gguf_new_metadata.py best of %d: %6.3f s  (%s)  [+ sync]\n' "$runs" "$gnm_b" "${t_gnm[*]}"
	echo "repack / gguf_new_metadata.py = $(ratio "$rp_b" "$gnm_b")x"
fi
if [ -n "${TENSORFS_B:-}" ]; then
	rpb_b=$(best "${t_rpb[@]}")
	printf 'repack B            best of %d: %6.3f s  (%s)  [%s]\n' "$runs" "$rpb_b" "${t_rpb[*]}" "$TENSORFS_B"
	echo "repack B / cp+sync  = $(ratio "$rpb_b" "$cps_b")x"
	echo "repack B / repack   = $(ratio "$rpb_b" "$rp_b")x"
fi
echo "daemon peak RSS (VmHWM) during the repack: $((hwm_max / 1024)) MiB"
