"""The research data as lists of dicts (no pandas): a results database's measurements and
ablation rows (`waco-hybrid tune --db`, `collect`, `ablate`), and the committed dataset
(data/dataset/<kernel>.jsonl.gz, the exports of `waco-hybrid dataset export`).

pandas users: pandas.DataFrame(waco_hybrid.results(db)) makes a table of them."""

import gzip
import json
import os
import sqlite3

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


def results(db, table="measurements"):
    """The rows of a results database (SQLite, as `waco-hybrid tune --db`, `collect --db` and
    `ablate --db` write it) as a list of dicts, oldest first.

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
        return readers[table](con)
    except sqlite3.DatabaseError as e:
        raise _waco.Error(f"{os.fspath(db)}: not a readable results database ({e})") from e
    finally:
        con.close()


def dataset_path(kernel):
    """The committed dataset export of a kernel (share/waco-hybrid/dataset when installed)."""
    if kernel not in _KERNELS:
        raise ValueError(f"unknown kernel '{kernel}': spmv, spmm, sddmm or mttkrp")
    return os.path.join(_waco._dataset_dir(), kernel + ".jsonl.gz")


def dataset(kernel, groups=False):
    """The committed training dataset of a kernel (data/dataset/<kernel>.jsonl.gz) as a list of
    dicts.

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
    return out
