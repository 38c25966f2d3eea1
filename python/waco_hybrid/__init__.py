"""waco_hybrid: waco-hybrid's autotuned sparse kernels (SpMV, SpMM, SDDMM, MTTKRP) for SciPy
sparse matrices and NumPy arrays.

    import numpy as np, scipy.sparse as sp, waco_hybrid
    A = sp.random(10000, 10000, density=1e-3, format="csr", dtype=np.float32)
    plan = waco_hybrid.tune(A, "spmv", expected_calls=5000)
    y = plan @ np.ones(10000, dtype=np.float32)        # y = A x, the tuned kernel

Single or double precision: a float32 matrix makes float32 plans, a float64 one float64 plans
(plan.dtype); other dtypes are a waco_hybrid.DtypeError (both a TypeError and a ValueError).
Dense operands must be C-contiguous ndarrays of the plan's dtype and the right shape, and results
come in that dtype: nothing is converted behind your back (DtypeError for the dtype, ValueError
for shape and order). Errors of waco-hybrid itself are waco_hybrid.Error, with the message of the waco-hybrid CLI and a hint (e.hint).
"""

import numpy as np

from . import _waco
from ._waco import DtypeError, Error, Matrix, Plan, version
from ._convert import _index32, as_matrix, check_values_dtype, dtype_name
from ._data import dataset, results, to_structured

__all__ = ["DtypeError", "Error", "Matrix", "Plan", "version", "matrix", "tensor", "load", "tune", "make_plan",
           "load_plan", "results", "dataset", "to_structured", "TUNE_SETTINGS"]
__version__ = version()


def matrix(A):
    """A waco_hybrid.Matrix for a SciPy sparse matrix or array of float32 or float64 (see tune
    for the conversion; the Matrix's dtype is A's): convert once, then tune, make plans and load
    plans of it without converting again."""
    return as_matrix(A)


def tensor(shape, coords, values=None, dtype=None):
    """A 3-D sparse tensor (MTTKRP's operand) from coordinates: shape (I, K, L), coords a
    3 x nnz int32 array (one row a mode, 0-based, any order; repeats are summed), values nnz
    float32 or float64 (None: every value 1). The tensor's dtype is the values' (dtype, when
    given, must agree: nothing is converted); of a pattern (values None) dtype, else float32."""
    coords = _index32(coords, "coords")
    want = None if dtype is None else dtype_name(dtype)
    if values is None:
        return Matrix._tensor([int(n) for n in shape], coords, None, want or "float32")
    if not isinstance(values, np.ndarray):
        raise TypeError("values must be a numpy.ndarray of float32 or float64, not "
                        f"{type(values).__name__}")
    have = check_values_dtype(values.dtype, "values")
    if want is not None and want != have:
        raise DtypeError(f"values are {have} but dtype is {want}: pass "
                        f"values.astype(numpy.{want}), or leave dtype out")
    return Matrix._tensor([int(n) for n in shape], coords, values, have)


def load(path, dtype="float32"):
    """A Matrix Market file (.mtx, .mtx.gz) as a Matrix, or a FROSTT tensor (.tns, .tns.gz), its
    values read in dtype: float32 (default) or float64 (exactly as written, to double's
    precision; also "f32", "f64" as the CLI's --dtype)."""
    return Matrix._from_file(path, dtype_name(dtype))


def _options(**kw):
    """The keyword arguments as waco::Options fields (None: the library's default)."""
    return {key: value for key, value in kw.items() if value is not None}


# The rest of `waco-hybrid tune`'s settings, as keyword arguments of tune (waco::Options' last
# group): the CLI option of the same name with underscores for dashes; None or absent: the CLI's
# default. Paths (model, index, schedules) may be str or os.PathLike.
TUNE_SETTINGS = (
    "model", "index", "check_recall", "explain", "schedules", "measure_first", "repeat", "warmup",
    "confirm_rounds", "decide_runs", "decide_extra_runs", "layouts", "per_structure", "decide_rounds",
    "decide_leaders", "decide_always", "decide_together", "halving_keep", "decide_drop",
    "decide_clear", "min_gain", "verdict_level", "max_disturbed", "timeout", "compile_timeout", "tolerance", "abandon_factor", "retry_failed",
    "compiler", "max_padding", "race", "tile_window", "max_block_padding", "min_chunks_per_thread",
    "chunk_window", "max_serial_work", "cache_level", "cache_bytes", "cache_fraction",
    "no_calibration", "side_by_side_memory")


