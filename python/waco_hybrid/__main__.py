"""python3 -m waco_hybrid tune FILE: `waco-hybrid tune` through the library (waco_hybrid.tune in
this process), sharing its tuning cache; --json prints the same report as `waco-hybrid tune
--json` (the deciding tune's report: verdict, best, speedup_over_csr, dtype, ...). --dtype f64
reads the file's values in double precision and tunes a float64 plan, as the CLI's --dtype.
Every option of `waco-hybrid tune` is here under its name but those of CLI_ONLY, which the
library cannot express (each with the reason); -o FILE writes the plan's drop-in header
(Plan.standalone_header, waco::Plan::standalone_header); --save FILE is this entry point's own."""

import argparse
import json
import sys
import textwrap

import waco_hybrid

# `waco-hybrid tune --dtype` takes these names (case-insensitive): the same here.
_DTYPES = {"f32": "float32", "float32": "float32", "float": "float32",
           "f64": "float64", "float64": "float64", "double": "float64"}


def _dtype(text):
    try:
        return _DTYPES[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a value type: f32 or f64") from None


# `waco-hybrid tune` options that the library (waco::Options, waco::Matrix::from_file) cannot
# express, and why; tests/python/test_python_cli.py checks that every other option of the CLI's
# --help is an option here.
CLI_ONLY = {
    "--drop-zeros": "waco::Matrix::from_file reads with the CLI's default (explicit zeros kept as "
                    "entries); in Python read with SciPy and call A.eliminate_zeros()",
    "--allow-nonfinite": "the library refuses NaN and Inf values (waco_hybrid.Error naming the "
                         "entry); there is no option to accept them",
}

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def _size(text):
    """--cache-bytes as the CLI reads it: a number with an optional binary K/M/G/T suffix."""
    t = text.strip().lower()
    digits = t.rstrip("kmgtb")
    try:
        return int(float(digits) * _SIZE_UNITS[t[len(digits):]])
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (e.g. 4M, 512K)") from None


def _add_settings(t):
    """The options of waco_hybrid.TUNE_SETTINGS, named and typed as `waco-hybrid tune`'s (None
    or False: the CLI's default, left to the library)."""
    t.add_argument("--model", help="cost model of --search model (default: the shipped one)")
    t.add_argument("--index", help="HNSW graph of --search anns")
    t.add_argument("--explain", action="store_true", help="the report says why the winner won")
    t.add_argument("--check-recall", action="store_true", help="--search anns: recall_at_10")
    t.add_argument("--schedules", metavar="FILE", help="measure this list instead of a search")
    t.add_argument("--measure-first", action="store_true",
                   help="model searches: the nominees one by one first")
    for name, kind, what in (
            ("repeat", int, "timed runs per candidate (10)"),
            ("warmup", int, "untimed runs per candidate (2)"),
            ("confirm-rounds", int, "rounds of the side-by-side measurement (20)"),
            ("decide-runs", int, "fresh decision runs (3)"),
            ("decide-extra-runs", int, "more fresh runs for a marginal gain (2; 0: never)"),
            ("per-structure", int, "the model's nominees of one loop structure at most (3; 0: its order alone)"),
            ("layouts", int, "memory layouts of each small candidate side by side (4)"),
            ("decide-rounds", int, "rounds of each fresh decision run (20)"),
            ("decide-leaders", int, "nominees timed in the decision runs (3)"),
            ("halving-keep", int, "nominees timed in every selection round; the slower half "
                                  "of the others stop at each quarter of the rounds (6; 0: none)"),
            ("decide-drop", float, "a leader slower than the fastest by more than this "
                                   "after a decision run stops (1.05; <= 1: none)"),
            ("decide-clear", float, "the decision runs stop on a gain at least 1/this in the "
                                    "selection and in the runs made (0.5; 0: every run)"),
            ("min-gain", float, "smallest gain reported (0.02)"),
            ("verdict-level", float, "confidence level of the ratio's interval (0.9)"),
            ("max-disturbed", float, "share of disturbed decision rounds tolerated (0.1)"),
            ("timeout", float, "seconds to verify and time a candidate (60)"),
            ("compile-timeout", float, "seconds to build and compile a candidate (300)"),
            ("tolerance", float, "max |out - ref| / sum|products| per entry (1e-4)"),
            ("abandon-factor", float, "racing factor (3; 0: off)"),
            ("max-padding", float, "formats storing more values per nonzero are refused (20)"),
            ("tile-window", int, "tile-window pass (0)"),
            ("max-block-padding", float, "block-fill pass (2)"),
            ("min-chunks-per-thread", int, "chunk-rows pass (1)"),
            ("chunk-window", int, "chunk-rows pass (2)"),
            ("max-serial-work", int, "parallelize-one pass (16384)"),
            ("cache-fraction", float, "share of the cache level for the tile model (0.5)")):
        t.add_argument("--" + name, type=kind, default=None, help=what)
    t.add_argument("--decide-always", action="store_true",
                   help="fresh decision runs even without a selection gain")
    t.add_argument("--decide-together", action="store_true",
                   help="all fresh decision leaders in one child a run (default: one child each)")
    t.add_argument("--retry-failed", action="store_true",
                   help="measure again candidates stored with a status other than ok")
    t.add_argument("--no-calibration", action="store_true",
                   help="rank with the shipped model even where `waco-hybrid calibrate` made one")
    t.add_argument("--compiler", help="C++ compiler of generated kernels (c++)")
    t.add_argument("--race", choices=["atomic", "private", "auto"])
    t.add_argument("--cache-level", choices=["llc-core", "l1", "l2", "l3"])
    t.add_argument("--cache-bytes", type=_size, help="cache bytes per thread, K/M/G suffixes")
    t.add_argument("--side-by-side-memory", type=_size,
                   help="memory of one side-by-side child for formats and outputs, K/M/G "
                        "suffixes (a quarter of the machine's); beyond it, heats")


def _settings(a):
    """The TUNE_SETTINGS given on the command line."""
    out = {}
    for name in waco_hybrid.TUNE_SETTINGS:
        value = getattr(a, name)
        if value is not None and value is not False:
            out[name] = value
    return out


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m waco_hybrid",
        description="waco-hybrid through its Python module: `tune` takes the options of "
                    "`waco-hybrid tune` (see its --help), but "
                    + ", ".join(CLI_ONLY) + " (python -m waco_hybrid tune --help says why).")
    sub = p.add_subparsers(dest="command", required=True)
    # The epilog keeps its own lines (wrapped below without breaking an option at its hyphens).
    t = sub.add_parser("tune", help="tune a kernel for a matrix file, as `waco-hybrid tune`",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
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
    t.add_argument("--adaptive", action="store_true",
                   help="an adaptive plan (waco_hybrid.tune(adaptive=True)) driven by calls made "
                        "here, then csr alone on as many calls, as `waco-hybrid tune --adaptive`")
    t.add_argument("--nominees", type=int, default=None, help="--adaptive: nominees tried")
    t.add_argument("--calls", type=int, default=None,
                   help="--adaptive: calls to make (default: --expected-calls, else until the "
                        f"plan settles, at most {_MAX_CALLS})")
    t.add_argument("--no-compare", action="store_true",
                   help="--adaptive: do not time csr alone on as many calls afterwards")
    t.add_argument("--json", action="store_true", help="print the tune report as JSON")
    t.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    t.add_argument("--cpu-lock", metavar="FILE",
                   help="hold an exclusive flock on FILE from reading the file until the tune "
                        "ends, so that builds and benchmarks taking the same lock never run beside "
                        "its measurements (e.g. flock -s FILE make)")
    t.add_argument("--save", metavar="FILE", help="save the plan (waco_hybrid.load_plan reads it)")
    t.add_argument("--output", "-o", metavar="FILE",
                   help="write the plan's drop-in C++ header (the kernel that serves, its format "
                        "builder from CSR and the call; nothing of waco-hybrid needed)")
    _add_settings(t)
    t.epilog = "Not here (the library cannot express them):\n" + "\n".join(
        textwrap.fill(f"{flag}: {why}", width=78, initial_indent="  * ", subsequent_indent="    ",
                      break_on_hyphens=False) for flag, why in CLI_ONLY.items())
    return p


_MAX_CALLS = 1000000


def _drive(a, A, plan):
    """`--adaptive`: the plan's calls made here on seeded operands (drive_adaptive's in C++)."""
    import time
    import numpy as np
    rng = np.random.default_rng(a.seed)
    dtype = np.dtype(a.dtype)
    rows, cols = A.shape[0], A.shape[1]
    n = plan.dense

    def operand(*shape):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)

    if plan.kernel == "spmv":
        args, out = (operand(cols),), np.empty(rows, dtype)
    elif plan.kernel == "spmm":
        args, out = (operand(cols, n),), np.empty((rows, n), dtype)
    elif plan.kernel == "sddmm":
        args, out = (operand(rows, n), operand(cols, n)), np.empty(A.nnz, dtype)
    else:
        args, out = (operand(A.shape[1], n), operand(A.shape[2], n)), np.empty((rows, n), dtype)

    def call(p):
        getattr(p, p.kernel)(*args, out=out)

    limit = a.calls or a.expected_calls or _MAX_CALLS
    until_settled = not a.calls and not a.expected_calls
    t0 = time.perf_counter()
    made = 0
    while made < limit:
        call(plan)
        made += 1
        if until_settled and plan.verdict != "exploring":
            break
    wall = time.perf_counter() - t0
    report = plan.report
    drive = {"calls": made, "settled": plan.verdict != "exploring", "wall_s": wall,
             "csr_wall_s": None, "wall_ratio": None}
    if not a.no_compare and made > 0:
        csr = waco_hybrid.make_plan(A, a.kernel, threads=plan.threads, dense=a.dense,
                                    kernel_cache_dir=a.cache_dir)
        c0 = time.perf_counter()
        for _ in range(made):
            call(csr)
        drive["csr_wall_s"] = time.perf_counter() - c0
        drive["wall_ratio"] = wall / drive["csr_wall_s"] if drive["csr_wall_s"] > 0 else None
    report["drive"] = drive
    report["file"] = a.file
    return report


