#!/usr/bin/env python3
"""fio_same_io.py - rlperf issues fio's I/O: the same job run by fio and by
rlperf must put the same requests on the device (reads completed, reads
merged and sectors read in /proc/diskstats; on the disk, whose merging
follows its own timing, the requests it got and the sectors) and report
the same depth distribution (iodepth_level in the JSON), each within 10%. Jobs: sequential
and random reads on io_uring, libaio and psync, on a loop device (root) and
on a file on the disk under the build directory. Prints one line per case
and "N passed, N failed, N skipped", as the other test programs.

  tests/fio_same_io.py [BUILD]       (default: $RL_BUILD, else build)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

TOL = 0.10
MiB = 1 << 20
# name, options; size is per job (a fixed amount: both tools read the same)
JOBS = [
    ("seq_256k_io_uring", ["--rw=read", "--bs=256k", "--iodepth=16", "--ioengine=io_uring"], 256),
    # 512k: 128 pages, within every device's max_segments here (a 1M read
    # into 4 KiB pages is split by how the pages happen to lie in memory)
    ("seq_512k_libaio", ["--rw=read", "--bs=512k", "--iodepth=16", "--ioengine=libaio"], 256),
    ("rand_4k_io_uring", ["--rw=randread", "--bs=4k", "--iodepth=32", "--ioengine=io_uring"], 32),
    ("rand_4k_libaio", ["--rw=randread", "--bs=4k", "--iodepth=32", "--ioengine=libaio"], 32),
    ("seq_128k_psync", ["--rw=read", "--bs=128k", "--iodepth=16", "--ioengine=psync"], 128),
    # 1M in huge pages (fio: hugetlb, rlperf: THP): one segment per read, so
    # the same requests whatever the allocator hands out (make bench's job)
    ("seq_1m_huge_io_uring", ["--rw=read", "--bs=1M", "--iodepth=16", "--ioengine=io_uring",
                              "--iomem=mmaphuge"], 256),
]
HUGE_PAGES = 12    # hugetlb pages fio's mmaphuge needs: 16 x 1 MiB and slack
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"
huge = {"ok": False, "why": "fio's iomem=mmaphuge needs %d hugetlb pages: not root" % HUGE_PAGES}

counts = {"passed": 0, "failed": 0, "skipped": 0}


def report(status, name, why=""):
    if status == "ok":
        counts["passed"] += 1
        print("ok   %s%s" % (name, " (%s)" % why if why else ""))
    elif status == "skip":
        counts["skipped"] += 1
        print("skip %s: %s" % (name, why))
    else:
        counts["failed"] += 1
        print("FAIL %s" % name)
        print("    %s" % why)
    sys.stdout.flush()


def diskstats(dev):
    """reads completed, reads merged, sectors read of the device dev
    (major, minor)"""
    with open("/proc/diskstats") as f:
        for line in f:
            v = line.split()
            if (int(v[0]), int(v[1])) == dev:
                return int(v[3]), int(v[4]), int(v[5])
    raise RuntimeError("device %d:%d not in /proc/diskstats" % dev)


def run_one(tool, path, dev, opts, size_mib, out):
    cmd = [tool, "--name=same", "--filename=" + path, "--direct=1",
           "--size=%dM" % size_mib, "--output-format=json", "--output=" + out] + opts
    before = diskstats(dev)
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    after = diskstats(dev)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode,
                                                   p.stderr.decode(errors="replace").strip()))
    with open(out) as f:
        job = json.load(f)["jobs"][0]
    io = [b - a for a, b in zip(before, after)]
    return {"reads": io[0], "merges": io[1], "sectors": io[2],
            "depth": {k: float(v) for k, v in job["iodepth_level"].items()}}


def median_of(runs):
    m = {k: statistics.median(r[k] for r in runs) for k in ("reads", "merges", "sectors")}
    m["depth"] = {k: statistics.median(r["depth"][k] for r in runs) for k in runs[0]["depth"]}
    return m


def differences(fio, rl, merges):
    """what differs by more than TOL (empty: the same I/O). merges: judge
    how the device merged them too (the loop device, whose queue is ours
    alone); a disk merges queued neighbours as its own timing allows (the
    same jobs gave fio 61 and 827 merges of 1,024 requests in two
    runs), so there the requests the block layer got are judged: reads
    completed plus merged, and sectors."""
    bad = []
    keys = ("reads", "sectors") if merges else ("requests", "sectors")
    for r in (fio, rl):
        r["requests"] = r["reads"] + r["merges"]
    for k in keys:
        if abs(rl[k] - fio[k]) > TOL * fio[k] + 2:
            bad.append("%s %d against fio's %d" % (k, rl[k], fio[k]))
    # merges: judged against every request the block layer got
    if merges and abs(rl["merges"] - fio["merges"]) > TOL * fio["requests"] + 2:
        bad.append("merges %d against fio's %d (of %d requests)" %
                   (rl["merges"], fio["merges"], fio["requests"]))
    for k, v in fio["depth"].items():
        if abs(rl["depth"].get(k, 0.0) - v) > 100 * TOL:
            bad.append("iodepth %s=%.1f%% against fio's %.1f%%" % (k, rl["depth"].get(k, 0.0), v))
    return bad


def compare(medium, path, dev, rlperf, rounds, tmp):
    out = os.path.join(tmp, "out.json")
    for name, opts, size in JOBS:
        case = "%s_%s" % (medium, name)
        if "--iomem=mmaphuge" in opts and not huge["ok"]:
            report("skip", case, huge["why"])
            continue
        try:
            runs = {"fio": [], "rlperf": []}
            for _ in range(rounds):   # interleaved: the same state of the device
                runs["fio"].append(run_one("fio", path, dev, opts, size, out))
                runs["rlperf"].append(run_one(rlperf, path, dev, opts, size, out))
            fio, rl = median_of(runs["fio"]), median_of(runs["rlperf"])
        except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
            report("FAIL", case, str(e))
            continue
        bad = differences(fio, rl, medium == "loop")
        summary = "reads %d/%d merges %d/%d KiB/read %.0f/%.0f" % (
            rl["reads"], fio["reads"], rl["merges"], fio["merges"],
            rl["sectors"] / 2 / max(rl["reads"], 1), fio["sectors"] / 2 / max(fio["reads"], 1))
        if bad:
            report("FAIL", case, "; ".join(bad) + " (" + summary + ", rlperf/fio)")
        else:
            report("ok", case, summary)


def write_file(path, size_mib):
    chunk = os.urandom(MiB)
    with open(path, "wb") as f:
        for _ in range(size_mib):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def block_device_of(path):
    """(major, minor) of the block device under path, or None (tmpfs,
    overlay: no device whose counters are the file's reads)"""
    st = os.stat(path)
    dev = (os.major(st.st_dev), os.minor(st.st_dev))
    try:
        diskstats(dev)
    except RuntimeError:
        return None
    return dev


def on_loop(rlperf, image, tmp):
    name = "loop"
    if os.geteuid() != 0 or not shutil.which("losetup"):
        for job in JOBS:
            report("skip", "%s_%s" % (name, job[0]), "a loop device needs root and losetup")
        return
    p = subprocess.run(["losetup", "--direct-io=on", "-f", "--show", image],
                       capture_output=True, text=True)
    if p.returncode != 0:
        for job in JOBS:
            report("skip", "%s_%s" % (name, job[0]), "losetup: " + p.stderr.strip())
        return
    loop = p.stdout.strip()
    try:
        st = os.stat(loop)
        compare(name, loop, (os.major(st.st_rdev), os.minor(st.st_rdev)), rlperf, 1, tmp)
    finally:
        subprocess.run(["losetup", "-d", loop])


def reserve_huge_pages():
    """Adds HUGE_PAGES hugetlb pages for fio; returns the old count to
    restore, or None (huge says why)."""
    try:
        with open(NR_HUGEPAGES) as f:
            old = int(f.read())
        with open(NR_HUGEPAGES, "w") as f:
            f.write(str(old + HUGE_PAGES))
        with open(NR_HUGEPAGES) as f:
            got = int(f.read())
    except (OSError, ValueError) as e:
        huge["why"] = "fio's iomem=mmaphuge needs hugetlb pages: %s" % e
        return None
    if got < old + HUGE_PAGES:
        huge["why"] = "%d of %d hugetlb pages reserved (memory fragmented)" % (
            got - old, HUGE_PAGES)
        restore_huge_pages(old)
        return None
    huge["ok"] = True
    return old


def restore_huge_pages(old):
    if old is not None:
        with open(NR_HUGEPAGES, "w") as f:
            f.write(str(old))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RL_BUILD", "build")
    rlperf = os.path.abspath(os.path.join(build, "rlperf"))
    if not shutil.which("fio") or not os.access(rlperf, os.X_OK):
        why = "needs fio (make deps installs it)" if not shutil.which("fio") else \
              "no %s (make builds it)" % rlperf
        for medium in ("loop", "disk"):
            for job in JOBS:
                report("skip", "%s_%s" % (medium, job[0]), why)
    else:
        os.makedirs(build, exist_ok=True)
        old = reserve_huge_pages() if os.geteuid() == 0 else None
        try:
            run_all(build, rlperf)
        finally:
            restore_huge_pages(old)
    print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"],
                                                counts["skipped"]))
    return 1 if counts["failed"] else 0


def run_all(build, rlperf):
    """Every job on a loop device and on the disk, over a file in build."""
    with tempfile.TemporaryDirectory(dir=build, prefix="fio-same-io.") as tmp:
        image = os.path.join(tmp, "image")
        write_file(image, max(size for _, _, size in JOBS))
        on_loop(rlperf, image, tmp)
        dev = block_device_of(image)
        if dev is None:
            for job in JOBS:
                report("skip", "disk_%s" % job[0],
                       "the build directory is on no block device (tmpfs, overlay)")
        else:
            compare("disk", image, dev, rlperf, 3, tmp)


if __name__ == "__main__":
    sys.exit(main())
