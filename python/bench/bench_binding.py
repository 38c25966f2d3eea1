#!/usr/bin/python3
"""What the Python binding costs, and what a tuned plan gives over SciPy: per matrix and dtype, a
tuned SpMV plan's `plan @ x` (a new y each call) and `plan.spmv(x, y)` from Python against the
same saved plan's waco::Plan::spmv from C++ (waco-python-bench, a separate process), the csr
plan of the same threads from C++ (is the tuned plan faster than csr?), and SciPy's `A @ x`
(single-threaded) beside a 1-thread csr plan; then the per-call overhead on a tiny matrix.

Rounds are interleaved: each round times every Python case and runs the C++ program once (one
round of the tuned and the csr plan, after as many warm-up calls), alternating which side goes
first. A case's time in a round is the mean of `calls` calls; ratios are taken within a round,
and the tables give their median over rounds with the quartiles and the range.

    cmake --build build --target waco_python waco-python-bench
    # tune once and save the plans, then time the saved plans
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_binding.py --tune-only \\
        --plans /tmp/plans --dtype f32,f64 --threads 2 FILES...
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_binding.py \\
        --cpp build/python/waco-python-bench --plans /tmp/plans --dtype f32,f64 \\
        --threads 2 --json-out results.jsonl FILES...
    python/bench/bench_binding.py --tables results.jsonl     # the tables of python/README.md
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


def per_call(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def cpp_round(cpp, matrix, dtype, plan_files, calls):
    """One round of each plan in the C++ program (after as many warm-up calls)."""
    out = subprocess.run([cpp, matrix, dtype, str(calls), "1", *plan_files], check=True,
                         capture_output=True, text=True).stdout
    return [t[0] for t in json.loads(out)["per_call_s"]]


def measure(cpp, path, dtype, plan, csr, csr1, rounds, budget_s, work):
    """Per-round times (seconds a call) of each case: py_matmul, py_out, py_kw, scipy, csr1 (the
    1-thread csr plan from Python), cpp (the plan from C++), cpp_csr (the csr plan of the plan's
    threads from C++)."""
    import scipy.sparse as sp
    A = plan.matrix
    indptr, indices, data = A.csr_arrays()
    S = sp.csr_array((data, indices, indptr), shape=A.shape)
    npdt = np.dtype(plan.dtype)
    x = np.linspace(-1, 1, A.shape[1], dtype=npdt)
    y = np.empty(A.shape[0], dtype=npdt)
    want = S @ x
    tol = 1e-3 if npdt == np.float32 else 1e-9
    scale = max(float(np.abs(want).max()), 1e-30)
    for p in (plan, csr, csr1):
        np.testing.assert_allclose(p @ x, want, rtol=tol, atol=tol * scale)
    calls = max(10, int(budget_s / max(per_call(lambda: plan.spmv(x, y), 10), 1e-9)))
    plan_files = [os.path.join(work, "bench.plan"), os.path.join(work, "csr.plan")]
    plan.save(plan_files[0])
    csr.save(plan_files[1])
    cases = {"py_matmul": lambda: plan @ x, "py_out": lambda: plan.spmv(x, y),
             "py_kw": lambda: plan.spmv(x, out=y), "scipy": lambda: S @ x,
             "csr1": lambda: csr1.spmv(x, y)}
    times = {k: [] for k in list(cases) + ["cpp", "cpp_csr"]}
    cli_dtype = "f64" if npdt == np.float64 else "f32"

    def python_side():
        for k, fn in cases.items():
            fn()
            times[k].append(per_call(fn, calls))

    def cpp_side():
        t_plan, t_csr = cpp_round(cpp, path, cli_dtype, plan_files, calls)
        times["cpp"].append(t_plan)
        times["cpp_csr"].append(t_csr)

    for r in range(rounds):
        for side in ((python_side, cpp_side) if r % 2 == 0 else (cpp_side, python_side)):
            side()
    return {"calls": calls, "times": times}


def summary(values):
    """Median, quartiles and range of a list of per-round values."""
    v = sorted(values)
    q = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else [v[0]] * 3
    return {"median": statistics.median(v), "q1": q[0], "q3": q[2], "min": v[0], "max": v[-1]}


def ratios(times, num, den):
    return [a / b for a, b in zip(times[num], times[den])]


def tables(rows):
    """The two Markdown tables of python/README.md from the JSON lines of --json-out."""
    def spread(s, pct=False):
        f = (lambda v: f"{v - 1:+.1%}") if pct else (lambda v: f"{v:.2f}")
        return f"{f(s['median'])} [{f(s['q1'])}, {f(s['q3'])}] ({f(s['min'])} to {f(s['max'])})"

    out = ["Python against C++ (the same saved plan; per-round ratio of the Python call's time to "
           "the C++ call's, median [quartiles] (range)):", "",
           "| matrix | nnz | dtype | threads | plan (verdict, speedup) | rounds x calls | C++ us "
           "| `plan @ x` us | `plan @ x` / C++ | `plan.spmv(x, y)` / C++ |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["times"]
        us = {k: statistics.median(v) * 1e6 for k, v in t.items()}
        out.append(
            f"| {r['matrix']} | {r['nnz']} | {r['dtype']} | {r['threads']} | {r['verdict']}, "
            f"{r['speedup']:.2f}x | {len(t['cpp'])} x {r['calls']} | {us['cpp']:.1f} "
            f"| {us['py_matmul']:.1f} | {spread(summary(ratios(t, 'py_matmul', 'cpp')), True)} "
            f"| {spread(summary(ratios(t, 'py_out', 'cpp')), True)} |")
    out += ["", "waco against SciPy (per-round speedups, median [quartiles] (range); SciPy's "
            "`A @ x` runs on one thread, the plans on the threads given):", "",
            "| matrix | dtype | plan threads | C++: csr plan / tuned plan | SciPy us (1 thread) "
            "| `plan @ x` us | SciPy / `plan @ x` | csr plan 1 thread us | SciPy / csr plan 1 "
            "thread |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["times"]
        us = {k: statistics.median(v) * 1e6 for k, v in t.items()}
        out.append(
            f"| {r['matrix']} | {r['dtype']} | {r['threads']} "
            f"| {spread(summary(ratios(t, 'cpp_csr', 'cpp')))} | {us['scipy']:.1f} "
            f"| {us['py_matmul']:.1f} | {spread(summary(ratios(t, 'scipy', 'py_matmul')))} "
            f"| {us['csr1']:.1f} | {spread(summary(ratios(t, 'scipy', 'csr1')))} |")
    return "\n".join(out)


def tiny_overhead(cpp, rounds, budget_s, work):
    """The binding's own cost: a 4 x 4 matrix, where the kernel takes almost nothing."""
    import waco_hybrid
    lines = []
    for dtype in ("f32", "f64"):
        tiny = os.path.join(work, "tiny.mtx")
        with open(tiny, "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n4 4 4\n"
                    "1 1 1\n2 2 2\n3 3 3\n4 4 4\n")
        A = waco_hybrid.load(tiny, dtype)
        plan = waco_hybrid.make_plan(A, "spmv", "csr", threads=1)
        r = measure(cpp, tiny, dtype, plan, plan, plan, rounds, budget_s, work)
        t = r["times"]
        ns = {k: statistics.median(v) * 1e9 for k, v in t.items()}
        d = {k: summary([(a - b) * 1e9 for a, b in zip(t[k], t["cpp"])])
             for k in ("py_out", "py_kw", "py_matmul")}
        lines.append(
            f"tiny 4 x 4 {dtype} csr plan, 1 thread ({len(t['cpp'])} rounds x {r['calls']} calls): "
            f"C++ {ns['cpp']:.0f} ns, plan.spmv(x, y) {ns['py_out']:.0f} ns "
            f"(+{d['py_out']['median']:.0f} ns, range {d['py_out']['min']:.0f} to "
            f"{d['py_out']['max']:.0f}), plan.spmv(x, out=y) {ns['py_kw']:.0f} ns "
            f"(+{d['py_kw']['median']:.0f}), plan @ x {ns['py_matmul']:.0f} ns "
            f"(+{d['py_matmul']['median']:.0f}), SciPy A @ x {ns['scipy']:.0f} ns a call")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*")
    p.add_argument("--cpp", help="the waco-python-bench program (timing runs)")
    p.add_argument("--cache-dir", default=None, help="tuning cache (reruns reuse the decisions)")
    p.add_argument("--plans", help="folder of the tuned plans (--tune-only saves them there, "
                   "timing runs load them: the tuning cache's key names the build's revision)")
    p.add_argument("--dtype", default="f32", help="f32, f64 or f32,f64")
    p.add_argument("--threads", type=int, default=2, help="of the tuned and the csr plan")
    p.add_argument("--search", default="model")
    p.add_argument("--budget", type=int, default=0)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--seconds", type=float, default=0.1, help="of one round of one case")
    p.add_argument("--tune-only", action="store_true", help="tune (or read the cache) and stop")
    p.add_argument("--tiny", action="store_true", help="also the 4 x 4 matrix's overhead")
    p.add_argument("--json-out", help="append each matrix's per-round times here (JSON lines)")
    p.add_argument("--tables", metavar="JSONL", help="print the tables of a --json-out file")
    a = p.parse_args()
    if a.tables:
        with open(a.tables) as f:
            print(tables([json.loads(line) for line in f if line.strip()]))
        return 0
    import waco_hybrid
    if not a.tune_only and not a.cpp:
        p.error("--cpp is needed to time (or --tune-only, --tables)")
    work = tempfile.mkdtemp(prefix="waco-bench-")
    for path in a.files:
        for dtype in a.dtype.split(","):
            A = waco_hybrid.load(path, dtype)
            name = os.path.basename(path)
            saved = os.path.join(a.plans, f"{name}.{dtype}.plan") if a.plans else None
            t0 = time.perf_counter()
            if saved and not a.tune_only and os.path.exists(saved):
                plan = waco_hybrid.load_plan(saved, A)
            else:
                plan = waco_hybrid.tune(A, "spmv", threads=a.threads, search=a.search,
                                        budget=a.budget, cache_dir=a.cache_dir)
                if saved:
                    os.makedirs(a.plans, exist_ok=True)
                    plan.save(saved)
            tune_s = time.perf_counter() - t0
            if a.tune_only:
                print(f"{name} {dtype}: {plan.verdict}, {plan.speedup:.2f}x, "
                      f"{plan.implementation} {plan.schedule} "
                      f"({'cache' if plan.from_cache else f'tuned in {tune_s:.1f} s'})",
                      flush=True)
                continue
            csr = waco_hybrid.make_plan(A, "spmv", "csr", threads=a.threads)
            csr1 = waco_hybrid.make_plan(A, "spmv", "csr", threads=1)
            r = measure(a.cpp, path, dtype, plan, csr, csr1, a.rounds, a.seconds, work)
            r.update(matrix=name, nnz=A.nnz, dtype=dtype, threads=plan.threads,
                     verdict=plan.verdict, speedup=plan.speedup, schedule=plan.schedule,
                     implementation=plan.implementation, from_cache=plan.from_cache)
            if a.json_out:
                with open(a.json_out, "a") as f:
                    f.write(json.dumps(r) + "\n")
            print(tables([r]), flush=True)
    if a.tiny and a.cpp:
        for line in tiny_overhead(a.cpp, a.rounds, a.seconds, work):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
