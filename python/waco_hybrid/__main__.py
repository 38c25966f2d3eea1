"""python3 -m waco_hybrid tune FILE: `waco-hybrid tune` through the library (waco_hybrid.tune in
this process), sharing its tuning cache; --json prints the same report as `waco-hybrid tune
--json` (the deciding tune's report: verdict, best, speedup_over_csr, dtype, ...). --dtype f64
reads the file's values in double precision and tunes a float64 plan, as the CLI's --dtype."""

import argparse
import json
import sys

import waco_hybrid

# `waco-hybrid tune --dtype` takes these names (case-insensitive): the same here.
_DTYPES = {"f32": "float32", "float32": "float32", "float": "float32",
           "f64": "float64", "float64": "float64", "double": "float64"}


def _dtype(text):
    try:
        return _DTYPES[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a value type: f32 or f64") from None


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m waco_hybrid",
        description="waco-hybrid through its Python module. The measurement options of the "
                    "waco-hybrid CLI that the library does not take (--repeat, --warmup, "
                    "--decide-*, --schedules, --model, ...) are left to `waco-hybrid tune`.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="tune a kernel for a matrix file, as `waco-hybrid tune`")
    t.add_argument("file", metavar="FILE",
                   help="Matrix Market (.mtx[.gz]) or, for mttkrp, FROSTT (.tns[.gz])")
    t.add_argument("--kernel", "-k", default="spmv", choices=["spmv", "spmm", "sddmm", "mttkrp"])
    t.add_argument("--search", default="model", help="model, anns, random, exhaustive, bandit")
    budget = t.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=int, default=0, help="candidates (0: the search's default)")
    budget.add_argument("--budget-seconds", type=float, default=0.0)
    t.add_argument("--passes", default="all")
    t.add_argument("--db", default=None, help="results database (default: none)")
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--dense", type=int, default=None, help="J of spmm/mttkrp, K of sddmm")
    t.add_argument("--dtype", type=_dtype, default="float32", metavar="f32|f64",
                   help="value type: f32 (single precision, default) or f64 (double: the file's "
                        "values, the dense operands and the kernel in double)")
    t.add_argument("--threads", type=int, default=0, help="0: every available core")
    t.add_argument("--confirm", type=int, default=None)
    t.add_argument("--expected-calls", type=int, default=None)
    t.add_argument("--tuning-share", type=float, default=0.1)
    cache = t.add_mutually_exclusive_group()
    cache.add_argument("--no-plan-cache", action="store_true")
    cache.add_argument("--plan-cache", default=None, help="tuning cache folder")
    t.add_argument("--refresh", action="store_true")
    t.add_argument("--cache-dir", default=None, help="compiled kernels' folder")
    t.add_argument("--json", action="store_true", help="print the tune report as JSON")
    t.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p


def _tune(a):
    A = waco_hybrid.load(a.file, dtype=a.dtype)
    plan = waco_hybrid.tune(
        A, a.kernel, threads=a.threads, expected_calls=a.expected_calls, dense=a.dense,
        search=a.search, budget=a.budget, budget_seconds=a.budget_seconds,
        cache_dir=a.plan_cache, use_cache=not a.no_plan_cache, refresh=a.refresh,
        kernel_cache_dir=a.cache_dir, passes=a.passes, confirm=a.confirm, seed=a.seed,
        results_db=a.db, tuning_share=a.tuning_share,
        progress=None if a.quiet else (lambda line: print(line, file=sys.stderr, flush=True)))
    if a.json:
        print(json.dumps(plan.report, indent=2))
        return 0
    shape = " x ".join(str(n) for n in plan.shape)
    print(f"{a.file}: {shape}, {A.nnz} nonzeros, fingerprint {A.fingerprint}")
    print(f"kernel:    {plan.kernel} ({plan.threads} threads"
          + (f", dense {plan.dense}" if plan.kernel != "spmv" else "")
          + f", {plan.dtype})")
    print(f"schedule:  {plan.schedule}")
    print(f"verdict:   {plan.verdict}")
    if plan.speedup > 0:
        print(f"speedup:   {plan.speedup:.3f}x over csr")
    if plan.break_even_calls >= 0:
        print(f"break-even after {plan.break_even_calls:.0f} calls")
    print(f"tuning:    {plan.tuning_seconds:.2f} s" + (" (from the tuning cache)" if plan.from_cache
                                                     else ""))
    return 0


def main(argv=None):
    a = _parser().parse_args(argv)
    try:
        return _tune(a)
    except KeyboardInterrupt:
        # As `waco-hybrid tune` after Ctrl-C: a line, status 1. The library stopped at once
        # (its processes ended, nothing half-stored, no decision cached).
        kept = f" (the measurements finished before are in {a.db})" if a.db else ""
        print(f"tune: interrupted; run the same command again to tune{kept}", file=sys.stderr)
        return 1
    except waco_hybrid.Error as e:
        print(f"error: {e}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
