"""The research data as lists of dicts or NumPy structured arrays (no pandas): a results
database's measurements and ablation rows (`waco-hybrid tune --db`, `collect`, `ablate`), and the
committed dataset (data/dataset/<kernel>.jsonl.gz, the exports of `waco-hybrid dataset export`).

pandas users: pandas.DataFrame(waco_hybrid.results(db)) makes a table of them."""

import gzip
import json
import numbers
import os
import sqlite3

import numpy as np

from . import _waco

_KERNELS = ("spmv", "spmm", "sddmm", "mttkrp")
# Columns of the measurements table holding JSON text, and those holding 0/1 flags.
_JSON_COLUMNS = ("times_s", "context", "counters")
_BOOL_COLUMNS = ("verified", "cache_hit")


def _connect(db):
    path = os.fspath(db)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no results database (waco-hybrid tune/collect/ablate "
                                "--db FILE writes one)")
    # Read-only: a reader never migrates nor locks the file for the writers.
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    con.row_factory = sqlite3.Row
    return con


def _table_columns(con, table):
    return [r["name"] for r in con.execute(f"PRAGMA table_info({table})")]


def _column_type(values):
    """The dtype of a column of Python values (None: missing): bool (none missing), int64 (none
    missing, within its range), float64 (numbers, missing as NaN), else object (strings, lists,
    dicts, mixed; missing as None)."""
    kinds = set(map(type, values))
    missing = type(None) in kinds
    kinds.discard(type(None))
    if not kinds:
        return np.dtype(object)
    booleans = {k for k in kinds if issubclass(k, (bool, np.bool_))}
    if booleans:
        return np.dtype(bool) if booleans == kinds and not missing else np.dtype(object)
    if all(issubclass(k, numbers.Integral) for k in kinds) and not missing:
        if -2**63 <= min(values) and max(values) < 2**63:
            return np.dtype(np.int64)
        return np.dtype(object)  # beyond int64: kept exact
    if all(issubclass(k, numbers.Real) for k in kinds):
        return np.dtype(np.float64)
    return np.dtype(object)


def to_structured(rows, columns=None):
    """A list of dicts (as results() and dataset() give) as a NumPy structured array, one record
    a dict, one field a key (the keys in the order they first appear, or `columns`).

    Field dtypes follow the values: bool; int64 for integers; float64 for numbers (integers with
    a value missing, and floats), a missing value NaN; object for everything else (strings, the
    parsed JSON columns such as times_s and context, mixed columns), a missing value None. A key
    a dict lacks is a missing value. Select with arr["status"] == "ok", arr["median_s"][mask],
    numpy.unique(arr["fingerprint"]); pandas.DataFrame(arr) makes a table of it."""
    rows = list(rows)
    if columns is None:
        seen = {}
        for r in rows:
            for k in r:
                seen.setdefault(k, None)
        columns = list(seen)
    columns = [str(c) for c in columns]
    if len(set(columns)) != len(columns):
        raise ValueError("to_structured: a column is named twice")
    data = {c: [r.get(c) for r in rows] for c in columns}
    types = [(c, _column_type(data[c])) for c in columns]
    out = np.empty(len(rows), dtype=types)
    for c, t in types:
        values = data[c]
        if t == object:
            out[c] = np.fromiter(values, dtype=object, count=len(values))
        elif t == np.float64:
            out[c] = np.array(values, dtype=np.float64)  # None: NaN
        else:
            out[c] = np.array(values, dtype=t)
    return out


def _measurements(con):
    own = [c for c in _table_columns(con, "measurements") if c not in ("matrix_id", "schedule_id")]
    query = ("SELECT x.fingerprint, x.path AS matrix, x.rows, x.cols, x.nnz, s.text AS schedule, "
             + ", ".join("m." + c for c in own)
             + " FROM measurements m JOIN matrices x ON x.id = m.matrix_id"
             " LEFT JOIN schedules s ON s.id = m.schedule_id ORDER BY m.id")
    out = []
    for r in con.execute(query):
        d = dict(r)
        for c in _JSON_COLUMNS:
            if d.get(c) is not None:
                d[c] = json.loads(d[c])
        for c in _BOOL_COLUMNS:
            if c in d:
                d[c] = bool(d[c])
        out.append(d)
    return out


