#!/usr/bin/env python3
"""Adaptive plans (issue 35) on real matrices: what tuning on the application's own calls costs and
gains. For each matrix and kernel, in one process: an adaptive plan (waco_hybrid.tune(...,
adaptive=True), an empty tuning cache) serves calls until it settles (or --max-calls); its own
accounting gives the exploration's cost beyond csr, the judged speedup and the break-even calls.
Then the settled plan and a csr plan are timed side by side (--rounds interleaved rounds of
--block calls each): the speedup delivered after settling, with its quartiles.

usage: PYTHONPATH=build/python /usr/bin/python3 scripts/bench_adaptive.py [--kernel spmv|spmm]
       [--dense 64] [--expected-calls N] [--threads 2] MATRIX.mtx[.gz] ...
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
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    print(f"{'matrix':24} {'nnz':>9} {'csr_us':>9} {'verdict':>12} {'calls':>7} {'explore':>7} "
          f"{'choice_ms':>9} {'cost_ms':>9} {'judged':>7} {'breakeven':>9} {'delivered':>9} "
          f"{'q25-q75':>13}  schedule", flush=True)
    for path in a.matrices:
        name = path.rsplit("/", 1)[-1].split(".mtx")[0]
        A = load(path)
        x = operand(A, a.kernel, a.dense)
        with tempfile.TemporaryDirectory() as cache:
            kw = dict(threads=a.threads, cache_dir=cache)
            if a.kernel == "spmm":
                kw["dense"] = a.dense
            plan = waco_hybrid.tune(A, a.kernel, adaptive=True, nominees=a.nominees,
                                    expected_calls=a.expected_calls or None, **kw)
            calls = 0
            while plan.verdict == "exploring" and calls < a.max_calls:
                plan @ x
                calls += 1
            report = plan.report
            csr = waco_hybrid.make_plan(A, a.kernel, "csr", threads=a.threads,
                                        dense=a.dense if a.kernel == "spmm" else None)
            csr_s = side_by_side([csr], x, 3, 3)[0][0]
            block = max(1, int(a.block_seconds / max(csr_s, 1e-7)))
            (plan_s, csr_s), ratios = side_by_side([plan, csr], x, a.rounds, block)
        ad = report["adaptive"]
        delivered = 1 / np.median(ratios)
        q25, q75 = 1 / np.quantile(ratios, 0.75), 1 / np.quantile(ratios, 0.25)
        be = plan.break_even_calls
        nom = ad.get("nomination") or {}
        row = dict(matrix=name, nnz=int(A.nnz), kernel=a.kernel, verdict=plan.verdict,
                   calls=ad["calls"], exploring=ad["exploring_calls"],
                   choice_s=nom.get("seconds"), cost_s=ad["cost_s"], judged=plan.speedup,
                   break_even=be if be >= 0 else None, delivered=float(delivered),
                   delivered_q25=float(q25), delivered_q75=float(q75), csr_s=csr_s,
                   schedule=plan.schedule, report=report)
        rows.append(row)
        choice = f"{1e3 * row['choice_s']:.1f}" if row["choice_s"] is not None else "-"
        print(f"{name:24} {A.nnz:9d} {1e6 * csr_s:9.1f} {plan.verdict:>12} {ad['calls']:7d} "
              f"{ad['exploring_calls']:7d} {choice:>9} {1e3 * ad['cost_s']:9.1f} "
              f"{plan.speedup:7.3f} {('-' if be < 0 else f'{be:.0f}'):>9} {delivered:9.3f} "
              f"{q25:6.3f}-{q75:6.3f}  {plan.schedule}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    bes = [r["break_even"] for r in rows if r["break_even"] is not None]
    if bes:
        print(f"break-even calls over {len(bes)} gains: median {np.median(bes):.0f}, "
              f"min {min(bes):.0f}, max {max(bes):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
