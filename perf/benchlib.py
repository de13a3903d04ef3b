#!/usr/bin/env python3
"""benchlib.py - the numbers side of perf/bench.sh and perf/sweep.sh.

  benchlib.py metrics FILE.json     one TSV line from fio's (or rlperf's) JSON:
                                    bw_bytes iops p50_ns p99_ns cpu_s_per_gb
  benchlib.py compare RESULTS.tsv   markdown table of medians and ratios from
                                    lines "job tool round bw iops p50 p99 cpu"
  benchlib.py load RESULTS.tsv      markdown table from lines "reader round seconds bytes"
  benchlib.py sweep RESULTS.tsv     markdown table and the best configuration from
                                    lines "backend registered qd bs bw iops p50 p99 cpu"

Standard library only; medians, never means, of interleaved rounds.
"""
import json
import statistics
import sys


def metrics(path):
    with open(path) as f:
        d = json.load(f)
    j = d["jobs"][0]
    rd = j["read"]
    pct = rd["clat_ns"].get("percentile", {})
    runtime_s = j["job_runtime"] / 1000.0 if j.get("job_runtime") else rd["runtime"] / 1000.0
    cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * runtime_s
    gb = rd["io_bytes"] / 1e9
    print("%d\t%.1f\t%d\t%d\t%.4f" % (rd["bw_bytes"], rd["iops"], pct.get("50.000000", 0),
                                      pct.get("99.000000", 0), cpu_s / gb if gb else 0.0))


def rows(path):
    with open(path) as f:
        return [l.split() for l in f if l.strip() and not l.startswith("#")]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def ratio(a, b):
    return a / b if b else float("nan")


def compare(path):
    by = {}
    for job, tool, _rnd, bw, iops, p50, p99, cpu in rows(path):
        by.setdefault(job, {}).setdefault(tool, []).append(
            (float(bw), float(iops), float(p50), float(p99), float(cpu)))
    print("| job | metric | rlperf | fio | rlperf / fio |")
    print("|---|---|---:|---:|---:|")
    for job, tools in by.items():
        r, f = tools.get("rlperf", []), tools.get("fio", [])
        n = min(len(r), len(f))
        for i, (name, scale, fmt) in enumerate((("bandwidth, MB/s", 1e6, "%.1f"),
                                                 ("IOPS", 1, "%.0f"),
                                                 ("clat p50, us", 1e3, "%.1f"),
                                                 ("clat p99, us", 1e3, "%.1f"),
                                                 ("CPU s per GB", 1, "%.3f"))):
            a = med([x[i] for x in r]) / scale
            b = med([x[i] for x in f]) / scale
            print("| %s (%d rounds) | %s | %s | %s | %.3f |"
                  % (job, n, name, fmt % a, fmt % b, ratio(a, b)))


def load(path):
    by = {}
    for reader, _rnd, secs, nbytes in rows(path):
        by.setdefault(reader, []).append((float(secs), float(nbytes)))
    base = by.get("fio-seq")
    base_s = med([s for s, _ in base]) if base else None
    print("| reader | rounds | median s | GB/s | time vs fio seq |")
    print("|---|---:|---:|---:|---:|")
    for reader, xs in by.items():
        s = med([x[0] for x in xs])
        nb = xs[0][1]
        print("| %s | %d | %.3f | %.3f | %s |" % (reader, len(xs), s, nb / s / 1e9,
                                                 "%.3f" % (s / base_s) if base_s else "-"))


def sweep(path):
    rs = []
    for backend, reg, qd, bs, bw, iops, p50, p99, cpu in rows(path):
        rs.append(dict(backend=backend, reg=int(reg), qd=int(qd), bs=bs, bw=float(bw),
                       iops=float(iops), p50=float(p50), p99=float(p99), cpu=float(cpu)))
    print("| backend | registered | bs | QD | MB/s | IOPS | p99 us | CPU s/GB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        print("| %s | %d | %s | %d | %.1f | %.0f | %.1f | %.3f |"
              % (r["backend"], r["reg"], r["bs"], r["qd"], r["bw"] / 1e6, r["iops"],
                 r["p99"] / 1e3, r["cpu"]))
    if not rs:
        return
    best = max(rs, key=lambda r: r["bw"])
    print()
    print("Best: %s%s, bs %s, QD %d: %.1f MB/s, %.3f CPU s/GB."
          % (best["backend"], " (registered)" if best["reg"] else "", best["bs"], best["qd"],
             best["bw"] / 1e6, best["cpu"]))
    # the cheapest configuration within 5% of the best: fewer bytes in
    # flight (smaller QD x bs) and less CPU for the same bandwidth
    ok = [r for r in rs if r["bw"] >= 0.95 * best["bw"]]

    def size(bs):
        m = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
        return int(bs[:-1]) * m[bs[-1].lower()] if bs[-1].lower() in m else int(bs)
    pick = min(ok, key=lambda r: (r["qd"] * size(r["bs"]), r["cpu"]))
    print("Within 5%% of the best with the fewest bytes in flight: %s%s, bs %s, QD %d: "
          "%.1f MB/s, %.3f CPU s/GB."
          % (pick["backend"], " (registered)" if pick["reg"] else "", pick["bs"], pick["qd"],
             pick["bw"] / 1e6, pick["cpu"]))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("metrics", "compare", "load", "sweep"):
        sys.exit(__doc__)
    globals()[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()