def _check_adaptive(parser, a):
    """The CLI's rules: --nominees, --calls, --no-compare need --adaptive, which excludes what a
    tune measures before returning."""
    for flag in ("nominees", "calls", "no_compare"):
        if getattr(a, flag) not in (None, False) and not a.adaptive:
            parser.error(f"--{flag.replace('_', '-')} needs --adaptive")
    if a.adaptive:
        for flag in ("schedules", "output", "db", "measure_first", "budget", "budget_seconds",
                     "confirm", "explain", "save"):
            if getattr(a, flag, None) not in (None, False, 0, 0.0):
                parser.error(f"--{flag.replace('_', '-')} excludes --adaptive")


def _hold_cpu_lock(path, quiet):
    """`--cpu-lock`: the exclusive flock `waco-hybrid tune --cpu-lock` takes, kept until the
    process exits (the descriptor is never closed)."""
    import fcntl
    import os
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if not quiet:
            print(f"waiting for the CPU lock {path} (another process holds it)", file=sys.stderr,
                  flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _tune(a):
    if a.output:  # before the search, not after it (as the CLI)
        with open(a.output, "a"):
            pass
    if a.cpu_lock:
        _hold_cpu_lock(a.cpu_lock, a.quiet)
    A = waco_hybrid.load(a.file, dtype=a.dtype)
    plan = waco_hybrid.tune(
        A, a.kernel, threads=a.threads, expected_calls=a.expected_calls, dense=a.dense,
        search=a.search, budget=a.budget, budget_seconds=a.budget_seconds,
        cache_dir=a.plan_cache, use_cache=not a.no_plan_cache, refresh=a.refresh,
        kernel_cache_dir=a.cache_dir, passes=a.passes, confirm=a.confirm, seed=a.seed,
        results_db=a.db, tuning_share=a.tuning_share, adaptive=a.adaptive,
        progress=None if a.quiet else (lambda line: print(line, file=sys.stderr, flush=True)),
        **({"nominees": a.nominees} if a.nominees else {}), **_settings(a))
    if a.adaptive:
        report = _drive(a, A, plan)
        if a.json:
            print(json.dumps(report, indent=2))
            return 0
        d = report["drive"]
        print(f"adaptive plan, {d['calls']} calls"
              + ("" if d["settled"] else " (still exploring)")
              + f": {plan.verdict}, serving {plan.schedule}")
        if plan.speedup > 0:
            how = ("rechecked in blocks of its calls"
                   if plan.report["adaptive"].get("speedup_from") == "rechecks"
                   else "judged on its calls")
            print(f"  speedup over csr ({how}): {plan.speedup:.3f}x")
        print(f"  wall time of the calls: {d['wall_s'] * 1e3:.3f} ms"
              + (f", csr alone {d['csr_wall_s'] * 1e3:.3f} ms (ratio {d['wall_ratio']:.3f})"
                 if d["csr_wall_s"] else ""))
        return 0
    if a.save:
        plan.save(a.save)
    report = plan.report
    if a.output:
        with open(a.output, "w") as f:
            f.write(plan.standalone_header())
        report["output"] = a.output
        if not a.quiet:
            what = ("tuned" if plan.implementation == "generated" else
                    "dia baseline's (diagonal storage)" if plan.implementation == "dia" else
                    f"{plan.implementation} schedule's (the hand-written {plan.implementation} "
                    "baseline ran fastest)")
            print(f"tune: wrote the {what} kernel to {a.output}", file=sys.stderr)
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    shape = " x ".join(str(n) for n in plan.shape)
    print(f"{a.file}: {shape}, {A.nnz} nonzeros, fingerprint {A.fingerprint}")
    print(f"kernel:    {plan.kernel} ({plan.threads} threads"
          + (f", dense {plan.dense}" if plan.kernel != "spmv" else "")
          + f", {plan.dtype})")
    if plan.implementation == "generated":
        print(f"schedule:  {plan.schedule}")
    elif plan.implementation == "dia":  # as the CLI's report names it
        print("schedule:  impl=dia (the dia baseline: diagonal storage; it beat csr)")
    else:  # as the CLI's report names a baseline
        print(f"schedule:  impl={plan.implementation} (the hand-written {plan.implementation} "
              f"baseline: it ran faster than the {plan.schedule} schedule)")
    print(f"verdict:   {plan.verdict}")
    if plan.speedup > 0:
        print(f"speedup:   {plan.speedup:.3f}x over csr")
    if plan.break_even_calls >= 0:
        print(f"break-even after {plan.break_even_calls:.0f} calls")
    print(f"tuning:    {plan.tuning_seconds:.2f} s" + (" (from the tuning cache)" if plan.from_cache
                                                     else ""))
    return 0


def main(argv=None):
    parser = _parser()
    a = parser.parse_args(argv)
    _check_adaptive(parser, a)
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
