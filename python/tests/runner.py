"""Runs the Python tests with pytest and reports them like the C test
programs (tests/harness.h): one line per test, "ok" / "FAIL" / "skip: why",
the failure's report under its line, and last "N passed, N failed,
N skipped", which tests/run.sh adds to make test's total.

Usage: runner.py [pytest arguments]   (default: this directory)
"""
import os
import sys

import pytest

# Each line names the interpreter it ran with (python-tests.sh: "system",
# "venv"), as make test runs the tests with both.
LABEL = f"[{os.environ['RL_PY_LABEL']}] " if os.environ.get("RL_PY_LABEL") else ""


def _versions():
    """One line: the interpreter and the versions of numpy and torch."""
    from importlib import metadata

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "none"
    return (f"# {LABEL}{sys.executable}: python {sys.version.split()[0]}, "
            f"numpy {version('numpy')}, torch {version('torch')}")


class HarnessReport:
    """A pytest plugin printing the harness's lines."""

    def __init__(self, out):
        self.out = out
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}

    def _print(self, text):
        print(text, file=self.out, flush=True)

    def _line(self, status, report, extra=""):
        self._print(f"{status} {LABEL}{report.nodeid.split('::', 1)[-1]}{extra}")

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
            self._print(report.longreprtext)
            for title, content in report.sections:
                self._print(f"---- {title}\n{content}")
        elif report.when == "call":
            self.counts["passed"] += 1
            self._line("ok  ", report, f" ({report.duration * 1000:.0f} ms)")

    def pytest_collectreport(self, report):
        """A module that cannot be collected counts as a failure; one that
        skips itself (a missing package) as one skip."""
        if report.skipped and isinstance(report.longrepr, tuple):
            self.counts["skipped"] += 1
            why = report.longrepr[2].removeprefix("Skipped: ")
            self._print(f"skip {LABEL}{report.nodeid}: {why}")
        if report.failed:
            self.counts["failed"] += 1
            self._print(f"FAIL collecting {LABEL}{report.nodeid}\n"
                        f"{report.longreprtext}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:] or [here]
    # pytest's own report goes to /dev/null (its terminal plugin stays: the
    # assertion messages use its options); ours to the real stdout.
    out = os.fdopen(os.dup(1), "w")
    plugin = HarnessReport(out)
    plugin._print(_versions())
    sys.stdout = open(os.devnull, "w")
    rc = pytest.main(["-p", "no:cacheprovider",
                      "-W", "error::pytest.PytestUnknownMarkWarning"] + args,
                     plugins=[plugin])
    c = plugin.counts
    plugin._print(f"{c['passed']} passed, {c['failed']} failed, "
                  f"{c['skipped']} skipped")
    # 5: nothing collected, which is a failure too
    return 0 if rc == 0 and not c["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
