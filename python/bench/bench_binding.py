#!/usr/bin/python3
"""What the Python binding costs: per matrix, a tuned SpMV plan's `plan @ x` (a new y each call)
and `plan.spmv(x, y)` from Python against the same saved plan's waco::Plan::spmv from C++
(waco-python-bench), and SciPy's `A @ x` (single-threaded) beside a 1-thread csr plan; then the
per-call overhead on a tiny matrix. Rounds are interleaved (the C++ program runs one round, after
as many warm-up calls, between the Python rounds); each figure is the median over rounds of the
mean time of a call.

    cmake --build build --target waco_python waco-python-bench
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_binding.py \\
        --cpp build/python/waco-python-bench --cache-dir /tmp/plans FILES...
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

import waco_hybrid


def per_call(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def cpp_per_call(cpp, matrix, plan_file, calls):
    """One round in the C++ program (after as many warm-up calls), between the Python rounds."""
    out = subprocess.run([cpp, matrix, plan_file, str(calls), "1"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["per_call_s"][0]


def measure(cpp, path, plan, csr1, rounds, budget_s, work):
    A = plan.matrix
    indptr, indices, data = A.csr_arrays()
    S = sp.csr_array((data, indices, indptr), shape=A.shape)
    x = np.linspace(-1, 1, A.shape[1], dtype=np.float32)
    y = np.empty(A.shape[0], dtype=np.float32)
    np.testing.assert_allclose(plan @ x, S @ x, rtol=1e-3, atol=1e-3 * np.abs(S @ x).max())
    calls = max(10, int(budget_s / max(per_call(lambda: plan.spmv(x, y), 10), 1e-9)))
    plan_file = os.path.join(work, "bench.plan")
    plan.save(plan_file)
    cases = {"py_matmul": lambda: plan @ x, "py_out": lambda: plan.spmv(x, y),
             "py_kw": lambda: plan.spmv(x, out=y), "scipy": lambda: S @ x,
             "csr1": lambda: csr1.spmv(x, y)}
    times = {k: [] for k in list(cases) + ["cpp"]}
    for _ in range(rounds):
        for k, fn in cases.items():
            fn()
            times[k].append(per_call(fn, calls))
        times["cpp"].append(cpp_per_call(cpp, path, plan_file, calls))
    r = {k: statistics.median(v) for k, v in times.items()}
    r["calls"] = calls
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--cpp", required=True, help="the waco-python-bench program")
    p.add_argument("--cache-dir", default=None, help="tuning cache (reruns reuse the decisions)")
    p.add_argument("--search", default="model")
    p.add_argument("--budget", type=int, default=0)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=0.2, help="of one round of one case")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="waco-bench-")
    print("| matrix | nnz | plan (verdict, speedup over csr) | C++ us | `plan @ x` us | vs C++ "
          "| `spmv(x, y)` us | vs C++ | SciPy 1 thread us | csr plan 1 thread us "
          "| `plan @ x` vs SciPy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in a.files:
        A = waco_hybrid.load(path)
        plan = waco_hybrid.tune(A, "spmv", search=a.search, budget=a.budget,
                                cache_dir=a.cache_dir)
        csr1 = waco_hybrid.make_plan(A, "spmv", "csr", threads=1)
        r = measure(a.cpp, path, plan, csr1, a.rounds, a.seconds, work)
        us = {k: v * 1e6 for k, v in r.items() if k != "calls"}
        print(f"| {os.path.basename(path)} | {A.nnz} | {plan.verdict}, {plan.speedup:.2f}x "
              f"| {us['cpp']:.1f} | {us['py_matmul']:.1f} | {r['py_matmul'] / r['cpp'] - 1:+.1%} "
              f"| {us['py_out']:.1f} | {r['py_out'] / r['cpp'] - 1:+.1%} | {us['scipy']:.1f} "
              f"| {us['csr1']:.1f} | {r['scipy'] / r['py_matmul']:.2f}x |",
              flush=True)
    # The binding's own cost: a 4 x 4 matrix, where the kernel takes almost nothing.
    tiny = os.path.join(work, "tiny.mtx")
    with open(tiny, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n4 4 4\n"
                "1 1 1\n2 2 2\n3 3 3\n4 4 4\n")
    A = waco_hybrid.load(tiny)
    plan = waco_hybrid.make_plan(A, "spmv", "csr", threads=1)
    r = measure(a.cpp, tiny, plan, plan, a.rounds, a.seconds, work)
    print(f"\ntiny 4 x 4 (1 thread, {r['calls']} calls a round): C++ {r['cpp'] * 1e9:.0f} ns, "
          f"plan.spmv(x, y) {r['py_out'] * 1e9:.0f} ns, plan.spmv(x, out=y) {r['py_kw'] * 1e9:.0f} ns, "
          f"plan @ x {r['py_matmul'] * 1e9:.0f} ns, "
          f"SciPy A @ x {r['scipy'] * 1e9:.0f} ns a call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
