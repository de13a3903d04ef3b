"""The console scripts `ringload` and `rlperf` of the wheel: each runs the
command of the same name that the package carries in _bin/ (a wheel: the
binaries, run path $ORIGIN/.. to the package's library; pip install -e:
links to the tree's build), with the same arguments, in this process."""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: {path} is missing: this ringload package carries no "
                 f"{name} command (a wheel or pip install -e has it; make install "
                 f"puts it in PREFIX/bin)")
    try:
        os.execv(path, [name] + sys.argv[1:])
    except OSError as e:
        sys.exit(f"{name}: cannot run {path}: {e.strerror}")


def ringload():
    """The ringload command (inspect, plan, load, verify)."""
    _exec("ringload")


def rlperf():
    """The rlperf benchmark."""
    _exec("rlperf")
