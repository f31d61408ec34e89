#!/usr/bin/env bash
# A `meson test --wrapper`: runs the test in a cgroup of its own and appends a line
# "CPU-seconds wall-seconds test" to $TFS_CPU_LOG, the CPU of every process the test started,
# its mount daemons included (a test's wall time says little when three chains share two
# cores; the test command's budget is CPU).  cgroup v1's cpuacct or cgroup v2; as root.
#   TFS_CPU_LOG=/tmp/cpu.txt meson test -C build --wrapper $PWD/scripts/bench/cpu-of.sh ...
#   sort -rn /tmp/cpu.txt | head
# scripts/test.sh passes it to every run when TFS_CPU_LOG is set, and runs its setup, builds
# and fuzzing under it too (measure()).
set -u
name=$(basename "$1")
for a in "$@"; do
	case $a in *.py) name=$(basename "$a"); break ;; esac
done
case $name in compare*.py|tokenize_compare.py|vocab_gguf_pre.py|check.py) name="$name:$(basename -- "${!#}")" ;; esac
# (TFS_CPU_NAME: the line's name, for a command not a test: scripts/test.sh's builds)
name=${TFS_CPU_NAME:-$name}
# (a name of its own: a cgroup a left-behind process keeps alive stays, and one named by a
# reused pid alone gave a later test its CPU, 24.6 s in a 1 s test); without a cgroup, the
# test runs unmeasured
id=$$.$(date +%s%N)
if [ -d /sys/fs/cgroup/cpuacct ]; then
	cg=/sys/fs/cgroup/cpuacct/tfs-test.$id
	mkdir "$cg" && echo $$ >"$cg/cgroup.procs" || exec "$@"
	usage() { echo $(($(cat "$cg/cpuacct.usage") / 1000)); }
else
	cg=/sys/fs/cgroup/tfs-test.$id
	[ -d /sys/fs/cgroup/unified ] && cg=/sys/fs/cgroup/unified/tfs-test.$id
	mkdir "$cg" && echo $$ >"$cg/cgroup.procs" || exec "$@"
	usage() { awk '$1 == "usage_usec" { print $2 }' "$cg/cpu.stat"; }
fi
t0=$(date +%s.%N)
"$@"
rc=$?
t1=$(date +%s.%N)
echo "$(awk -v u="$(usage)" 'BEGIN { printf "%.1f", u / 1e6 }') $(awk -v a="$t0" -v b="$t1" \
	'BEGIN { printf "%.1f", b - a }') $name ${TFS_CPU_TAG:-}" >>"${TFS_CPU_LOG:-/dev/stderr}"
# leave the cgroup and remove it (it stays while a daemon the test left behind lives)
echo $$ >"$(dirname "$cg")/cgroup.procs" && rmdir "$cg" 2>/dev/null
exit $rc
