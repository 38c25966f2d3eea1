#!/usr/bin/python3
"""PageRank on a graph with scipy.sparse and with waco_hybrid side by side: the same power
iteration r <- d P r + (1 - d) / n (+ the dangling nodes' share), once with SciPy's P @ r and
once with a plan tuned by waco_hybrid for P (tuning time counted), the same ranks to tolerance,
and the timings.

    PYTHONPATH=build/python /usr/bin/python3 examples/pagerank.py examples/bcsstk13.mtx.gz
    PYTHONPATH=build/python /usr/bin/python3 examples/pagerank.py ../shared/data/matrices/email-Enron.mtx.gz --iterations 100

Without a file it makes a seeded random graph (--nodes, --degree). SciPy's SpMV runs on one
thread; the plan on --threads (0: every core)."""

import argparse
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

import waco_hybrid


def transition(G):
    """P = G^T D^-1 as float32 CSR (column-stochastic; a dangling node's column is empty) and
    the dangling mask."""
    G = sp.csr_matrix(G, dtype=np.float32)
    G.data[:] = 1.0  # the graph's pattern: every edge weight 1
    out_degree = np.asarray(G.sum(axis=1)).ravel()
    inv = np.divide(1.0, out_degree, out=np.zeros_like(out_degree), where=out_degree > 0)
    P = sp.csr_matrix(G.T @ sp.diags(inv.astype(np.float32)), dtype=np.float32)
    P.sum_duplicates()
    P.sort_indices()
    return P, out_degree == 0


def pagerank(spmv, n, dangling, damping, iterations, tol):
    """The power iteration with spmv(r) = P r; returns the ranks and the iterations run."""
    r = np.full(n, 1.0 / n, dtype=np.float32)
    for it in range(1, iterations + 1):
        leak = damping * r[dangling].sum() / n
        nxt = damping * spmv(r) + np.float32((1.0 - damping) / n + leak)
        delta = np.abs(nxt - r).sum()
        r = nxt.astype(np.float32, copy=False)
        if delta < tol:
            return r, it
    return r, iterations


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("graph", nargs="?", help="Matrix Market file of the graph (adjacency)")
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--degree", type=int, default=8)
    p.add_argument("--damping", type=float, default=0.85)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--tol", type=float, default=0.0, help="stop when |r' - r|_1 < tol (0: never)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--search", default="model")
    p.add_argument("--budget", type=int, default=0)
    p.add_argument("--cache-dir", default=None, help="tuning cache folder")
    p.add_argument("--check", action="store_true", help="exit 1 unless the ranks agree")
    a = p.parse_args()

    if a.graph:
        G = scipy.io.mmread(a.graph)
    else:
        rng = np.random.default_rng(1)
        rows = np.repeat(np.arange(a.nodes), a.degree)
        G = sp.coo_matrix((np.ones(rows.size, np.float32),
                           (rows, rng.integers(0, a.nodes, rows.size))), shape=(a.nodes,) * 2)
    P, dangling = transition(G)
    n = P.shape[0]
    print(f"graph: {n} nodes, {P.nnz} edges, {int(dangling.sum())} dangling")

    t0 = time.perf_counter()
    ranks_scipy, its = pagerank(lambda r: P @ r, n, dangling, a.damping, a.iterations, a.tol)
    t_scipy = time.perf_counter() - t0

    t0 = time.perf_counter()
    plan = waco_hybrid.tune(P, "spmv", threads=a.threads, expected_calls=a.iterations,
                            search=a.search, budget=a.budget, cache_dir=a.cache_dir)
    t_tune = time.perf_counter() - t0
    y = np.empty(n, dtype=np.float32)
    t0 = time.perf_counter()
    ranks_waco, its_w = pagerank(lambda r: plan.spmv(r, out=y), n, dangling, a.damping,
                                 a.iterations, a.tol)
    t_waco = time.perf_counter() - t0

    # SpMV alone, per call (the iteration's vector arithmetic is the same NumPy for both).
    x = ranks_scipy.copy()
    reps = max(10, min(1000, int(2e8 / max(P.nnz, 1))))
    t0 = time.perf_counter()
    for _ in range(reps):
        P @ x
    per_scipy = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        plan.spmv(x, out=y)
    per_waco = (time.perf_counter() - t0) / reps

    diff = np.abs(ranks_waco - ranks_scipy).max()
    agree = bool(np.allclose(ranks_waco, ranks_scipy, rtol=1e-4, atol=1e-4 * ranks_scipy.max()))
    print(f"plan: {plan.schedule} (verdict {plan.verdict}, {plan.threads} threads, "
          f"tuned in {t_tune:.2f} s{', from the cache' if plan.from_cache else ''})")
    print(f"{'back-end':<22}{'iterations':>11}{'total s':>10}{'SpMV us':>10}")
    print(f"{'scipy (1 thread)':<22}{its:>11}{t_scipy:>10.3f}{per_scipy * 1e6:>10.1f}")
    print(f"{'waco_hybrid':<22}{its_w:>11}{t_waco:>10.3f}{per_waco * 1e6:>10.1f}")
    print(f"{'waco_hybrid + tuning':<22}{its_w:>11}{t_waco + t_tune:>10.3f}")
    top = np.argsort(-ranks_waco)[:5]
    print("top nodes:", ", ".join(f"{i} ({ranks_waco[i]:.3g})" for i in top))
    print(f"max |difference| of the ranks: {diff:.2e} ({'agree' if agree else 'DISAGREE'})")
    return 0 if agree or not a.check else 1


if __name__ == "__main__":
    sys.exit(main())
