"""Runs the Python tests with pytest and reports them like the C test
programs (tests/harness.h): one line per test, "ok" / "FAIL" / "skip: why",
the failure's report under its line, and last "N passed, N failed,
N skipped", which tests/run.sh adds to make test's total.

Usage: runner.py [pytest arguments]   (default: this directory)
"""
import os
import sys

import pytest


class HarnessReport:
    """A pytest plugin printing the harness's lines."""

    def __init__(self):
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}

    def _line(self, status, report, extra=""):
        name = report.nodeid.split("::", 1)[-1]
        print(f"{status} {name}{extra}", flush=True)

    def pytest_runtest_logreport(self, report):
        """One line per test: its call phase, or a failing setup/teardown."""
        if report.skipped and report.when in ("setup", "call"):
            why = report.longrepr[2] if isinstance(report.longrepr, tuple) \
                else str(report.longrepr)
            self.counts["skipped"] += 1
            self._line("skip", report, f": {why.removeprefix('Skipped: ')}")
        elif report.failed:
            self.counts["failed"] += 1
            self._line("FAIL", report, f" ({report.when})")
            print(report.longreprtext, flush=True)
            for title, content in report.sections:
                print(f"---- {title}\n{content}", flush=True)
        elif report.when == "call":
            self.counts["passed"] += 1
            self._line("ok  ", report, f" ({report.duration * 1000:.0f} ms)")

    def pytest_collectreport(self, report):
        """A module that cannot be collected counts as a failure."""
        if report.failed:
            self.counts["failed"] += 1
            print(f"FAIL collecting {report.nodeid}\n{report.longreprtext}",
                  flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:] or [here]
    plugin = HarnessReport()
    rc = pytest.main(["-p", "no:terminal", "-p", "no:cacheprovider",
                      "-W", "error::pytest.PytestUnknownMarkWarning"] + args,
                     plugins=[plugin])
    c = plugin.counts
    print(f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    # 5: nothing collected, which is a failure too
    return 0 if rc == 0 and not c["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
