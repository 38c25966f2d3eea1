#!/usr/bin/env python3
"""Adaptive plans (issue 35) on real matrices: what tuning on the application's own calls costs and
gains. For each matrix and kernel, in one process: an adaptive plan (waco_hybrid.tune(...,
adaptive=True), an empty tuning cache) serves calls until it settles (or --max-calls); its own
accounting gives the exploration's cost beyond csr, the judged speedup and the break-even calls.
Then the settled plan and a csr plan are timed side by side (--rounds interleaved rounds of
--block calls each): the speedup delivered after settling, with its quartiles. The exploration's
cost is also taken from outside the plan: the wall time of the calls until it settled, each timed
in Python, beyond as many calls of the csr plan timed the same way right after (`wall_cost`, over
the delivered gain per call: `wall_break_even`); and the plan's
own accounting is broken down by where it went (report["adaptive"]["cost_breakdown"], in csr
calls: the choice, formats, kernel loads, verifications, per-call overhead, the nominees' calls in
selection and judgment beyond csr's).

usage: PYTHONPATH=build/python /usr/bin/python3 scripts/bench_adaptive.py [--kernel spmv|spmm]
       [--dense 64] [--expected-calls N] [--threads 2] [--kernel-cache DIR|cold]
       MATRIX.mtx[.gz] ...
Prints one table row per matrix and, with --json FILE, every plan's report."""

import argparse
import json
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

import waco_hybrid


def load(path):
    A = sp.csr_array(scipy.io.mmread(path).astype(np.float32))
    A.sum_duplicates()
    A.sort_indices()
    return A


def operand(A, kernel, dense, seed=1):
    rng = np.random.default_rng(seed)
    if kernel == "spmv":
        return rng.random(A.shape[1], dtype=np.float32)
    return rng.random((A.shape[1], dense), dtype=np.float32)


