"""Helpers for tests that run several worker processes at once."""


def communicate_all(procs, timeout):
    """Each process's output (stdout, stderr merged), in order; a process
    still running when this returns or raises (a timeout) is killed, so a
    hung worker never outlives its test."""
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return logs