def _ablation(con):
    if "ablation" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}:
        return []  # a database older than schema version 5 has no ablation table
    out = []
    query = ("SELECT x.fingerprint, x.path AS matrix, a.kernel, a.dense, a.threads, a.config, "
             "a.row, a.created FROM ablation a JOIN matrices x ON x.id = a.matrix_id ORDER BY a.id")
    for r in con.execute(query):
        row = json.loads(r["row"])
        d = dict(row)  # the row as `waco-hybrid ablate` stored it, with the table's keys
        d.update({k: r[k] for k in ("fingerprint", "matrix", "kernel", "dense", "threads",
                                    "config", "created")})
        out.append(d)
    return out


def _measurement_columns(con):
    """The keys of results()'s measurement dicts, for an array of no rows."""
    own = [c for c in _table_columns(con, "measurements") if c not in ("matrix_id", "schedule_id")]
    return ["fingerprint", "matrix", "rows", "cols", "nnz", "schedule"] + own


def results(db, table="measurements", as_array=False):
    """The rows of a results database (SQLite, as `waco-hybrid tune --db`, `collect --db` and
    `ablate --db` write it) as a list of dicts, oldest first; as_array=True: as a NumPy
    structured array of the same fields (to_structured: numbers float64/int64 with NaN for a
    missing number, strings and JSON values as objects with None).

    table="measurements": one dict a measurement, with the matrix (fingerprint, matrix path, rows,
    cols, nnz) and the schedule's text form (None for a library baseline: see implementation)
    beside every column of the table (median_s, min_s, max_s, times_s as a list, status, reason,
    verified, context as a dict, ...).
    table="ablation": one dict an `ablate` outcome (matrix, configuration), the stored JSON row
    (winner, verdict, claimed_speedup, delivered speedups, ...) with fingerprint and created."""
    readers = {"measurements": _measurements, "ablation": _ablation}
    if table not in readers:
        raise ValueError(f"unknown table '{table}': measurements or ablation")
    con = _connect(db)
    try:
        rows = readers[table](con)
        if not as_array:
            return rows
        # The measurements' fields are known without rows; an ablation row's are its JSON's.
        columns = _measurement_columns(con) if table == "measurements" and not rows else None
        return to_structured(rows, columns)
    except sqlite3.DatabaseError as e:
        raise _waco.Error(f"{os.fspath(db)}: not a readable results database ({e})") from e
    finally:
        con.close()


def dataset_path(kernel):
    """The committed dataset export of a kernel (share/waco-hybrid/dataset when installed)."""
    if kernel not in _KERNELS:
        raise ValueError(f"unknown kernel '{kernel}': spmv, spmm, sddmm or mttkrp")
    return os.path.join(_waco._dataset_dir(), kernel + ".jsonl.gz")


def dataset(kernel, groups=False, as_array=False):
    """The committed training dataset of a kernel (data/dataset/<kernel>.jsonl.gz) as a list of
    dicts, or with as_array=True a NumPy structured array of the same fields (to_structured).

    Default: one dict a measured schedule, flat: the matrix (fingerprint, matrix path, rows,
    cols, nnz, source, split), the group (kernel, dense, threads, rounds), the schedule's text
    (or "impl=NAME" for a library baseline), status, median_s, min_s, max_s.
    groups=True: one dict a measurement group (a matrix timed side by side), as exported: its
    "rows" are [schedule, status, median_s, min_s, max_s] lists."""
    path = dataset_path(kernel)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no committed dataset for {kernel}")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                g = json.loads(line)
            except json.JSONDecodeError as e:
                raise _waco.Error(f"{path}:{lineno}: not JSON: {e}") from e
            if groups:
                out.append(g)
                continue
            m = g["matrix"]
            base = {"fingerprint": m["fingerprint"], "matrix": m["path"], "rows": m["rows"],
                    "cols": m["cols"], "nnz": m["nnz"], "source": g.get("source"),
                    "split": g.get("split"), "kernel": g["kernel"], "dense": g["dense"],
                    "threads": g["threads"], "rounds": g["rounds"]}
            for schedule, status, median_s, min_s, max_s in g["rows"]:
                d = dict(base)
                d.update(schedule=schedule, status=status, median_s=median_s, min_s=min_s,
                         max_s=max_s)
                out.append(d)
    return to_structured(out) if as_array else out
