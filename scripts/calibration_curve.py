#!/usr/bin/env python3
"""How well cost models rank the admissible set of matrices they never saw, against exhaustive
timings taken on this machine (issue 40's data-efficiency curve).

For every matrix, `waco-hybrid tune --search exhaustive` measures every admissible schedule once
(resumable: its results database is kept in OUT/exhaustive/). Then every model given with
--model NAME=PATH (or NAME=shipped: the shipped model, no calibration) scores the schedules that
timed ok (`predict --schedules ... --top 0`), and the script reports per model:
  - Spearman and pair accuracy (every pair of distinct times, no minimum gap: not `evaluate`'s
    pair accuracy, which skips pairs less than 2% apart) of the scores against the times;
  - model-alone's share of the oracle: the oracle's time over the time of the model's best-scored
    schedule (1.0: the model picked the fastest);
  - the hybrid's share: the oracle's time over the best time among the model's --budget best
    (default 20), which the hybrid measures side by side.
The shares come from the exhaustive run's own timings (each schedule timed alone, once): they
compare models on the same timings, they are not a tune's delivered speedups. The exhaustive run
times schedules one after another, so a kernel's chunk variants share a moment of the machine's
drift and the oracle can be a lucky block: --side-by-side times the oracle and every model's
--budget best again, interleaved in one `bench` run per matrix (kept in
OUT/exhaustive/NAME.sbs.json), and adds both shares on those timings: model-alone's first, and
the best of its --budget as the hybrid's side-by-side run would find it, over the fastest of all
those timed. --repeat DIR reads a second exhaustive run (another run of this script, --out DIR)
and ranks the first run's schedules by its times, as a row of its own: how far a perfect model
would get against timings this noisy.

Example (SpMM at J=64, the shipped model against two calibrations):
  scripts/calibration_curve.py --bin build/experiments/waco-hybrid --kernel spmm --dense 64 \
      --out /tmp/curve --cpu-lock /tmp/waco-cpu.lock \
      --model shipped=shipped --model cal5=/tmp/cal5/spmm.model FILE.mtx ...
"""
import argparse
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time

from rankstats import pair_accuracy, spearman


def run(argv, log):
    with open(log, "w") as err:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}); see {log}")
    return json.loads(p.stdout)


