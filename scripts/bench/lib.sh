# lib.sh - sourced by the benchmark scripts (POSIX sh), from the repository root.
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

# The Python they run imports the model writers the tests use (tests/mount: ggufgen, stgen),
# llama.cpp's bindings (tests/llama) and benchlib.py beside this file.
export PYTHONPATH="$(pwd)/tests/mount:$(pwd)/tests/llama:$(pwd)/scripts/bench${PYTHONPATH:+:$PYTHONPATH}"