def tune(A, kernel="spmv", *, threads=0, expected_calls=None, dense=None, search="model",
         budget=0, budget_seconds=0.0, cache_dir=None, use_cache=True, refresh=False,
         kernel_cache_dir=None, passes="all", confirm=None, seed=1, results_db=None,
         tuning_share=0.1, progress=None, verbose=False, adaptive=None, nominees=5,
         check_in_process=True, **settings):
    """Tunes kernel ("spmv", "spmm", "sddmm", "mttkrp") for A and returns the Plan.

    A: a SciPy sparse matrix or array of float32 or float64 (converted to waco-hybrid's CSR:
    without a copy on the Python side when it is canonical CSR with int32 indices, else once
    through its coordinates), or a Matrix (waco_hybrid.matrix, tensor, load; a tensor for
    mttkrp). The plan computes in A's dtype (plan.dtype, "float32" or "float64"): its calls take
    arrays of that dtype and return results in it; the other dtype is a DtypeError.
    By default the plan is adaptive (below). A measured tune (adaptive=False, or a setting only
    it has: a search other than "model" or "anns", budget, budget_seconds, confirm, results_db,
    schedules, measure_first, explain, check_recall) takes its decision from the tuning cache
    (cache_dir; default ~/.cache/waco-hybrid/plans, shared with `waco-hybrid tune`) when it holds
    one for this matrix, kernel, dense size, threads and machine; else the tune pipeline runs in
    this process (candidates measured in isolated worker processes), with the GIL released.

    threads: of the kernel (0: every core). expected_calls: the calls you will make; tuning then
    takes at most tuning_share of their csr time, and returns csr (verdict "not-worth-it") when it
    cannot pay for itself. dense: n of spmm/mttkrp, k of sddmm to tune for. search: "model",
    "anns", "random", "exhaustive"; budget: candidates (0: the search's default). confirm: -1 or
    None the search's default. results_db: an SQLite results database to keep measurements in.
    progress: a callable receiving each line of what tuning does (else verbose prints them).
    adaptive (None: True unless a measured tune's setting is given): return at once with a plan
    that serves csr, asks the tuning cache and tries the model's best `nominees` schedules on
    your own calls (each verified against csr first), settling on the fastest or csr;
    plan.verdict is "exploring" until then, plan.calls and plan.exploring_calls count.
    check_in_process (a measured tune's gain, or a cached one): the chosen kernel timed against
    csr in this process before tune returns (~25-60 ms, ~1 s at most for long calls);
    plan.speedup is this process's figure, and a gain that does not hold here serves csr
    ("no-gain"); the report's "in_process" says what it measured. False: the measuring
    processes' figure.

    settings: the rest of `waco-hybrid tune`'s options (TUNE_SETTINGS), each named as the CLI
    option with underscores (repeat=3, decide_runs=1, model="my.model", explain=True,
    compiler="clang++", schedules="list.txt", cache_bytes=4 << 20, ...; see `waco-hybrid tune
    --help`); unset: the CLI's default; out of the CLI's range: Error.

    Ctrl-C (SIGINT) stops the tune within about 0.1 s with KeyboardInterrupt: its processes
    ended, nothing half-stored, no decision cached (Python's signal handlers run while it tunes).
    """
    unknown = sorted(set(settings) - set(TUNE_SETTINGS))
    if unknown:
        raise TypeError(f"tune() got unknown keyword arguments {', '.join(unknown)} (settings: "
                        "waco_hybrid.TUNE_SETTINGS)")
    opts = _options(threads=threads, expected_calls=expected_calls, dense=dense, search=search,
                    budget=budget, budget_seconds=budget_seconds, cache_dir=cache_dir,
                    use_cache=use_cache, refresh=refresh, kernel_cache_dir=kernel_cache_dir,
                    passes=passes, confirm=confirm, seed=seed, results_db=results_db,
                    tuning_share=tuning_share, progress=progress, verbose=verbose,
                    adaptive=adaptive, nominees=nominees, check_in_process=check_in_process,
                    **_options(**settings))
    return _waco._tune(as_matrix(A), kernel, opts)


def make_plan(A, kernel="spmv", schedule="csr", *, threads=0, dense=None, kernel_cache_dir=None,
              compiler=None, max_padding=None, race=None):
    """A Plan of a given schedule, no tuning: "csr" (what every tune is measured against: the
    hand-written csr compiled into the library, plan.implementation "csr"; "csf" for mttkrp),
    another shortcut ("dcsr", "csc", "bcsr4x4") or a schedule's text form. compiler,
    max_padding, race: as tune's (`waco-hybrid run --compiler/--max-padding/--race`)."""
    opts = _options(threads=threads, dense=dense, kernel_cache_dir=kernel_cache_dir,
                    compiler=compiler, max_padding=max_padding, race=race)
    return _waco._make_plan(as_matrix(A), kernel, schedule, opts)


def load_plan(path, A, *, kernel_cache_dir=None, compiler=None, max_padding=None, race=None):
    """A plan saved by Plan.save for the same matrix (its fingerprint must match) on this
    machine: the format is built again and the kernel loaded. Same as Plan.load(path, A).
    compiler, max_padding, race: as the tune's that made it."""
    return _waco._load_plan(path, as_matrix(A),
                            _options(kernel_cache_dir=kernel_cache_dir, compiler=compiler,
                                     max_padding=max_padding, race=race))


Plan.load = staticmethod(load_plan)
