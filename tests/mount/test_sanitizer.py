#!/usr/bin/env python3
"""No silent sanitizer finding in a daemon (issue 40): a UBSan report of a daemonized mount
fails the case that made the mount, with the report printed.

The daemon's stderr is /dev/null once it has daemonized, so the harness (harness.py,
SanitizerReports) names a file of its work directory in TFS_DAEMON_STDERR, where the daemon
then writes its stderr (fs/cli/mount.c), and fails the case during which a report appears
there.  This module proves it: the case Planted.test_mount mounts a model and lists it, which
passes on its own; run in a process of its own with TFS_PLANT_MISALIGNED_STORE set (the only
place that sets it), the daemon of a UBSan build makes one misaligned store once daemonized,
and that run must say `not ok` for the case with UBSan's report among its diagnostics.  The
same run without the plant must pass (the control).  On a build without UBSan the module
SKIPs (the plant is then a harmless store nobody checks).
"""
import os
import subprocess
import sys
import unittest

from harness import TENSORFS, TESTDATA, Mount, TestCase, main, quick, run

SOURCE = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")
PLANT = "TFS_PLANT_MISALIGNED_STORE"


def ubsan_build():
    """Whether the tensorfs under test is linked with UBSan's runtime."""
    r = run(["ldd", TENSORFS])
    return "libubsan" in r.stdout


class Planted(TestCase):
    """The inner case (run by Capture in a process of its own, never on its own)."""

    def test_mount(self):
        with Mount(self, SOURCE) as m:
            try:
                os.listdir(m.path)
            except OSError:
                pass   # a daemon the plant killed (halt_on_error): the harness says why


class Capture(TestCase):
    def setUp(self):
        if not ubsan_build():
            self.skipTest("%s is not a UBSan build (scripts/test.sh's build-asan is)" % TENSORFS)

    def inner(self, plant):
        env = dict(os.environ)
        env.pop(PLANT, None)
        env.pop("TFS_SANITIZER_REPORTS", None)   # (the inner run's reports are its own)
        if plant:
            env[PLANT] = "1"
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "Planted.test_mount"],
                           capture_output=True, text=True, timeout=120, env=env)
        return r.returncode, r.stdout

    @quick
    def test_a_planted_finding_fails_its_case_with_the_report(self):
        code, out = self.inner(True)
        self.assertNotEqual(code, 0, out)
        self.assertRegex(out, r"(?m)^not ok 1 - Planted\.test_mount", out)
        self.assertRegex(out, r"(?m)^# .*runtime error: store to misaligned address", out)
        self.assertIn("mount.c", out)   # the report's location: the plant

    @quick
    def test_without_the_plant_the_case_passes(self):
        code, out = self.inner(False)
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"(?m)^ok 1 - Planted\.test_mount", out)
        self.assertNotIn("runtime error", out)


def load_tests(loader, tests, pattern):
    """The module's cases: Capture (Planted runs when named, by Capture)."""
    return loader.loadTestsFromTestCase(Capture)


if __name__ == "__main__":
    unittest.TestCase.maxDiff = None
    main()