def exhaustive_times(db_path, kernel, dense, threads):
    """Schedule text -> median seconds of the exhaustive tune's isolated measurements, and for the
    schedules it abandoned (too slow to finish timing) the fastest run before it did: a lower
    bound, enough to score a model that ranks one of them first. A schedule stored with
    threads=0 (all cores: the csr schedule) is named with the run's `threads`, as `predict`
    prints it, so that the model's ranking finds it."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT s.text, m.status, m.median_s, m.reason FROM measurements m "
        "JOIN schedules s ON s.id = m.schedule_id WHERE m.kernel = ? AND m.dense = ? "
        "AND m.status IN ('ok', 'abandoned') AND m.group_id IS NULL", (kernel, dense)).fetchall()
    con.close()
    ok, abandoned = {}, {}
    for text, status, median, reason in rows:
        text = re.sub(r"\bthreads=0\b", f"threads={threads}", text)
        if status == "ok" and median and median > 0:
            ok[text] = min(median, ok.get(text, math.inf))
        elif status == "abandoned":
            m = re.search(r"the fastest took ([0-9.eE+-]+) s", reason or "")
            abandoned[text] = float(m.group(1)) if m else math.nan
    return ok, {t: v for t, v in abandoned.items() if t not in ok}


def side_by_side(a, dense_args, lock_args, f, base, schedules):
    """Schedule text -> median seconds of one interleaved `bench` run of the distinct schedules;
    kept in BASE.sbs.json."""
    distinct = list(dict.fromkeys(schedules))
    path = base + ".sbs.json"
    if os.path.exists(path):
        with open(path) as kept_file:
            kept = json.load(kept_file)
        if all(t in kept for t in distinct):
            return kept
    r = run([a.bin, "bench", "--kernel", a.kernel, *dense_args, "--threads", str(a.threads),
             *[x for t in distinct for x in ("--schedule", t)],
             "--retake-disturbed", "5", "--json", *lock_args, f], base + ".sbs.log")
    results = r["results"]
    if len(results) != len(distinct) or not all(x.get("verified") for x in results):
        raise RuntimeError(f"bench of {f} did not time every schedule; see {base}.sbs.log")
    kept = {t: x["median_s"] for t, x in zip(distinct, results)}
    with open(path + ".tmp", "w") as out:
        json.dump(kept, out)
    os.replace(path + ".tmp", path)
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--bin", required=True, help="the waco-hybrid executable")
    ap.add_argument("--kernel", required=True, choices=["spmv", "spmm", "sddmm", "mttkrp"])
    ap.add_argument("--dense", type=int, default=0,
                    help="J (spmm, mttkrp) or K (sddmm); default 64, mttkrp 16 (its dataset's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=int, default=20, help="the hybrid's nominees")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu-lock", default="")
    ap.add_argument("--model", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--side-by-side", action="store_true",
                    help="time the oracle and every model's picks again, interleaved (bench)")
    ap.add_argument("--repeat", default="", metavar="DIR",
                    help="the --out folder of a second run of this script on the same files: "
                         "its exhaustive timings rank the first's as one more row, 'repeat' "
                         "(the ceiling the oracle's own noise leaves any model)")
    ap.add_argument("--json", action="store_true", help="print the per-model summary as JSON")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if not a.model:
        ap.error("give at least one --model NAME=PATH (PATH 'shipped': the shipped model)")
    models = [m.split("=", 1) for m in a.model]
    if any(len(m) != 2 for m in models):
        ap.error("--model takes NAME=PATH")
    if a.repeat and any(name == "repeat" for name, _ in models):
        ap.error("'repeat' names the --repeat row: give the model another name")
    dense = 1 if a.kernel == "spmv" else (a.dense or (16 if a.kernel == "mttkrp" else 64))
    dense_args = [] if a.kernel == "spmv" else ["--dense", str(dense)]
    lock_args = ["--cpu-lock", a.cpu_lock] if a.cpu_lock else []
    os.makedirs(os.path.join(a.out, "exhaustive"), exist_ok=True)

    per_model = {name: [] for name, _ in models}
    t_start = time.time()
    for fi, f in enumerate(a.files):
        name = os.path.basename(f).split(".")[0]
        base = os.path.join(a.out, "exhaustive", name)
        report = base + ".json"
        if not os.path.exists(report):
            t0 = time.time()
            r = run([a.bin, "tune", "--kernel", a.kernel, *dense_args, "--search", "exhaustive",
                     "--threads", str(a.threads), "--db", base + ".sqlite", "--plan-cache",
                     base + ".plans", "--refresh", "--json", "--quiet", *lock_args, f],
                    base + ".log")
            with open(report + ".tmp", "w") as out:
                json.dump(r, out)
            os.replace(report + ".tmp", report)
            done = fi + 1
            eta = (time.time() - t_start) / done * (len(a.files) - done)
            print(f"[{done}/{len(a.files)}] {name}: exhaustive {time.time() - t0:.0f} s "
                  f"(~{eta / 60:.0f} min left)", file=sys.stderr)
        times, abandoned = exhaustive_times(base + ".sqlite", a.kernel, dense, a.threads)
        if len(times) < 3:
            print(f"{name}: {len(times)} schedules timed ok, left out", file=sys.stderr)
            continue
        oracle = min(times.values())
        # An abandoned schedule ran at least --abandon-factor (3) x slower than the best so far.
        bound = {t: (3 * oracle if math.isnan(v) else v) for t, v in abandoned.items()}
        listing = base + ".schedules.txt"
        with open(listing, "w") as out:
            out.write("".join(t + "\n" for t in list(times) + list(bound)))
        picks = {}  # model -> its --budget best schedules, best first
        rankings = []  # (name, [(score, schedule)]), lower score = predicted faster
        for mname, path in models:
            margs = ["--no-calibration"] if path == "shipped" else ["--model", path]
            p = run([a.bin, "predict", "--kernel", a.kernel, *dense_args, "--threads",
                     str(a.threads), "--schedules", listing, "--top", "0", "--json", *margs, f],
                    base + "." + mname + ".predict.log")
            rankings.append((mname, [(r["score"], r["schedule"]) for r in p["ranked"]]))
        second = os.path.join(a.repeat, "exhaustive", name + ".sqlite") if a.repeat else ""
        if second and not os.path.exists(second):
            print(f"{name}: no repeat run in {a.repeat}", file=sys.stderr)
        elif second:
            # The second exhaustive run as a "model": its own times (abandoned ones at their
            # bound, schedules it lacks last) rank the first run's.
            times2, abandoned2 = exhaustive_times(second, a.kernel, dense, a.threads)
            if len(times2) < 3:
                print(f"{name}: the repeat run has {len(times2)} schedules timed ok", file=sys.stderr)
            known = {**{t: v for t, v in abandoned2.items() if not math.isnan(v)}, **times2}
            rankings.append(("repeat", [(known.get(t, math.inf), t)
                                        for t in list(times) + list(bound)]))
        for mname, scored_list in rankings:
            ranked = sorted(scored_list, key=lambda row: row[0])
            # Rank quality over the schedules timed to the end; shares over all, abandoned ones
            # at their lower bound.
            scored = [(sc, times[t]) for sc, t in ranked if t in times and sc != math.inf]
            every = [times.get(t, bound.get(t, math.inf)) for _, t in ranked]
            scores = [sc for sc, _ in scored]
            ts = [t for _, t in scored]
            rho = spearman(scores, ts)
            per_model.setdefault(mname, []).append({
                "matrix": name, "schedules": len(ts), "abandoned": len(bound),
                "spearman": math.nan if rho is None else rho,
                "pair_accuracy": pair_accuracy(scores, ts),
                "model_alone_share": oracle / every[0],
                "hybrid_share": oracle / min(every[:a.budget])})
            picks[mname] = [t for _, t in ranked[:a.budget]]
        if a.side_by_side:
            sbs = side_by_side(a, dense_args, lock_args, f, base,
                               [min(times, key=times.get)] + [t for p in picks.values() for t in p])
            best = min(sbs.values())
            for mname, top in picks.items():
                per_model[mname][-1]["model_alone_share_sbs"] = best / sbs[top[0]]
                per_model[mname][-1]["hybrid_share_sbs"] = best / min(sbs[t] for t in top)

    summary = {}
    for mname, rows in per_model.items():
        if not rows:
            continue
        col = lambda k: [r[k] for r in rows if not math.isnan(r[k])]
        summary[mname] = {
            "matrices": len(rows),
            "spearman_median": statistics.median(col("spearman")),
            "pair_accuracy_median": statistics.median(col("pair_accuracy")),
            "model_alone_share_mean": statistics.fmean(col("model_alone_share")),
            "model_alone_within_5pct": sum(s >= 1 / 1.05 for s in col("model_alone_share")) / len(rows),
            "hybrid_share_mean": statistics.fmean(col("hybrid_share")),
            "hybrid_within_5pct": sum(s >= 1 / 1.05 for s in col("hybrid_share")) / len(rows),
            "rows": rows}
        if a.side_by_side:
            summary[mname]["model_alone_share_sbs_mean"] = statistics.fmean(col("model_alone_share_sbs"))
            summary[mname]["hybrid_share_sbs_mean"] = statistics.fmean(col("hybrid_share_sbs"))
    with open(os.path.join(a.out, "curve.json"), "w") as out:
        json.dump({"kernel": a.kernel, "dense": dense, "threads": a.threads, "budget": a.budget,
                   "models": dict(models), "summary": summary}, out, indent=1)
    if a.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
        return
    print(f"{a.kernel} (dense {dense}, {a.threads} threads), {len(a.files)} matrices; "
          f"shares of the exhaustive oracle on its own timings")
    sbs_head = f" {'alone sbs':>10} {'hybrid sbs':>11}" if a.side_by_side else ""
    print(f"{'model':<14} {'n':>3} {'Spearman':>9} {'pair acc':>9} {'alone':>7} {'<=5%':>6} "
          f"{'hybrid':>7} {'<=5%':>6}{sbs_head}")
    for mname, s in summary.items():
        sbs = (f" {s['model_alone_share_sbs_mean']:>10.3f} {s['hybrid_share_sbs_mean']:>11.3f}"
               if a.side_by_side else "")
        print(f"{mname:<14} {s['matrices']:>3} {s['spearman_median']:>9.3f} "
              f"{s['pair_accuracy_median']:>9.3f} {s['model_alone_share_mean']:>7.3f} "
              f"{s['model_alone_within_5pct']:>6.0%} {s['hybrid_share_mean']:>7.3f} "
              f"{s['hybrid_within_5pct']:>6.0%}{sbs}")


if __name__ == "__main__":
    main()