def side_by_side(plans, x, rounds, block):
    """Median seconds per call of each plan over `rounds` interleaved rounds of `block` calls
    (the order rotates every round), and the per-round ratios plans[0] / plans[1]."""
    per = [[] for _ in plans]
    for r in range(rounds):
        order = list(range(len(plans)))
        if r % 2:
            order.reverse()
        for i in order:
            t = time.perf_counter()
            for _ in range(block):
                plans[i] @ x
            per[i].append((time.perf_counter() - t) / block)
    ratios = np.array(per[0]) / np.array(per[-1])
    return [float(np.median(p)) for p in per], ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("matrices", nargs="+")
    ap.add_argument("--kernel", default="spmv", choices=["spmv", "spmm"])
    ap.add_argument("--dense", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--expected-calls", type=int, default=0)
    ap.add_argument("--nominees", type=int, default=4)
    ap.add_argument("--max-calls", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--block-seconds", type=float, default=0.01)
    ap.add_argument("--kernel-cache", help="the compile cache of the plans (default: the user's); "
                    "'cold': an empty one per matrix, so that only the shipped kernels are found")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    print(f"{'matrix':14} {'nnz':>7} {'csr_us':>8} {'verdict':>12} {'calls':>6} {'explore':>7} "
          f"{'cost_ms':>8} {'wall_ms':>8} {'judged':>6} {'breakeven':>9} {'wall_be':>7} "
          f"{'delivered':>9} {'q25-q75':>13} | cost in csr calls: choice format load verify "
          f"overhead selection judgment  schedule", flush=True)
    for path in a.matrices:
        name = path.rsplit("/", 1)[-1].split(".mtx")[0]
        A = load(path)
        x = operand(A, a.kernel, a.dense)
        with tempfile.TemporaryDirectory() as cache:
            kw = dict(threads=a.threads, cache_dir=cache)
            if a.kernel == "spmm":
                kw["dense"] = a.dense
            if a.kernel_cache == "cold":
                kw["kernel_cache_dir"] = cache + "/kernels"
            elif a.kernel_cache:
                kw["kernel_cache_dir"] = a.kernel_cache
            csr = waco_hybrid.make_plan(A, a.kernel, "csr", threads=a.threads,
                                        dense=kw.get("dense"),
                                        kernel_cache_dir=kw.get("kernel_cache_dir"))
            t = time.perf_counter()
            plan = waco_hybrid.tune(A, a.kernel, adaptive=True, nominees=a.nominees,
                                    expected_calls=a.expected_calls or None, **kw)
            tune_s = time.perf_counter() - t
            calls, wall = 0, 0.0
            while plan.verdict == "exploring" and calls < a.max_calls:
                t = time.perf_counter()
                plan @ x
                wall += time.perf_counter() - t
                calls += 1
            report = plan.report
            # The csr plan's calls timed the same way (at most 20,000 of them, scaled).
            n_csr, wall_csr = min(calls, 20000), 0.0
            for _ in range(n_csr):
                t = time.perf_counter()
                csr @ x
                wall_csr += time.perf_counter() - t
                csr.verdict  # as the loop above asks the plan
            wall_csr_call = wall_csr / max(1, n_csr)
            csr_s = side_by_side([csr], x, 3, 3)[0][0]
            block = max(1, int(a.block_seconds / max(csr_s, 1e-7)))
            (plan_s, csr_s), ratios = side_by_side([plan, csr], x, a.rounds, block)
        ad = report["adaptive"]
        delivered = 1 / np.median(ratios)
        q25, q75 = 1 / np.quantile(ratios, 0.75), 1 / np.quantile(ratios, 0.25)
        be = plan.break_even_calls
        # The same cost seen from outside: the calls until settled beyond as many csr calls.
        wall_cost = wall - calls * wall_csr_call
        wall_be = wall_cost / (csr_s - plan_s) if plan_s < csr_s and calls else None
        parts = ad.get("cost_breakdown", {}).get("in_csr_calls", {})
        nom = ad.get("nomination") or {}
        row = dict(matrix=name, nnz=int(A.nnz), kernel=a.kernel, verdict=plan.verdict,
                   calls=ad["calls"], exploring=ad["exploring_calls"],
                   choice_s=nom.get("seconds"), cost_s=ad["cost_s"], judged=plan.speedup,
                   tune_s=tune_s, wall_cost_s=wall_cost, wall_break_even=wall_be,
                   cost_csr_calls=parts,
                   break_even=be if be >= 0 else None, delivered=float(delivered),
                   delivered_q25=float(q25), delivered_q75=float(q75), csr_s=csr_s,
                   schedule=plan.schedule, implementation=plan.implementation,
                   report=report)
        rows.append(row)
        # A baseline that serves (csr, dia) is named: schedule() is then the csr schedule's text.
        served = plan.schedule if plan.implementation == "generated" else \
            f"{plan.implementation} (baseline)"
        def calls_of(k):
            v = parts.get(k)
            return "-" if v is None else f"{v:.1f}"
        cols = " ".join(f"{calls_of(k):>6}" for k in
                        ("choice", "format", "load", "verify", "overhead", "selection", "judgment"))
        print(f"{name:14} {A.nnz:7d} {1e6 * csr_s:8.1f} {plan.verdict:>12} {ad['calls']:6d} "
              f"{ad['exploring_calls']:7d} {1e3 * ad['cost_s']:8.2f} {1e3 * wall_cost:8.2f} "
              f"{plan.speedup:6.3f} {('-' if be < 0 else f'{be:.0f}'):>9} "
              f"{('-' if wall_be is None else f'{wall_be:.0f}'):>7} {delivered:9.3f} "
              f"{q25:6.3f}-{q75:6.3f} | {cols}  {served}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    bes = [r["break_even"] for r in rows if r["break_even"] is not None]
    if bes:
        print(f"break-even calls over {len(bes)} gains: median {np.median(bes):.0f}, "
              f"min {min(bes):.0f}, max {max(bes):.0f}")
    wbes = [r["wall_break_even"] for r in rows if r["wall_break_even"] is not None]
    if wbes:
        print(f"wall-clock break-even over {len(wbes)}: median {np.median(wbes):.0f}, "
              f"min {min(wbes):.0f}, max {max(wbes):.0f}")
    choices = [r["cost_csr_calls"].get("choice") for r in rows]
    choices = [c for c in choices if c is not None]
    if choices:
        print(f"choice in csr calls: median {np.median(choices):.1f}, min {min(choices):.1f}, "
              f"max {max(choices):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
