#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests and real
# mounts through /dev/fuse), then all of them again against a second build with
# AddressSanitizer and UndefinedBehaviorSanitizer (build-asan; any report fails), then
# builds everything with clang (build-clang, warnings as errors) and runs the unit tests on
# it, then every libFuzzer harness for TFS_FUZZ_SECONDS each (default 5; scripts/fuzz.sh, SKIP
# without clang). Ends with "N passed, N failed[, N skipped]", counting all three.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

meson test -C build --print-errorlogs --num-processes 1 "$@"
rc=$?

# ==== the same tests under ASan + UBSan (gcc) ====
# halt_on_error: the first report ends the process; UBSan checks are recoverable by default,
# halt_on_error makes them fatal.  Reports go to files (log_path), not stderr: the daemon
# writes nowhere once daemonized (fuse_daemonize points its stderr at /dev/null), and a leak
# report at its exit would be lost.  Any report file fails the run.  LeakSanitizer works in
# the daemon (it exits normally after the unmount); tests/lsan.supp says what it forgives.
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Dwerror=true >/dev/null || exit 1
fi
asan_rc=0
reports=$PWD/build-asan/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
if ninja -C build-asan >/dev/null; then
	ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:log_path=$reports/asan \
	LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan \
		meson test -C build-asan --print-errorlogs --num-processes 1 "$@" || asan_rc=$?
else
	echo "test: the sanitizer build failed" >&2
	asan_rc=1
	rm -f build-asan/meson-logs/testlog.json
fi
if [ -n "$(ls -A "$reports")" ]; then
	echo "test: sanitizer reports ($(ls "$reports" | wc -l)):" >&2
	for f in "$reports"/*; do echo "--- $f" >&2; head -40 "$f" >&2; done
	asan_rc=1
fi
[ $asan_rc -ne 0 ] && rc=$asan_rc

# ==== the same sources built by clang, warnings as errors, and the unit tests on them ====
# (the fuzz build below compiles only what the harnesses use; this compiles everything)
rm -f build-clang/meson-logs/testlog.json
if command -v clang >/dev/null 2>&1 && [ $# -eq 0 ]; then
	[ -f build-clang/build.ninja ] || CC=clang meson setup build-clang -Dwerror=true >/dev/null || rc=1
	if ninja -C build-clang >/dev/null; then
		meson test -C build-clang --print-errorlogs --num-processes 1 --no-suite mount || rc=1
	else
		echo "test: the clang build failed" >&2
		rc=1
	fi
fi

# ==== fuzzing (clang) ====
fuzz_log=$(mktemp)
TFS_FUZZ_JOBS=${TFS_FUZZ_JOBS:-1} bash scripts/fuzz.sh "${TFS_FUZZ_SECONDS:-5}" 2>&1 | tee "$fuzz_log"
fuzz_rc=${PIPESTATUS[0]}
[ $fuzz_rc -ne 0 ] && rc=$fuzz_rc

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
        if "# SKIP" in l or "# skip" in l:
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
