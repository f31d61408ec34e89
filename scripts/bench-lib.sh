# bench-lib.sh - sourced by the benchmark scripts (POSIX sh), from the repository root.
#
# bench_setup NAME [DIR]: sets TENSORFS (unless given: builds build/fs/tensorfs, a release
# build when there is none yet) and DIR (the argument, or a temporary directory removed on
# exit).  NAME prefixes error messages.
bench_setup() {
	if [ -z "${TENSORFS:-}" ]; then
		if [ ! -f build/build.ninja ]; then
			meson setup build --buildtype=release >/dev/null
		fi
		if ! out=$(ninja -C build fs/tensorfs 2>&1); then
			printf '%s\n%s: the build failed\n' "$out" "$1" >&2
			exit 1
		fi
		TENSORFS=$(pwd)/build/fs/tensorfs
	fi
	DIR=${2:-}
	CLEAN=
	if [ -z "$DIR" ]; then
		DIR=$(mktemp -d /tmp/tfs-bench-XXXXXX)
		CLEAN=$DIR
	fi
	mkdir -p "$DIR"
	trap '[ -n "$CLEAN" ] && rm -rf "$CLEAN"' EXIT
}
