#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests and real
# mounts through /dev/fuse). Ends with "N passed, N failed[, N skipped]".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

meson test -C build --print-errorlogs --num-processes 1 "$@"
rc=$?

# meson counts test programs; count every TAP case instead.
/usr/bin/python3 - build/meson-logs/testlog.json <<'PY'
import json, re, sys
passed = failed = skipped = 0
for line in open(sys.argv[1]):
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
print("%d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
PY
exit $rc
