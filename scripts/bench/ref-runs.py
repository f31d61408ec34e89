#!/usr/bin/python3
"""Sums the reference tools' runs that TFS_REF_LOG recorded (tests/hf/reference.py's log_run:
the converter's runs, llamaq.py's quantizations; cache hits are not runs and are not there).

    TFS_REF_LOG=/tmp/ref.log TFS_CPU_LOG=/tmp/cpu.txt bash scripts/test.sh
    scripts/bench/ref-runs.py /tmp/ref.log [N]

Prints the CPU-seconds and the count of runs by test and chain, then the N (default 25)
models that cost most, by tool and model (all their options together).
"""
import collections
import json
import sys


def main(argv):
    if not argv:
        sys.exit(__doc__)
    n = int(argv[1]) if len(argv) > 1 else 25
    runs = []
    with open(argv[0]) as f:
        for line in f:
            try:
                runs.append(json.loads(line))
            except ValueError:
                pass   # (a line cut by a killed run)
    total = sum(r["cpu"] for r in runs)
    print("%d runs, %.1f CPU-s" % (len(runs), total))
    for title, key in (("by test and chain", lambda r: (r["tool"], r["test"], r["chain"])),
                       ("by model", lambda r: (r["tool"], r["what"]))):
        cpu, count = collections.Counter(), collections.Counter()
        for r in runs:
            cpu[key(r)] += r["cpu"]
            count[key(r)] += 1
        print("\n%s:" % title)
        for k, c in cpu.most_common(n):
            print("%8.1f %4d  %s" % (c, count[k], " ".join(x for x in k if x)))


if __name__ == "__main__":
    main(sys.argv[1:])
