"""Ctrl-C during waco_hybrid.tune: SIGINT to a Python process that tunes ends the tune within a
second or so with KeyboardInterrupt, its measuring processes (worker, measuring child, compiler)
killed, nothing half-stored (the results database holds whole rows, no decision is cached), and
the same call again completes. Also: a signal handler of the program's own runs while tuning and
what it raises stops the tune; a KeyboardInterrupt out of the progress callback stops it too."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import waco_hybrid

# The csr schedule's chunk=auto decides serial or parallel by timing both loops on the matrix
# (kernels/baseline_loops.hpp); with the other core busy (a test beside this one) a tune may
# decide serial and its rerun parallel, which stores the csr schedule's timing under another row
# (threads 1 and 2) instead of reusing it. Pinned for this process and the tunes it starts, as
# tests/test_faults.cpp pins it.
os.environ["WACO_CSR_SERIAL_NNZ"] = "3072"

# The tuning process: a subreaper (PR_SET_CHILD_SUBREAPER), so that the processes under the
# measurement worker, orphaned when it is killed, become its children instead of init's and a
# process left running shows among them. It says "searching" once the measurements start, and
# prints one JSON line: how the tune ended, when, and its live children after it.
TUNE_SCRIPT = textwrap.dedent("""
    import ctypes, json, os, sys, time
    import numpy as np, scipy.sparse as sp, waco_hybrid
    assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER

    def children():
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        out = []
        for task in os.listdir("/proc/self/task"):
            for pid in open(f"/proc/self/task/{task}/children").read().split():
                try:
                    cmd = open(f"/proc/{pid}/cmdline").read().replace("\\0", " ")
                except OSError:
                    continue
                out.append(f"{pid} {cmd}")
        return out

    work, search, n, nnz, budget = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    rng = np.random.default_rng(7)
    A = sp.csr_matrix((rng.random(nnz, dtype=np.float32) * 2 - 1,
                       (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    searching = []

    def progress(line):
        if not searching and ("side by side" in line or " candidates, " in line):
            searching.append(time.time())
            print("searching", flush=True)

    try:
        plan = waco_hybrid.tune(A, "spmv", threads=2, search=search, budget=budget,
                                cache_dir=work + "/plans", kernel_cache_dir=work + "/kernels",
                                results_db=work + "/results.sqlite", progress=progress)
        print(json.dumps({"outcome": "done", "verdict": plan.verdict}), flush=True)
    except KeyboardInterrupt:
        at = time.time()
        until = at + 1.0
        left = children()
        while left and time.time() < until:
            time.sleep(0.05)
            left = children()
        print(json.dumps({"outcome": "KeyboardInterrupt", "at": at, "left": left}), flush=True)
    """)


def ctrl_c(work, search, n, nnz, budget, delay=0.5):
    """Runs TUNE_SCRIPT, sends SIGINT `delay` s after its measurements began; returns the JSON it
    printed and the time of the signal."""
    work.mkdir(exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", TUNE_SCRIPT, str(work), search, str(n), str(nnz),
                          str(budget)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line == "searching\n", line + p.stderr.read()
        time.sleep(delay)
        sent = time.time()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    return json.loads(out.splitlines()[-1]), sent


def check_nothing_left(result, sent):
    assert result["outcome"] == "KeyboardInterrupt", result
    took = result["at"] - sent
    print(f"KeyboardInterrupt {took:.3f} s after SIGINT")
    assert took < 2.0, f"KeyboardInterrupt came {took:.2f} s after SIGINT"
    assert result["left"] == [], result["left"]


def no_decision(work):
    plans = work / "plans"
    return not plans.exists() or not any(plans.iterdir())


def whole_rows(db):
    """The measurement rows, each checked to be whole (as record_measurement writes them)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = con.execute("SELECT id, status, median_s, repeats, times_s FROM measurements"
                           ).fetchall()
    finally:
        con.close()
    for _, status, median_s, repeats, times_s in rows:
        times = json.loads(times_s)
        if status == "ok":
            assert median_s > 0 and len(times) == repeats, (status, times)
    return set(rows)


def test_ctrl_c_stops_a_model_search_in_its_side_by_side_run(tmp_path):
    """The default search: the model's best 20 measured side by side in one child (seconds on a
    matrix of 1M nonzeros); SIGINT 0.5 s into it."""
    result, sent = ctrl_c(tmp_path / "model", "model", 100_000, 1_000_000, 0)
    check_nothing_left(result, sent)
    assert no_decision(tmp_path / "model")


def test_ctrl_c_stops_a_random_search_and_a_rerun_completes(tmp_path):
    """A search that measures its candidates one by one into the results database (cold kernel
    cache: compiles run): SIGINT 0.5 s in; the rows kept are whole, and the same tune again
    completes, reusing them."""
    work = tmp_path / "random"
    result, sent = ctrl_c(work, "random", 20_000, 200_000, 30)
    check_nothing_left(result, sent)
    assert no_decision(work)
    kept = whole_rows(work / "results.sqlite")
    assert len(kept) < 30, "the search was not interrupted"

    rng = np.random.default_rng(7)
    n, nnz = 20_000, 200_000
    A = sp.csr_matrix((rng.random(nnz, dtype=np.float32) * 2 - 1,
                       (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    # A handler of the program's own that does not raise: it runs while the tune goes on (not
    # only after it), and the tune completes.
    ticks = []
    old = signal.signal(signal.SIGALRM, lambda *_: ticks.append(time.time()))
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
    try:
        plan = waco_hybrid.tune(A, "spmv", threads=2, search="random", budget=30,
                                cache_dir=work / "plans", kernel_cache_dir=work / "kernels",
                                results_db=work / "results.sqlite")
        ended = time.time()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert plan.verdict in ("gain", "no-gain", "undecided")
    assert plan.report["complete"] is True
    assert plan.report["reused"] + plan.report["measured"] == 30
    assert not no_decision(work)
    after = whole_rows(work / "results.sqlite")
    assert kept <= after and len(after) >= 30  # the rows kept were reused, not measured again
    assert ticks and ticks[0] < ended - 0.5, "the handler did not run while tuning"


class Stop(Exception):
    pass


def test_an_exception_of_a_signal_handler_stops_the_tune(scratch):
    """A SIGALRM handler that raises: the tune stops within about a second with that exception."""
    rng = np.random.default_rng(8)
    n, nnz = 20_000, 200_000
    A = sp.csr_matrix((rng.random(nnz, dtype=np.float32),
                       (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    fired = []

    def handler(*_):
        fired.append(time.time())
        raise Stop("alarm")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(Stop):
            waco_hybrid.tune(A, "spmv", threads=2, search="random", budget=40,
                             cache_dir=scratch / "plans", kernel_cache_dir=scratch / "kernels")
        stopped = time.time()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert fired and stopped - fired[0] < 1.5, stopped - fired[0]
    assert not (scratch / "plans").exists() or not any((scratch / "plans").iterdir())


def test_keyboard_interrupt_in_the_progress_callback_stops_the_tune(scratch):
    """Python runs its signal handlers in whatever Python code runs: a KeyboardInterrupt raised
    in the progress callback stops the tune (it is not reported as unraisable and lost); an
    ordinary exception there is reported as unraisable and tuning goes on."""
    rng = np.random.default_rng(9)
    A = sp.random(3000, 3000, density=0.002, format="csr", dtype=np.float32, random_state=rng)
    lines = []

    def interrupted(line):
        lines.append(line)
        raise KeyboardInterrupt

    t0 = time.time()
    with pytest.raises(KeyboardInterrupt):
        waco_hybrid.tune(A, "spmv", threads=2, search="random", budget=40,
                         cache_dir=scratch / "plans", kernel_cache_dir=scratch / "kernels",
                         progress=interrupted)
    assert len(lines) == 1 and time.time() - t0 < 10
    assert not (scratch / "plans").exists() or not any((scratch / "plans").iterdir())

    unraisable = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(u.exc_type)

    def failing(line):
        raise ValueError(line)

    try:
        plan = waco_hybrid.tune(A, "spmv", threads=2, search="random", budget=2,
                                cache_dir=scratch / "plans", kernel_cache_dir=scratch / "kernels",
                                progress=failing)
    finally:
        sys.unraisablehook = old
    assert plan.verdict in ("gain", "no-gain", "undecided")
    assert unraisable and set(unraisable) == {ValueError}


def test_ctrl_c_to_python_m_waco_hybrid_tune(tmp_path):
    """`python3 -m waco_hybrid tune` as `waco-hybrid tune` after Ctrl-C: one line saying so,
    status 1, within a second or so of the signal."""
    rng = np.random.default_rng(10)
    n, nnz = 20_000, 200_000
    A = sp.coo_matrix((rng.random(nnz, dtype=np.float32),
                       (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    path = tmp_path / "A.mtx"
    scipy.io.mmwrite(str(path), A)
    p = subprocess.Popen([sys.executable, "-m", "waco_hybrid", "tune", "--search", "random",
                          "--budget", "30", "--threads", "2", "--plan-cache", str(tmp_path / "plans"),
                          "--cache-dir", str(tmp_path / "kernels"), "--db",
                          str(tmp_path / "r.sqlite"), str(path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            if " candidates, " in line:
                break
        time.sleep(0.5)
        sent = time.time()
        p.send_signal(signal.SIGINT)
        rest = p.stderr.read()
        p.wait(timeout=30)
        took = time.time() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1, rest
    assert "tune: interrupted; run the same command again" in rest and "r.sqlite" in rest, rest
    assert "Traceback" not in rest, rest
    assert took < 2.0, took
    assert no_decision(tmp_path)
