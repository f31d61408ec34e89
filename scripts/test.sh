#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests and real
# mounts through /dev/fuse) on the normal build and, side by side with it, all of them
# again on a second build with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan;
# any report fails); builds everything with clang (build-clang, warnings as errors) and runs
# the unit tests on it, then every libFuzzer harness for TFS_FUZZ_SECONDS each (default 5;
# scripts/fuzz.sh, SKIP without clang). Ends with a line per build and then the total,
# "N passed, N failed[, N skipped]".
#   bash scripts/test.sh            everything (from a fresh clone: setup and every build)
#   bash scripts/test.sh NAME...    those tests on the normal and the sanitizer builds
#   bash scripts/test.sh --quick    the quick tier on a built tree (the normal build only):
#       the tests of meson's suite "quick" (the unit tests but the long ones) and in each
#       mount module the cases tests/mount/harness.py's @quick marks (TFS_QUICK=1), about
#       one real mount per feature; see tests/README.md
set -uo pipefail
cd "$(dirname "$0")/.."
# measure KIND NAME COMMAND...: COMMAND; with TFS_CPU_LOG=FILE, its CPU-seconds on a line
# "CPU wall NAME KIND" of FILE, as each test's (below): setup, builds and fuzzing too, so
# that the file's lines add up to the run's CPU
measure() {
	local kind=$1 name=$2
	shift 2
	if [ -n "${TFS_CPU_LOG:-}" ]; then
		TFS_CPU_TAG=$kind TFS_CPU_NAME=$name bash scripts/bench/cpu-of.sh "$@"
	else
		"$@"
	fi
}
# Disk: a fresh clone's full run peaked at 9.6 GB in the clone and 11 GB of the file system
# (mounts' files in /tmp too): the converter's cache (build/refconv-cache, 6.8 GB, kept for
# the next run), the builds (1.5 GB with build/npm), the modules' work folders while they
# run.  Less than that free makes failures that say only ENOSPC (a CI run did): said first.
need_mb=12000
free_mb=$(df -Pm . | awk 'NR == 2 { print $4 }')
if [ $# -eq 0 ] && [ -n "$free_mb" ] && [ "$free_mb" -lt "$need_mb" ] &&
	[ ! -d build/refconv-cache ]; then
	echo "test: warning: $free_mb MB free on $(df -P . | awk 'NR == 2 { print $6 }');" \
		"a run of every test from a fresh clone needs about $need_mb MB" >&2
fi
quick=false
if [ "${1:-}" = --quick ]; then
	quick=true
	shift
	ninja -C build >/dev/null || exit 1
else
	measure setup setup bash scripts/setup.sh || exit 1
fi

# The normal run and the sanitizer run go side by side (three chains, each test one at a time
# within its chain): most of their time is waiting (remote timeouts, kill trials, stress
# readers), and one after the other they took 10+ minutes on 2 cores.  The normal build is
# made first (setup.sh); the sanitizer and the clang builds are made in their chains, while
# the other chain's tests run (the first minutes of the normal chain wait more than they
# compute).  Each job's output goes to a log printed when all are done.
#   chain 1: the tests on the normal build but the reference comparisons (unit tests, real
#            mounts, lint)
#   chain 1b: the normal build's comparisons with the reference tools (suites hf and quant,
#            CPU-bound Python: beside chain 1's waits; job_ref says more)
#   chain 2: the sanitizer build, then the same tests under ASan + UBSan (gcc; the hf suite's
#            Python comparisons left out), with the stress readers for 6 s (the normal
#            run's 12 s are the stress test proper) and 4 kill trials per format (the normal
#            run's 8: 32 in all), but ASAN2's modules
#   chain 2b: ASAN2's modules on the sanitizer build, when chain 2 has made it (about half of
#            the sanitizer tests' time: in one chain they ran on for minutes after the
#            others, one core idle, and most of their wall time is waiting, which a fourth
#            chain fills)
#   then, each in whichever chain is free first: NORMAL2's and NORMAL3's modules of chain 1
#   (its last ones, which otherwise ran alone at the end), fuzzing, and the clang build's unit
#   tests
#   (which chain ends first changes with the machine and the selection: a fixed order left
#   one chain minutes behind the other); the clang and fuzz builds begin at the
#   start, at the lowest CPU priority, in the CPU time the chains leave idle
rc=0

# ==== the sanitizer build ====
# halt_on_error: the first report ends the process; UBSan checks are recoverable by default,
# halt_on_error makes them fatal.  ASan's and LeakSanitizer's reports go to files
# (log_path); gcc's combined runtime writes UBSan's to stderr whatever log_path says, and a
# daemon's stderr goes to the file tests/mount/harness.py names (TFS_DAEMON_STDERR), which
# fails the case during which a report appears there or in $reports.  A report no case took
# fails the run.  LeakSanitizer works in the daemon (it exits normally after the unmount);
# tests/lsan.supp says what it forgives.
reports=$PWD/build-asan/sanitizer-reports
reports2=$PWD/build-asan/sanitizer-reports-2   # (ASAN2's run: its reports apart)
rm -rf "$reports" "$reports2"
$quick || mkdir -p "$reports" "$reports2"
# The sanitizer build's modules that run in a chain of their own (job_asan2) when no test is
# named: about half of the sanitizer run's time (tests/README.md: "How long")
ASAN2=(mount_hf_moe mount_hf mount_hf_export mount_quantize mount_imatrix quant_llama
	mount_hf_mmproj)
# The normal build's modules that run as two jobs of their own when no test is named
# (job_normal2, job_normal3), each started in whichever chain is free first: the last of the
# normal chain's, which ran on alone for minutes after the sanitizer chain had ended (a
# fresh-clone run, 1405 s: the normal chain 1356 s, the sanitizer's 839; the cores 62% and
# then 25% busy in its last minutes).  As one job (217 s) it ended the run alone 63 s after
# the others (910 s in all); halved, by the modules' wall time (mount_remote mostly waits on
# its timeouts), the halves start in the first two chains to end.
NORMAL2=(mount_remote mount_crash mount_s3 mount_cli mount_shrink)
NORMAL3=(mount_stress mount_hostile mount_quantize mount_quantize_cache)
# At -O1 (with debug information, for the reports' stacks): the build took 258 s of CPU at
# meson's -O2 and 172 s so, and the sanitizer tests ran as fast (mount_quantize 34 -> 39 s,
# mount_hf_export 95 -> 81 s of CPU: noise of a loaded machine either way).  Its debug
# information is gcc's -g1 (line tables and functions, no types or variables): the reports'
# stacks are the same, inlined frames included, and codec/ and fs/ compiled in 87 s of CPU,
# not 110 at -g.
build_asan() {
	[ -f build-asan/build.ninja ] ||
		meson setup build-asan -Db_sanitize=address,undefined -Dwerror=true \
			-Doptimization=1 -Ddebug=false -Dc_args=-g1 >/dev/null || return 1
	# (at a lower CPU priority: the first minutes' CPU goes first to the normal chain and the
	# reference comparisons, the run's longest chains: in a run where the build took its
	# even share, the normal chain ended last, alone for minutes with the cores partly idle)
	measure build build-asan nice -n 5 ninja -C build-asan >/dev/null
}

# ==== the same sources built by clang, warnings as errors (its unit tests, in a chain) ====
# (the fuzz build compiles only what the harnesses use; this compiles everything).  At -O1
# without debug information: clang's warnings come from its front end, whatever the level;
# the build took 85 s of CPU at meson's default -O0 -g and 64 s so, and the unit tests run
# faster.
rm -f build-clang/meson-logs/testlog.json
build_clang() {
	[ -f build-clang/build.ninja ] ||
		CC=clang meson setup build-clang -Dwerror=true -Doptimization=1 -Ddebug=false \
			>/dev/null || return 1
	measure build build-clang ninja -C build-clang >/dev/null
}

# the summary counts what these runs write, never a log left by an earlier run
rm -f build/meson-logs/testlog.json build/meson-logs/testlog-ref.json \
	build/meson-logs/testlog-normal2.json build/meson-logs/testlog-normal3.json \
	build-asan/meson-logs/testlog.json build-asan/meson-logs/testlog-asan2.json \
	build*/meson-logs/testlog*-cpu-of.sh.json
fuzz_log=$(mktemp)
# the harnesses at -O0: each runs 5 s here, and -O0 builds in a third of -O1's CPU (29 s of
# 88) for 55-70% of its executions (scripts/fuzz.sh)
export TFS_FUZZ_OPT=${TFS_FUZZ_OPT:-0}
# The sanitizer run leaves out the hf suite when no test is named: its cases compare with
# llama.cpp's Python converter and tokenizers, time spent in Python; the C they drive runs
# under the sanitizers in mount_hf, the hf unit tests and the fuzz harnesses.
# Nor do the sanitizer and the clang runs repeat the lint suite (pyflakes, structure: they
# read the sources, not a build).
# TFS_CPU_LOG=FILE: each test's CPU-seconds (its daemons' included), wall seconds, name and
# chain appended to FILE (scripts/bench/cpu-of.sh); `sort -rn FILE` ranks them
wrap=()
[ -n "${TFS_CPU_LOG:-}" ] && wrap=(--wrapper "$PWD/scripts/bench/cpu-of.sh")
asan_sel=("$@")
[ $# -eq 0 ] && asan_sel=(--no-suite hf --no-suite lint)
jobdir=$(mktemp -d)
# all_but DIR NAME... -- SELECTION...: the tests of meson's SELECTION in build DIR but those
# NAMEs, one name a line (the normal chain's but NORMAL2's, the sanitizer chain's but ASAN2's)
all_but() {
	local dir=$1 skip=() t
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		skip+=("$1")
		shift
	done
	shift
	meson test -C "$dir" --no-rebuild --list "$@" 2>/dev/null | while read -r t; do
		t=${t##* / }
		[[ " ${skip[*]} " == *" $t "* ]] || echo "$t"
	done
}
job_normal() {
	if $quick; then
		TFS_QUICK=1 TFS_STRESS_SECONDS=${TFS_STRESS_SECONDS:-4} TFS_CRASH_KILLS=${TFS_CRASH_KILLS:-1} \
			TFS_CPU_TAG=quick meson test -C build "${wrap[@]}" --print-errorlogs --num-processes 1 \
			--suite quick "$@"
	elif [ $# -gt 0 ]; then
		TFS_CPU_TAG=normal meson test -C build "${wrap[@]}" --print-errorlogs --num-processes 1 "$@"
	else   # all of the selection but NORMAL2's and NORMAL3's modules
		local sel
		mapfile -t sel < <(all_but build "${NORMAL2[@]}" "${NORMAL3[@]}" -- --no-suite hf \
			--no-suite quant)
		TFS_CPU_TAG=normal meson test -C build "${wrap[@]}" --print-errorlogs --num-processes 1 \
			--no-rebuild "${sel[@]}"
	fi
}
# NORMAL2's and NORMAL3's modules (each its own log: --logbase)
job_normal2() {
	[ "$everything" = all ] || return 0
	TFS_CPU_TAG=normal2 meson test -C build "${wrap[@]}" --print-errorlogs --num-processes 1 \
		--no-rebuild --logbase testlog-normal2 "${NORMAL2[@]}"
}
job_normal3() {
	[ "$everything" = all ] || return 0
	TFS_CPU_TAG=normal3 meson test -C build "${wrap[@]}" --print-errorlogs --num-processes 1 \
		--no-rebuild --logbase testlog-normal3 "${NORMAL3[@]}"
}
# the normal build's comparisons with the reference tools (suites hf and quant: llama.cpp's
# converter and llama_model_quantize, in Python), in a chain of their own beside the mount
# tests: those wait (timeouts, kill trials, servers starting) and these compute, so side by
# side they fill the two cores that one chain after the other left a third idle.  Its own
# log (meson's --logbase): two runs of one build dir must not write one testlog.json.  An
# input both chains convert is converted once: reference.py's cache holds a lock per key.
job_ref() {
	[ "$everything" = all ] || return 0
	TFS_CPU_TAG=ref meson test -C build "${wrap[@]}" --print-errorlogs --num-processes 1 \
		--no-rebuild --logbase testlog-ref --suite hf --suite quant
}
# sanitized REPORTS TAG meson-test-arguments...: a run on the sanitizer build, its reports
# in REPORTS
sanitized() {
	local r=$1 tag=$2
	shift 2
	TFS_STRESS_SECONDS=${TFS_STRESS_SECONDS:-6} TFS_CRASH_KILLS=${TFS_CRASH_KILLS:-4} \
	TFS_SANITIZER_REPORTS=$r \
	ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:log_path=$r/asan \
	LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$r/ubsan \
	TFS_CPU_TAG=$tag \
		meson test -C build-asan "${wrap[@]}" --print-errorlogs --num-processes 1 --no-rebuild "$@"
}
job_asan() {
	$quick && return 0
	if ! build_asan; then
		echo 1 >"$jobdir/asan.built"
		echo "test: the sanitizer build failed"
		return 1
	fi
	echo 0 >"$jobdir/asan.built"
	if [ "$everything" = all ]; then   # all of the selection but ASAN2's modules
		local sel
		mapfile -t sel < <(all_but build-asan "${ASAN2[@]}" -- "${asan_sel[@]}")
		sanitized "$reports" asan "${sel[@]}"
	else
		sanitized "$reports" asan "${asan_sel[@]}"
	fi
}
# ASAN2's modules, when job_asan has made the sanitizer build (its own log: --logbase)
job_asan2() {
	[ "$everything" = all ] || return 0
	until [ -f "$jobdir/asan.built" ]; do sleep 1; done
	[ "$(cat "$jobdir/asan.built")" = 0 ] || return 0   # (job_asan said why)
	sanitized "$reports2" asan2 --logbase testlog-asan2 "${ASAN2[@]}"
}
# the clang build and its unit tests (its C is what differs: the reference comparisons of
# the hf and quant suites run on the normal build and under the sanitizers), when no test is
# named and clang is there
job_clang() {
	[ "$everything" = all ] && command -v clang >/dev/null 2>&1 || return 0
	# (after the early build below, if it is still running: then ninja has little left to do)
	exec 9>"$jobdir/clang.lock"
	flock 9
	if ! build_clang; then
		echo "test: the clang build failed"
		echo 1 >"$jobdir/clang.failed"
		return 1
	fi
	TFS_CPU_TAG=clang meson test -C build-clang "${wrap[@]}" --print-errorlogs --num-processes 1 \
		--no-suite mount --no-suite hf --no-suite quant --no-suite lint
}
# fuzzing: only when no test is named (and not in the quick tier); two harnesses at a time
# (each runs for its seconds of wall time: when the other chain is done, fuzzing used one
# core of two; when it is not, each harness makes fewer runs in them)
job_fuzz() {
	{ [ "$everything" = all ] && ! $quick; } || return 0
	exec 8>"$jobdir/fuzz.lock"   # (after the early build below)
	flock 8
	TFS_FUZZ_JOBS=${TFS_FUZZ_JOBS:-2} measure fuzz fuzz bash scripts/fuzz.sh "${TFS_FUZZ_SECONDS:-5}" \
		>"$fuzz_log" 2>&1
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
everything=$([ $# -eq 0 ] && ! $quick && echo all)
if $quick; then
	echo "test: the quick tier (the normal build); its output follows when it is done"
else
	echo "test: the normal and the sanitizer runs go side by side; their output follows when all are done"
fi
start normal "$@"
start ref
start asan
start asan2
# The clang build and then the fuzz harnesses' build start now, at the lowest CPU priority:
# they take the CPU the two chains leave idle (their waits: timeouts, kill trials, servers
# starting), so that job_clang and job_fuzz have little left to build when a chain is free;
# each waits for its early build (a lock) and builds what is left.  (Started from a subshell:
# not a job of this shell, which `wait -n` below would count.)
if [ "$everything" = all ] && command -v clang >/dev/null 2>&1; then
	exec 9>"$jobdir/clang.lock" 8>"$jobdir/fuzz.lock"
	flock 9
	flock 8
	(
		(
			renice -n 19 "$BASHPID" >/dev/null 2>&1
			build_clang >/dev/null 2>&1
			exec 9>&-
			TFS_FUZZ_BUILD_ONLY=1 measure build build-fuzz bash scripts/fuzz.sh >/dev/null 2>&1
		) &
	)
	exec 9>&- 8>&-
fi
# each waiting job starts when a chain is free (wait -n: the first job to end); fuzzing (five
# seconds a harness, 40 s) and the clang build's tests (40 s) after NORMAL3 (about 100 s), so
# that the longer ones start first
for next in normal2 normal3 fuzz clang; do
	wait -n
	start $next
done
wait
for name in normal normal2 normal3 ref asan asan2 clang fuzz; do
	[ "$(cat "$jobdir/$name.rc" 2>/dev/null)" = 0 ] || rc=1
done
# (meson names a wrapped run's log after its wrapper, whatever --logbase says)
if [ ${#wrap[@]} -gt 0 ]; then
	for f in build*/meson-logs/testlog*-cpu-of.sh.json; do
		[ -f "$f" ] && mv "$f" "${f%-cpu-of.sh.json}.json"
	done
fi
# no log: no test ran there (a selection that matched nothing, a build that failed)
[ -f build/meson-logs/testlog.json ] || rc=1
[ "$everything" = all ] && { [ -f build/meson-logs/testlog-ref.json ] || rc=1; }
[ "$everything" = all ] && { [ -f build/meson-logs/testlog-normal2.json ] || rc=1; }
[ "$everything" = all ] && { [ -f build/meson-logs/testlog-normal3.json ] || rc=1; }
$quick || [ -f build-asan/meson-logs/testlog.json ] || rc=1
[ "$everything" = all ] && { [ -f build-asan/meson-logs/testlog-asan2.json ] || rc=1; }
echo "==== the normal build"
cat "$jobdir/normal.log"
if [ "$everything" = all ]; then
	echo "==== the normal build: ${NORMAL2[*]}"
	cat "$jobdir/normal2.log"
	echo "==== the normal build: ${NORMAL3[*]}"
	cat "$jobdir/normal3.log"
	echo "==== the normal build: the comparisons with the reference tools (suites hf, quant)"
	cat "$jobdir/ref.log"
fi
if ! $quick; then
	echo "==== the sanitizer build (ASan + UBSan)"
	cat "$jobdir/asan.log"
	if [ "$everything" = all ]; then
		echo "==== the sanitizer build: ${ASAN2[*]}"
		cat "$jobdir/asan2.log"
	fi
fi
if [ "$everything" = all ]; then
	echo "==== the clang build's unit tests"
	cat "$jobdir/clang.log"
	echo "==== fuzzing"
	cat "$fuzz_log"
	cat "$jobdir/fuzz.log"
fi
for r in "$reports" "$reports2"; do
	if [ -d "$r" ] && [ -n "$(ls -A "$r")" ]; then
		echo "test: sanitizer reports ($(ls "$r" | wc -l)):" >&2
		for f in "$r"/*; do echo "--- $f" >&2; head -40 "$f" >&2; done
		rc=1
	fi
done

# meson counts test programs; count every TAP case instead, each fuzz harness as one case,
# and each sanitizer report no test took as its own (tests/mount/harness.py moves a daemon's
# report into its work directory and fails the case) as a failure: a line per build, then
# the total (CI reads that last line: keep its form).
/usr/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json "$fuzz_log" \
	"$reports" build-clang/meson-logs/testlog.json "$everything" "$quick" "$jobdir" \
	build/meson-logs/testlog-ref.json build-asan/meson-logs/testlog-asan2.json "$reports2" \
	build/meson-logs/testlog-normal2.json build/meson-logs/testlog-normal3.json <<'PY'
import json, os, re, sys
(normal_log, asan_log, fuzz_log, reports, clang_log, everything, quick, jobdir, ref_log,
 asan2_log, reports2, normal2_log, normal3_log) = sys.argv[1:14]


def count_meson(log):
    """[passed, failed, skipped] of the TAP cases of a meson testlog.json."""
    n = [0, 0, 0]
    for line in open(log).read().splitlines():
        try:
            t = json.loads(line)
        except ValueError:   # (a line cut short: a full disk, a killed meson)
            print("test: %s: a line that is not JSON, counted as a failure" % log)
            n[1] += 1
            continue
        out = t.get("stdout") or ""
        cases = [l for l in out.splitlines() if re.match(r"^(not )?ok\b", l)]
        if not cases:
            if t["result"] == "SKIP":
                n[2] += 1
            elif t["result"] in ("OK", "EXPECTEDFAIL"):
                n[0] += 1
            else:
                n[1] += 1
            continue
        for l in cases:
            # a TODO case is a known difference the test names (TAP: not a failure; meson
            # counts it as none): counted as skipped
            if "# SKIP" in l or "# skip" in l or re.search(r"# TODO\b", l):
                n[2] += 1
            elif l.startswith("ok"):
                n[0] += 1
            else:
                n[1] += 1
        if t["result"] not in ("OK", "EXPECTEDFAIL", "SKIP") and not any(l.startswith("not ok") for l in cases):
            n[1] += 1  # crashed or timed out after its last case
    return n


def line(n):
    return "%d passed, %d failed%s" % (n[0], n[1], ", %d skipped" % n[2] if n[2] else "")


rows = []
n = count_meson(normal_log) if os.path.exists(normal_log) else [0, 1, 0]
if everything == "all":   # (its reference comparisons, NORMAL2 and NORMAL3: jobs of their own)
    for log in (ref_log, normal2_log, normal3_log):
        r = count_meson(log) if os.path.exists(log) else [0, 1, 0]
        n = [a + b for a, b in zip(n, r)]
rows.append(("the normal build (gcc)", n, "" if os.path.exists(normal_log) else " (no test ran)"))
if quick != "true":
    n = count_meson(asan_log) if os.path.exists(asan_log) else [0, 1, 0]  # it did not build
    if everything == "all":   # (ASAN2's modules ran in a job of their own)
        r = count_meson(asan2_log) if os.path.exists(asan2_log) else [0, 1, 0]
        n = [a + b for a, b in zip(n, r)]
    # sanitizer reports no test took (a unit test's, a tool's)
    left = sum(len(os.listdir(d)) for d in (reports, reports2) if os.path.isdir(d))
    n[1] += left
    rows.append(("the sanitizer build (ASan+UBSan)", n,
                 (" (%d sanitizer reports above)" % left if left else "")
                 + ("" if os.path.exists(asan_log) else " (no test ran)")))
if os.path.exists(clang_log):  # the clang build's unit tests
    rows.append(("the clang build's unit tests", count_meson(clang_log), ""))
elif os.path.exists(os.path.join(jobdir, "clang.failed")):
    rows.append(("the clang build's unit tests", [0, 1, 0], " (it did not build)"))
if everything == "all":
    n = [0, 0, 0]
    for l in open(fuzz_log):
        if re.match(r"^fuzz_\w+: ok", l):
            n[0] += 1
        elif re.match(r"^(fuzz_\w+: FINDING|fuzz: build failed)", l):
            n[1] += 1
        elif l.startswith("SKIP: clang not found"):
            n[2] += 1
    rows.append(("fuzzing (build-fuzz: clang, ASan+UBSan, libFuzzer)", n, ""))
total = [sum(r[1][i] for r in rows) for i in range(3)]
for name, n, note in rows:
    print("%s: %s%s" % (name, line(n), note))
print(line(total))
PY
rm -rf "$fuzz_log" "$jobdir"
exit $rc
