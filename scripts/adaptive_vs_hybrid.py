#!/usr/bin/env python3
"""The adaptive plan's final choice against the hybrid tune's (issue 35: "at least 0.97 of what
the CLI's hybrid tune finds for the same matrix, side by side").

Per matrix, three processes of the CLI, none reading or writing a tuning cache:
  1. `waco-hybrid tune --adaptive --expected-calls N`: the library's adaptive plan on N calls of
     its own (tuning::drive_adaptive), then csr alone on N calls: what it settled on, its judged
     speedup, break-even and the time to solution of the N calls against csr's;
  2. `waco-hybrid tune` (the hybrid: the model's best 20 measured side by side, a fresh decision);
  3. `waco-hybrid bench` of csr, the adaptive plan's kernel and the hybrid's, side by side
     (--rounds interleaved rounds), so that neither choice is judged on the timings that chose it.
Every command runs under WACO_LOCK (an exclusive flock: nothing else times or builds meanwhile).

usage: scripts/adaptive_vs_hybrid.py [--kernel spmv|spmm] [--dense 64] [--expected-calls N]
       [--threads 2] [--rounds 30] [--dtype f32] [--nominees K] [--choice default|list|model]
       [--waco build/experiments/waco-hybrid] [--json OUT] MATRIX...
--choice: how the adaptive plan nominates (its kernel's default, or `tune --adaptive
--prior-choice` / `--model-choice`: the short list's order or the model's ranking).
Prints a row per matrix and the median of the ratio (hybrid's kernel time / adaptive's)."""

import argparse
import json
import os
import statistics
import subprocess
import sys


def run(cmd, lock):
    if lock:
        cmd = ["flock", "-x", lock] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def served(report):
    """What a report's plan runs, as `bench` names it: "csr", a hand-written baseline that
    beat it ("dia", as both reports name it in `implementation`), or "gen:SCHEDULE". A baseline's
    report still carries a schedule (the adaptive plan's csr placeholder, the tune's
    "impl=NAME"), which is not what runs."""
    impl = report.get("implementation")
    if impl and impl != "generated":
        return impl
    # An adaptive plan's report names its schedule; a tune's, its best (the result).
    return "gen:" + (report["schedule"] if "schedule" in report else report["best"]["schedule"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kernel", default="spmv", choices=["spmv", "spmm"])
    p.add_argument("--dense", type=int, default=64)
    p.add_argument("--expected-calls", type=int, default=20000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--dtype", default="f32")
    p.add_argument("--nominees", type=int, help="tune --adaptive --nominees (default: its own)")
    p.add_argument("--choice", default="default", choices=["default", "list", "model"])
    p.add_argument("--waco", default="build/experiments/waco-hybrid")
    p.add_argument("--json", help="write every row and report here")
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    lock = os.environ.get("WACO_LOCK")
    common = ["--kernel", a.kernel, "--threads", str(a.threads), "--dtype", a.dtype]
    if a.kernel != "spmv":
        common += ["--dense", str(a.dense)]
    rows, ratios = [], []
    # claimed: the plan's judged speedup; checked: the same gain on 48 later pairs in the same
    # process (drive.check); the us columns: a bench in another process.
    print("matrix\tadaptive verdict\tbreak-even\twall ratio\tclaimed\tchecked\thybrid verdict\t"
          "csr us\tadaptive us\thybrid us\thybrid/adaptive")
    for f in a.files:
        name = os.path.basename(f).split(".")[0]
        nominees = ["--nominees", str(a.nominees)] if a.nominees else []
        nominees += {"default": [], "list": ["--prior-choice"], "model": ["--model-choice"]}[a.choice]
        ad = run([a.waco, "tune"] + common + nominees + ["--adaptive", "--expected-calls",
                                              str(a.expected_calls), "--no-plan-cache", "--json",
                                              "-q", f], lock)
        hy = run([a.waco, "tune"] + common + ["--no-plan-cache", "--json", "-q", f], lock)
        s_ad, s_hy = served(ad), served(hy)
        impls = ["csr"] + [s for s in dict.fromkeys((s_ad, s_hy))
                           if s != "csr" and not s.startswith("gen:")]
        cmd = [a.waco, "bench"] + common + ["--impl", ",".join(impls), "--repeat", str(a.rounds),
                                            "--json"]
        for s in dict.fromkeys((s_ad, s_hy)):
            if s.startswith("gen:"):
                cmd += ["--schedule", s[len("gen:"):]]
        bench = run(cmd + [f], lock)
        times = {}
        for r in bench["results"]:
            times[r["impl"]] = r
        def entry_of(s):
            e = times.get(s)
            return e if e and e.get("times_s") else None
        e_csr, e_ad, e_hy = entry_of("csr"), entry_of(s_ad), entry_of(s_hy)
        t_csr, t_ad, t_hy = (e["median_s"] if e else None for e in (e_csr, e_ad, e_hy))
        # The median of the per-round ratios (the rounds are interleaved: side by side).
        ratio = (statistics.median(h / d for h, d in zip(e_hy["times_s"], e_ad["times_s"]))
                 if e_ad and e_hy else None)
        if ratio:
            ratios.append(ratio)
        be = ad.get("economy", {}).get("break_even_calls")
        row = {"matrix": name, "adaptive": ad, "hybrid_verdict": hy.get("verdict"),
               "hybrid_served": s_hy, "hybrid_implementation":
               hy.get("implementation"), "csr_s": t_csr, "adaptive_s": t_ad, "hybrid_s": t_hy,
               "hybrid_over_adaptive": ratio, "bench": bench}
        rows.append(row)
        us = lambda t: f"{t * 1e6:.1f}" if t else "-"
        fmt = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else "-"
        claimed = ad.get("adaptive", {}).get("speedup")
        checked = ad["drive"].get("check", {}).get("speedup")
        print(f"{name}\t{ad['verdict']}\t{be if be is None else round(be)}\t"
              f"{ad['drive']['wall_ratio']:.3f}\t{fmt(claimed)}\t{fmt(checked)}\t{hy.get('verdict')}\t"
              f"{us(t_csr)}\t{us(t_ad)}\t{us(t_hy)}\t{ratio:.3f}" if ratio
              else f"{name}\t{ad['verdict']}" + "\t-" * 9, flush=True)
    if ratios:
        print(f"median hybrid/adaptive kernel time {statistics.median(ratios):.3f} over "
              f"{len(ratios)}; at least 0.97 on {sum(r >= 0.97 for r in ratios)} of {len(ratios)}")
    if a.json:
        with open(a.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
