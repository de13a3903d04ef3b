#!/usr/bin/env python3
"""benchlib.py - the numbers side of perf/bench.sh and perf/sweep.sh.

  benchlib.py metrics FILE.json     one TSV line from fio's (or rlperf's) JSON:
                                    bw_bytes iops p50_ns p99_ns cpu_s_per_gb
  benchlib.py device R0 M0 S0 R1 M1 S1
                                    one TSV line "reads merges sectors" of a device
                                    between two /proc/diskstats samples
  benchlib.py compare RESULTS.tsv   markdown table of medians and ratios from
                                    lines "job tool round bw iops p50 p99 cpu
                                    [reads merges sectors]"
  benchlib.py load RESULTS.tsv      markdown table from lines "reader round seconds bytes"
  benchlib.py media RUNS.tsv [CHART.dat]
                                    perf/load_media.sh's tables: ringload against
                                    min(fio best, fill) per medium, the hot round against
                                    min(cat, fill), the workers' scaling, the fio grid,
                                    from lines "medium reader config round seconds bytes cpu_s"
  benchlib.py inproc INPROC.tsv BYTES
                                    perf/load_media.sh's whole-process time of each ringload
                                    run against its own summary total (what lies outside the
                                    load: exec, linking, teardown, exit), from lines
                                    "medium label round whole_s own_s"
  benchlib.py grid RUNS.tsv          perf/load_grid.sh's table: ringload's option grid per
                                    medium, its best point and the defaults' ratio to it,
                                    from lines "medium config round seconds bytes cpu_s"
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


def device(*counts):
    """Reads, merges and sectors read between two diskstats samples."""
    a, b = [int(x) for x in counts[:3]], [int(x) for x in counts[3:]]
    print("\t".join(str(y - x) for x, y in zip(a, b)))


def rows(path):
    with open(path) as f:
        return [l.split() for l in f if l.strip() and not l.startswith("#")]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def ratio(a, b):
    return a / b if b else float("nan")


def compare(path):
    by = {}
    metrics = [("bandwidth, MB/s", 1e6, "%.1f"), ("IOPS", 1, "%.0f"),
               ("clat p50, us", 1e3, "%.1f"), ("clat p99, us", 1e3, "%.1f"),
               ("CPU s per GB", 1, "%.3f")]
    for job, tool, _rnd, *v in rows(path):
        x = [float(y) for y in v[:5]]
        if len(v) >= 8:  # the device's reads, merges, sectors
            reads, merges, sectors = (float(y) for y in v[5:8])
            x += [reads, merges / reads if reads else 0.0,
                  sectors / 2 / reads if reads else 0.0]
        by.setdefault(job, {}).setdefault(tool, []).append(x)
    if any(len(x) > 5 for t in by.values() for xs in t.values() for x in xs):
        metrics += [("device reads", 1, "%.0f"), ("merges per device read", 1, "%.2f"),
                     ("KiB per device read", 1, "%.0f")]
    print("| job | metric | rlperf | fio | rlperf / fio |")
    print("|---|---|---:|---:|---:|")
    for job, tools in by.items():
        r, f = tools.get("rlperf", []), tools.get("fio", [])
        n = min(len(r), len(f))
        for i, (name, scale, fmt) in enumerate(metrics):
            if any(len(x) <= i for x in r + f):
                continue
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


def runs(path, ncols):
    """{key: [(gbps, cpu_s_per_gb)]} from lines of key columns, round,
    seconds, bytes, cpu_s."""
    by = {}
    for r in rows(path):
        key = tuple(r[:ncols])
        secs, nbytes, cpu = float(r[ncols + 1]), float(r[ncols + 2]), float(r[ncols + 3])
        by.setdefault(key, []).append((nbytes / secs / 1e9, cpu / (nbytes / 1e9)))
    return {k: (med([x[0] for x in v]), med([x[1] for x in v]), len(v)) for k, v in by.items()}


def target(ok):
    return "met" if ok else "**not met**"


def best_of(m, medium, reader):
    """(config, (gbps, cpu, rounds)) of reader's best median on medium, or None."""
    cells = [(k[2], v) for k, v in m.items() if k[0] == medium and k[1] == reader]
    return max(cells, key=lambda x: x[1][0]) if cells else None


def media_rows(m, medium):
    """ringload, fio best (config), fill: (gbps, cpu) each, or None."""
    rl = m.get((medium, "ringload", "defaults"))
    best = best_of(m, medium, "fio")
    fill = next((v for k, v in m.items() if k[0] == medium and k[1] == "fill"), None)
    return rl, best, fill


def media_process(m, media_):
    """Both timed exec to exit: ringload against fio's best whole-process
    time (the start-up and buffer set-up that fio's own bandwidth leaves
    out, and that ringload's time includes)."""
    rows_ = [(x, m.get((x, "ringload", "defaults")), best_of(m, x, "fio-process"))
             for x in media_]
    rows_ = [r for r in rows_ if r[1] and r[2]]
    if not rows_:
        return
    print()
    print("| medium, both exec to exit | ringload GB/s | fio best GB/s (config) | ringload / fio |")
    print("|---|---:|---:|---:|")
    for medium, rl, (cfg, v) in rows_:
        print("| %s | %.2f | %.2f (%s) | %.3f |" % (medium, rl[0], v[0], cfg, rl[0] / v[0]))


