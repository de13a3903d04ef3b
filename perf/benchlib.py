#!/usr/bin/env python3
"""benchlib.py - the numbers side of perf/bench.sh and perf/sweep.sh.

  benchlib.py metrics FILE.json     one TSV line from fio's (or rlperf's) JSON:
                                    bw_bytes iops p50_ns p99_ns cpu_s_per_gb
  benchlib.py compare RESULTS.tsv   markdown table of medians and ratios from
                                    lines "job tool round bw iops p50 p99 cpu"
  benchlib.py load RESULTS.tsv      markdown table from lines "reader round seconds bytes"
  benchlib.py sweep RESULTS.tsv [MEDIANS.tsv]
                                    markdown table of medians per point and the best
                                    configuration, from lines
                                    "backend registered qd bs round bw iops p50 p99 cpu";
                                    writes the medians (without round) for the chart

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


def sweep(path, med_path=None):
    by = {}
    for backend, reg, qd, bs, _rnd, bw, iops, p50, p99, cpu in rows(path):
        by.setdefault((backend, int(reg), int(qd), bs), []).append(
            (float(bw), float(iops), float(p50), float(p99), float(cpu)))
    rs = []
    for (backend, reg, qd, bs), xs in by.items():
        m = [med([x[i] for x in xs]) for i in range(5)]
        rs.append(dict(backend=backend, reg=reg, qd=qd, bs=bs, n=len(xs), bw=m[0],
                       iops=m[1], p50=m[2], p99=m[3], cpu=m[4]))
    if med_path:
        with open(med_path, "w") as f:
            for r in rs:
                f.write("%s\t%d\t%d\t%s\t%.0f\t%.1f\t%.0f\t%.0f\t%.4f\n"
                        % (r["backend"], r["reg"], r["qd"], r["bs"], r["bw"], r["iops"],
                           r["p50"], r["p99"], r["cpu"]))
    print("| backend | registered | bs | QD | rounds | MB/s | IOPS | p99 us | CPU s/GB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        print("| %s | %d | %s | %d | %d | %.1f | %.0f | %.1f | %.3f |"
              % (r["backend"], r["reg"], r["bs"], r["qd"], r["n"], r["bw"] / 1e6, r["iops"],
                 r["p99"] / 1e3, r["cpu"]))
    if not rs:
        return
    best = max(rs, key=lambda r: r["bw"])
    print()
    print("Best (median bandwidth): %s%s, bs %s, QD %d: %.1f MB/s, %.3f CPU s/GB."
          % (best["backend"], " (registered)" if best["reg"] else "", best["bs"], best["qd"],
             best["bw"] / 1e6, best["cpu"]))
    # among configurations within 5% of the best, the one with the least
    # CPU per GB, then the fewest bytes in flight
    ok = [r for r in rs if r["bw"] >= 0.95 * best["bw"]]

    def size(bs):
        m = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
        return int(bs[:-1]) * m[bs[-1].lower()] if bs[-1].lower() in m else int(bs)
    pick = min(ok, key=lambda r: (round(r["cpu"], 2), r["qd"] * size(r["bs"])))
    print("Within 5%% of it, least CPU then fewest bytes in flight: %s%s, bs %s, QD %d: "
          "%.1f MB/s, %.3f CPU s/GB."
          % (pick["backend"], " (registered)" if pick["reg"] else "", pick["bs"], pick["qd"],
             pick["bw"] / 1e6, pick["cpu"]))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("metrics", "compare", "load", "sweep") or \
            len(sys.argv) > (4 if sys.argv[1] == "sweep" else 3):
        sys.exit(__doc__)
    globals()[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
