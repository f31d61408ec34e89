#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests and real
# mounts through /dev/fuse) on the normal build and, side by side with it, all of them
# again on a second build with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan;
# any report fails); builds everything with clang (build-clang, warnings as errors) and runs
# the unit tests on it, then every libFuzzer harness for TFS_FUZZ_SECONDS each (default 5;
# scripts/fuzz.sh, SKIP without clang). Ends with "N passed, N failed[, N skipped]",
# counting all three.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

# The normal run and the sanitizer run go side by side (two chains, each test one at a time
# within its chain): most of their time is waiting (remote timeouts, kill trials, stress
# readers), and one after the other they took 10+ minutes on 2 cores.  Every build is made
# first; each job's output goes to a log printed when all are done.
#   chain 1: the tests on the normal build
#   chain 2: the same tests under ASan + UBSan (gcc; the hf suite's Python comparisons left
#            out), with the stress readers for 16 s (the normal run's 30 s are the stress
#            test proper) and 4 kill trials per format (the normal run's 8: 32 in all)
#   then, each in whichever chain is free first: the clang build's unit tests, and fuzzing
#   (which of the two chains ends first changes with the machine and the selection: a fixed
#   order left one chain minutes behind the other)
rc=0

# ==== the sanitizer build ====
# halt_on_error: the first report ends the process; UBSan checks are recoverable by default,
# halt_on_error makes them fatal.  Reports go to files (log_path), not stderr: the daemon
# writes nowhere once daemonized (fuse_daemonize points its stderr at /dev/null), and a leak
# report at its exit would be lost.  Any report file fails the run.  LeakSanitizer works in
# the daemon (it exits normally after the unmount); tests/lsan.supp says what it forgives.
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Dwerror=true >/dev/null || exit 1
fi
asan_built=true
if ! ninja -C build-asan >/dev/null; then
	echo "test: the sanitizer build failed" >&2
	asan_built=false
	rm -f build-asan/meson-logs/testlog.json
fi
reports=$PWD/build-asan/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"