def media(path, chart=None):
    m = runs(path, 3)
    media_ = [x for x in ("disk", "loop", "tmpfs") if any(k[0] == x for k in m)]
    out = []
    print("| medium | ringload GB/s | fio best GB/s (config) | fill GB/s | ringload / min(fio, fill) "
          "| >= 0.95 | CPU s/GB: ringload / fio + fill |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for medium in media_:
        rl, best, fill = media_rows(m, medium)
        if not rl or not best or not fill:
            continue
        limit = min(best[1][0], fill[0])
        ratio = rl[0] / limit
        print("| %s | %.2f | %.2f (%s) | %.2f | %.3f | %s | %.3f / %.3f %s |"
              % (medium, rl[0], best[1][0], best[0], fill[0], ratio, target(ratio >= 0.95),
                 rl[1], best[1][1] + fill[1], target(rl[1] <= best[1][1] + fill[1])))
        out.append((medium, rl[0], limit, ratio))
    media_process(m, media_)
    hot_rl, hot_cat = m.get(("hot", "ringload", "defaults")), m.get(("hot", "cat", "hot"))
    fill = media_rows(m, "disk")[2]
    if hot_rl and hot_cat:
        limit = min(hot_cat[0], fill[0]) if fill else hot_cat[0]
        print()
        print("| hot page cache (after cat) | ringload GB/s | cat GB/s | fill GB/s "
              "| ringload / min(cat, fill) | >= 0.9 |")
        print("|---|---:|---:|---:|---:|---|")
        print("| disk file | %.2f | %.2f | %s | %.3f | %s |"
              % (hot_rl[0], hot_cat[0], "%.2f" % fill[0] if fill else "-",
                 hot_rl[0] / limit, target(hot_rl[0] / limit >= 0.9)))
        out.append(("hot", hot_rl[0], limit, hot_rl[0] / limit))
    scale = sorted((int(k[2].split("-")[1]), v) for k, v in m.items()
                   if k[1] == "ringload" and k[2].startswith("workers-"))
    if scale:
        print()
        print("| tmpfs, `--workers` | GB/s | CPU s/GB | vs 1 worker |")
        print("|---:|---:|---:|---:|")
        for w, v in scale:
            print("| %d | %.2f | %.3f | %.2f |" % (w, v[0], v[1], v[0] / scale[0][1][0]))
            out.append(("tmpfs-%dw" % w, v[0], 0, 0))
    print()
    print("fio grid (median GB/s, rounds):")
    print()
    for medium in media_:
        for reader in ("fio", "fio-process"):
            cells = sorted((k[2], v) for k, v in m.items() if k[0] == medium and k[1] == reader)
            print("- %s, %s: %s" % (medium, reader,
                                    ", ".join("%s %.2f (%d)" % (c, v[0], v[2]) for c, v in cells)))
    if chart:
        with open(chart, "w") as f:
            for label, g, limit, ratio in out:
                f.write("%s\t%.3f\t%.3f\t%.3f\n" % (label, g, limit, ratio))


def grid(path):
    m = runs(path, 2)
    for medium in sorted({k[0] for k in m}):
        pts = {k[1]: v for k, v in m.items() if k[0] == medium}
        best = max(pts.items(), key=lambda x: x[1][0])
        dflt = pts.get("defaults")
        print("### %s" % medium)
        print()
        print("| configuration | GB/s | CPU s/GB | rounds |")
        print("|---|---:|---:|---:|")
        for c, v in sorted(pts.items(), key=lambda x: -x[1][0]):
            print("| %s | %.2f | %.3f | %d |" % (c, v[0], v[1], v[2]))
        print()
        if dflt:
            print("Best: %s, %.2f GB/s; defaults %.2f GB/s = %.3f of it (target >= 0.95: %s)."
                  % (best[0], best[1][0], dflt[0], dflt[0] / best[1][0],
                     target(dflt[0] >= 0.95 * best[1][0])))
        print()


def inproc(path, nbytes):
    """Whole-process seconds against the same runs' own summary total
    (open + plan + read): what exec, linking, teardown and exit cost."""
    by = {}
    for r in rows(path):
        by.setdefault((r[0], r[1]), []).append((float(r[3]), float(r[4])))
    if not by:
        return
    n = float(nbytes) / 1e9
    print("| ringload run | whole process s (GB/s) | its own total s (GB/s) | outside s: median, max |")
    print("|---|---:|---:|---:|")
    for (medium, label), v in sorted(by.items()):
        whole, own = med([x[0] for x in v]), med([x[1] for x in v])
        out = [x[0] - x[1] for x in v]
        print("| %s %s | %.3f (%.2f) | %.3f (%.2f) | %.3f, %.3f |"
              % (medium, label, whole, n / whole, own, n / own, med(out), max(out)))


def main():
    two = ("metrics", "compare", "load", "grid")
    if sys.argv[1:2] == ["device"] and len(sys.argv) == 8:
        return device(*sys.argv[2:])
    if len(sys.argv) < 3 or sys.argv[1] not in two + ("sweep", "media", "inproc") or \
            len(sys.argv) > (3 if sys.argv[1] in two else 4):
        sys.exit(__doc__)
    globals()[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