# ==== the same sources built by clang, warnings as errors (its unit tests run in chain 2) ====
# (the fuzz build compiles only what the harnesses use; this compiles everything)
rm -f build-clang/meson-logs/testlog.json
clang_built=false
if command -v clang >/dev/null 2>&1 && [ $# -eq 0 ]; then
	[ -f build-clang/build.ninja ] || CC=clang meson setup build-clang -Dwerror=true >/dev/null || rc=1
	if ninja -C build-clang >/dev/null; then
		clang_built=true
	else
		echo "test: the clang build failed" >&2
		rc=1
	fi
fi

# the summary counts what these runs write, never a log left by an earlier run
rm -f build/meson-logs/testlog.json build-asan/meson-logs/testlog.json
fuzz_log=$(mktemp)
# The sanitizer run leaves out the hf suite when no test is named: its cases compare with
# llama.cpp's Python converter and tokenizers, time spent in Python; the C they drive runs
# under the sanitizers in mount_hf, the hf unit tests and the fuzz harnesses.
asan_sel=("$@")
[ $# -eq 0 ] && asan_sel=(--no-suite hf)
echo "test: the normal and the sanitizer runs go side by side; their output follows when all are done"
jobdir=$(mktemp -d)
job_normal() {
	meson test -C build --print-errorlogs --num-processes 1 "$@"
}
job_asan() {
	$asan_built || return 1
	TFS_STRESS_SECONDS=${TFS_STRESS_SECONDS:-16} TFS_CRASH_KILLS=${TFS_CRASH_KILLS:-4} \
	ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:log_path=$reports/asan \
	LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan \
		meson test -C build-asan --print-errorlogs --num-processes 1 "${asan_sel[@]}"
}
# the clang build's unit tests (its C is what differs: the reference comparisons of the hf
# suite run on the normal build)
job_clang() {
	$clang_built || return 0
	meson test -C build-clang --print-errorlogs --num-processes 1 --no-suite mount --no-suite hf
}
job_fuzz() {
	TFS_FUZZ_JOBS=${TFS_FUZZ_JOBS:-1} bash scripts/fuzz.sh "${TFS_FUZZ_SECONDS:-5}" >"$fuzz_log" 2>&1
}
# start NAME ARGS...: job_NAME in the background, its output in $jobdir/NAME.log, its exit
# status in $jobdir/NAME.rc; how long it took in the log's last line
start() {
	local name=$1
	shift
	(
		t0=$SECONDS
		"job_$name" "$@"
		r=$?
		echo "test: $name took $((SECONDS - t0)) s"
		echo $r >"$jobdir/$name.rc"
	) >"$jobdir/$name.log" 2>&1 &
}
start normal "$@"
start asan
# each waiting job starts when a chain is free (wait -n: the first job to end)
for next in clang fuzz; do
	wait -n
	start $next
done
wait
for name in normal asan clang fuzz; do
	[ "$(cat "$jobdir/$name.rc" 2>/dev/null)" = 0 ] || rc=1
done
# no log: no test ran there (a selection that matched nothing, a build that failed)
[ -f build/meson-logs/testlog.json ] && [ -f build-asan/meson-logs/testlog.json ] || rc=1
echo "==== the normal build"
cat "$jobdir/normal.log"
echo "==== the sanitizer build (ASan + UBSan)"
cat "$jobdir/asan.log"
echo "==== the clang build's unit tests"
cat "$jobdir/clang.log"
echo "==== fuzzing"
cat "$fuzz_log"
cat "$jobdir/fuzz.log"
if [ -n "$(ls -A "$reports")" ]; then
	echo "test: sanitizer reports ($(ls "$reports" | wc -l)):" >&2
	for f in "$reports"/*; do echo "--- $f" >&2; head -40 "$f" >&2; done
	rc=1
fi
rm -rf "$jobdir"

# meson counts test programs; count every TAP case instead (both builds), each fuzz
# harness as one case, and each sanitizer report as a failure.
/usr/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json "$fuzz_log" \
	"$reports" build-clang/meson-logs/testlog.json "$([ $# -eq 0 ] && echo all)" <<'PY'
import json, os, re, sys
passed = failed = skipped = 0
fuzz_log = sys.argv[3]
failed += len(os.listdir(sys.argv[4]))  # each sanitizer report (a daemon's: no test saw it)
lines = []
for log in sys.argv[1:3]:
    if os.path.exists(log):
        lines += open(log).read().splitlines()
    else:
        failed += 1  # the sanitizer build did not build
if os.path.exists(sys.argv[5]):  # the clang build's unit tests (none without clang)
    lines += open(sys.argv[5]).read().splitlines()
elif os.path.exists("build-clang/build.ninja") and len(sys.argv) > 6 and sys.argv[6] == "all":
    failed += 1  # clang is there, and its build failed
for line in lines:
    t = json.loads(line)
    out = t.get("stdout") or ""
    cases = [l for l in out.splitlines() if re.match(r"^(not )?ok\b", l)]
    if not cases:
        if t["result"] == "SKIP":
            skipped += 1
        elif t["result"] in ("OK", "EXPECTEDFAIL"):
            passed += 1
        else:
            failed += 1
        continue
    for l in cases:
        # a TODO case is a known difference the test names (TAP: not a failure; meson
        # counts it as none): counted as skipped
        if "# SKIP" in l or "# skip" in l or re.search(r"# TODO\b", l):
            skipped += 1
        elif l.startswith("ok"):
            passed += 1
        else:
            failed += 1
    if t["result"] not in ("OK", "EXPECTEDFAIL", "SKIP") and not any(l.startswith("not ok") for l in cases):
        failed += 1  # crashed or timed out after its last case
for l in open(fuzz_log):
    if re.match(r"^fuzz_\w+: ok", l):
        passed += 1
    elif re.match(r"^(fuzz_\w+: FINDING|fuzz: build failed)", l):
        failed += 1
    elif l.startswith("SKIP: clang not found"):
        skipped += 1
print("%d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
PY
rm -f "$fuzz_log"
exit $rc
