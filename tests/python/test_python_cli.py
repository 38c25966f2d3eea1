"""What the waco-hybrid CLI wrote, read from Python: results(db) on databases of `tune --db` and
`ablate --db`, dataset(kernel) on the committed exports, as lists of dicts and as NumPy
structured arrays (to_structured), and `python3 -m waco_hybrid tune` against `waco-hybrid tune
--json` on the same tuning cache, in float32 and with --dtype f64."""

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

import waco_hybrid
from conftest import EXAMPLE, SOURCE_DIR

CLI = os.environ.get("WACO_HYBRID", "waco-hybrid")


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{args}: {r.returncode}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def cli_tune(work):
    """`waco-hybrid tune --json` on the example: a small random search, a results database, a
    tuning cache of its own."""
    r = run([CLI, "tune", "--kernel", "spmv", "--search", "random", "--budget", "2", "--db",
             str(work / "tune.sqlite"), "--plan-cache", str(work / "plans"), "--threads", "2",
             "--json", "-q", str(EXAMPLE)])
    return json.loads(r.stdout)


def test_module_tune_agrees_with_the_cli_from_the_tuning_cache(cli_tune, work):
    module = [sys.executable, "-m", "waco_hybrid", "tune", "--kernel", "spmv", "--plan-cache",
              str(work / "plans"), "--threads", "2", str(EXAMPLE)]
    text = run(module).stdout
    assert "from the tuning cache" in text, text  # the CLI's decision, not a tune of its own
    assert f"verdict:   {cli_tune['verdict']}" in text
    assert f"schedule:  {cli_tune['best']['schedule']}" in text
    assert cli_tune["dtype"] == "f32"
    mine = json.loads(run(module + ["--json"]).stdout)
    for key in ("verdict", "speedup_over_csr", "kernel", "fingerprint", "threads", "nnz", "dtype"):
        assert mine[key] == cli_tune[key], key
    assert mine["best"]["schedule"] == cli_tune["best"]["schedule"]
    bad = subprocess.run([sys.executable, "-m", "waco_hybrid", "tune", str(work / "missing.mtx")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: "), bad.stderr


def test_module_tune_dtype_f64_agrees_with_the_cli(cli_tune, work):
    """`--dtype f64` on both sides: the CLI's double-precision decision (an entry of its own
    beside the float32 one) is what the module reads, and both reports say "dtype": "f64"."""
    plans = str(work / "plans")
    module = [sys.executable, "-m", "waco_hybrid", "tune", "--kernel", "spmv", "--plan-cache",
              plans, "--threads", "2", "--dtype", "f64", str(EXAMPLE)]
    cli = json.loads(run([CLI, "tune", "--kernel", "spmv", "--search", "random", "--budget", "2",
                          "--plan-cache", plans, "--threads", "2", "--dtype", "f64", "--json",
                          "-q", str(EXAMPLE)]).stdout)
    assert cli["dtype"] == "f64"
    text = run(module).stdout
    assert "from the tuning cache" in text, text
    assert ", float64)" in text, text
    mine = json.loads(run(module + ["--json"]).stdout)
    assert mine["dtype"] == "f64"
    for key in ("verdict", "speedup_over_csr", "kernel", "fingerprint", "threads", "nnz"):
        assert mine[key] == cli[key], key
    assert mine["best"]["schedule"] == cli["best"]["schedule"]
    single = json.loads(run(module[:-3] + ["--json", str(EXAMPLE)]).stdout)  # no --dtype
    assert single["dtype"] == "f32" and single["fingerprint"] == mine["fingerprint"]
    bad = subprocess.run(module[:-3] + ["--dtype", "f16", str(EXAMPLE)], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "f32 or f64" in bad.stderr, bad.stderr


DRIVER = r"""
#include <cstdio>
#include <vector>
#include "tuned.hpp"
int main() {
  const std::vector<int> rowptr = {%(indptr)s}, colind = {%(indices)s};
  const std::vector<waco_tuned::waco_value_t> values = {%(data)s}, x = {%(x)s};
  std::vector<waco_tuned::waco_value_t> y(%(rows)d, 123);
  waco_tuned::Format f = waco_tuned::build(%(rows)d, %(cols)d, rowptr.data(), colind.data(),
                                           values.data());
  waco_tuned::spmv(f, x.data(), y.data());
  for (auto v : y) std::printf("%%.17g\n", static_cast<double>(v));
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_module_tune_writes_the_cli_drop_in_header(cli_tune, work, tmp_path, dtype):
    """`python3 -m waco_hybrid tune -o` (Plan.standalone_header, waco::Plan::standalone_header)
    writes the header `waco-hybrid tune -o` writes for the same decision (the tuning cache's),
    all but the leading comment; it compiles without waco-hybrid and its SpMV equals SciPy's."""
    import scipy.sparse as sp
    from conftest import random_csr, vector
    plans = str(work / "plans")
    mine, theirs = tmp_path / "tuned.hpp", tmp_path / "cli.hpp"
    common = ["--plan-cache", plans, "--threads", "2", "--dtype", dtype, "-q"]
    run([CLI, "tune", "--kernel", "spmv", "--search", "random", "--budget", "2", "-o",
         str(theirs)] + common + [str(EXAMPLE)])
    run([sys.executable, "-m", "waco_hybrid", "tune", "-o", str(mine)] + common + [str(EXAMPLE)])
    text = mine.read_text()
    assert text.startswith("// waco-hybrid drop-in kernel: spmv in "
                           + ("double" if dtype == "f64" else "float"))
    assert "tuned by waco::tune for spmv" in text
    body = text[text.index("#pragma once"):]
    assert body == theirs.read_text()[theirs.read_text().index("#pragma once"):]
    # The header on a matrix of its own, with empty rows: compiled, run, against SciPy.
    npdt = np.float64 if dtype == "f64" else np.float32
    A = random_csr(45, 38, 0.2, 21, empty_rows=(0, 30), dtype=npdt)
    x = vector(38, 22, npdt)
    join = lambda a: ", ".join(repr(float(v)) if a.dtype.kind == "f" else str(int(v)) for v in a)
    (tmp_path / "driver.cpp").write_text(DRIVER % dict(
        indptr=join(A.indptr), indices=join(A.indices), data=join(A.data), x=join(x),
        rows=A.shape[0], cols=A.shape[1]))
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    run([compiler, "-std=c++17", "-O1", "-fopenmp", "-I", str(tmp_path), "-o",
         str(tmp_path / "driver"), str(tmp_path / "driver.cpp")])
    y = np.array([float(v) for v in run([str(tmp_path / "driver")]).stdout.split()])
    want = A @ x
    tol = 1e-12 if dtype == "f64" else 1e-5
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * np.abs(want).max())
    plan = waco_hybrid.make_plan(A, "spmv", "bcsr4x4")
    assert "namespace mine {" in plan.standalone_header("mine")
    assert "a plan of a given schedule (waco::make_plan)" in plan.standalone_header()
    with pytest.raises(waco_hybrid.Error, match="not a C\\+\\+ identifier"):
        plan.standalone_header("2fast")


def test_module_tune_adaptive_answers_as_the_cli(tmp_path):
    """`--adaptive --expected-calls 10`: both run the library's adaptive plan on 10 calls of
    their own, and both settle on csr as not-worth-it (10% of 10 calls pays for no choice); the
    report is the plan's with the same "drive" keys."""
    common = ["--kernel", "spmv", "--adaptive", "--expected-calls", "10", "--threads", "2",
              "--plan-cache", str(tmp_path / "plans"), "--json", "-q", str(EXAMPLE)]
    cli = json.loads(run([CLI, "tune"] + common).stdout)
    mine = json.loads(run([sys.executable, "-m", "waco_hybrid", "tune"] + common).stdout)
    for r in (cli, mine):
        assert r["mode"] == "adaptive" and r["verdict"] == "not-worth-it", r
        assert r["implementation"] == "csr"
        assert r["drive"]["calls"] == 10 and r["drive"]["settled"] is True
    for key in ("verdict", "kernel", "fingerprint", "threads", "nnz", "dtype", "schedule"):
        assert mine[key] == cli[key], key
    assert set(mine["drive"]) == set(cli["drive"])
    bad = subprocess.run([sys.executable, "-m", "waco_hybrid", "tune", "--calls", "5",
                          str(EXAMPLE)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--calls needs --adaptive" in bad.stderr, bad.stderr


def long_options(help_text):
    """The long options (--name) a --help text lists at the start of its option lines."""
    names = set()
    for line in help_text.splitlines():
        for word in line.strip().replace(",", " ").split():
            if not word.startswith("-"):
                break
            if word.startswith("--"):
                names.add(word.split("=")[0].split(":")[0])
    return names


def test_module_tune_has_every_option_of_the_cli_tune():
    """Every option of `waco-hybrid tune --help` is an option of `python3 -m waco_hybrid tune`,
    but those the library cannot express (CLI_ONLY, each with its reason, in the module's --help);
    CLI_ONLY names only options the CLI has."""
    from waco_hybrid.__main__ import CLI_ONLY
    cli = long_options(run([CLI, "tune", "--help"]).stdout)
    module_help = run([sys.executable, "-m", "waco_hybrid", "tune", "--help"]).stdout
    module = long_options(module_help)
    assert {"--repeat", "--decide-runs", "--schedules", "--model", "--compiler"} <= cli
    missing = cli - module - set(CLI_ONLY) - {"--help"}
    assert not missing, f"options of waco-hybrid tune missing from python -m waco_hybrid tune: {missing}"
    assert set(CLI_ONLY) <= cli, set(CLI_ONLY) - cli
    for flag in CLI_ONLY:
        assert flag not in module, flag
        assert flag in " ".join(module_help.split()), flag  # its reason is in the --help
    assert set(waco_hybrid.TUNE_SETTINGS) <= {o[2:].replace("-", "_") for o in module}


SETTINGS = ["--search", "random", "--budget", "2", "--threads", "2", "--repeat", "3", "--warmup",
            "1", "--confirm-rounds", "4", "--decide-always", "--decide-runs", "1",
            "--decide-rounds", "2", "--decide-leaders", "1", "--min-gain", "0.05",
            "--verdict-level", "0.8", "--max-disturbed", "0.5", "--abandon-factor", "0",
            "--tolerance", "1e-3", "--timeout", "30", "--compile-timeout", "100", "--compiler",
            "c++", "--max-padding", "10", "--race", "atomic", "--explain", "--tile-window", "1",
            "--max-block-padding", "3", "--min-chunks-per-thread", "2", "--chunk-window", "1",
            "--max-serial-work", "100", "--cache-level", "l2", "--cache-fraction", "0.25",
            "--json", "-q"]


def test_module_tune_takes_the_cli_settings(work):
    """The same settings to `waco-hybrid tune` and to `python3 -m waco_hybrid tune`: both
    reports echo them alike (rounds, runs, the verdict rule, racing, the passes' parameters, the
    tile model's cache), the measurements are stored with them, and --save writes a plan that
    loads."""
    def tune(program, name):
        where = ["--db", str(work / f"{name}.sqlite"), "--plan-cache", str(work / f"{name}-plans")]
        return json.loads(run(program + SETTINGS + where + [str(EXAMPLE)]).stdout)

    saved = work / "settings.plan"
    mine = tune([sys.executable, "-m", "waco_hybrid", "tune", "--save", str(saved)], "module")
    cli = tune([CLI, "tune", "--kernel", "spmv"], "cli")
    for report in (mine, cli):
        assert report["warmup"] == 1 and report["repeats"] == 3
        assert report["confirm"]["rounds"] == 4 and report["confirm"]["warmup"] == 1
        assert report["decision"]["fresh"] is True  # --decide-always
        detail = report["verdict_detail"]
        assert detail["level"] == 0.8 and detail["min_gain"] == 0.05
        assert detail["runs"] == 1 and detail["rounds"] == 2
        assert report["abandon_factor"] == 0
        assert report["explain"] is not None
        assert report["cache"]["fraction"] == 0.25 and report["cache"]["level"] == "L2"
    assert mine["pass_params"] == cli["pass_params"]
    assert mine["pass_params"]["tile_window"] == 1 and mine["pass_params"]["max_serial_work"] == 100
    assert mine["space"]["admissible_count"] == cli["space"]["admissible_count"]
    rows = waco_hybrid.results(work / "module.sqlite", as_array=True)
    assert len(rows) and set(rows["repeats"]) == {3} and set(rows["warmup"]) == {1}
    plan = waco_hybrid.load_plan(saved, waco_hybrid.load(EXAMPLE), race="atomic")
    assert plan.implementation == ("generated" if mine["implementation"] == "generated" else "csr")
    # The hand-written csr serves with the csr schedule's format (the report names it impl=csr).
    assert plan.schedule == mine["best" if plan.implementation == "generated" else "csr"]["schedule"]


def test_module_tune_model_and_schedules_list(work):
    """--model names the cost model the search used; --schedules measures a list, which is no
    decision: nothing is cached, and the same call measures it again."""
    model = SOURCE_DIR / "data" / "models" / "spmv.model"
    base = [sys.executable, "-m", "waco_hybrid", "tune", "--threads", "2", "--json", "-q",
            "--no-plan-cache", "--repeat", "3", "--confirm-rounds", "4", "--decide-rounds", "4"]
    r = json.loads(run(base + ["--model", str(model), "--budget", "2", str(EXAMPLE)]).stdout)
    assert r["search"] == "model" and r["search_info"]["model"] == str(model)
    listing = work / "list.txt"
    listing.write_text("# two schedules\ncsr\norder=i,k format=UC parallel=i threads=2 chunk=64\n")
    plans = work / "list-plans"
    with_list = [sys.executable, "-m", "waco_hybrid", "tune", "--threads", "2", "--json", "-q",
                 "--plan-cache", str(plans), "--schedules", str(listing), "--repeat", "3",
                 "--confirm-rounds", "4", "--decide-rounds", "4", str(EXAMPLE)]
    for _ in range(2):
        r = json.loads(run(with_list).stdout)
        assert r["search"] == "list" and r["candidates"] == 2 and r["from_cache"] is False
    assert not plans.exists() or not any(plans.iterdir())


def test_settings_out_of_range_are_errors():
    A = waco_hybrid.load(EXAMPLE)
    for bad, words in ((dict(repeat=0), "repeat = 0 is out of range"),
                       (dict(verdict_level=1.0), "verdict_level"),
                       (dict(abandon_factor=0.5), r"0 \(off\) or at least 1"),
                       (dict(timeout=0.0), "timeout must be positive"),
                       (dict(cache_level="l4"), "not a cache level"),
                       (dict(race="bogus"), "not a strategy")):
        with pytest.raises(waco_hybrid.Error, match=words):
            waco_hybrid.tune(A, "spmv", use_cache=False, **bad)
    with pytest.raises(TypeError, match="TUNE_SETTINGS"):
        waco_hybrid.tune(A, "spmv", use_cache=False, repeats=3)
    with pytest.raises(waco_hybrid.Error, match="padding bound of 1"):
        waco_hybrid.make_plan(A, "spmv", "bcsr4x4", max_padding=1.0)
    with pytest.raises(waco_hybrid.Error, match="no-such-compiler"):
        waco_hybrid.make_plan(A, "spmv", "dcsr", compiler="no-such-compiler")
    bad = subprocess.run([sys.executable, "-m", "waco_hybrid", "tune", "--race", "fast",
                          str(EXAMPLE)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--race" in bad.stderr


def test_results_reads_the_measurements_of_a_cli_tune(cli_tune, work):
    rows = waco_hybrid.results(work / "tune.sqlite")
    assert rows, "no measurement rows"
    fingerprint = waco_hybrid.load(EXAMPLE).fingerprint
    for r in rows:
        assert r["fingerprint"] == fingerprint and r["kernel"] == "spmv"
        assert r["rows"] == 2003 and r["nnz"] == 83883
        assert isinstance(r["times_s"], list) and isinstance(r["context"], dict)
        assert r["status"] in ("ok", "abandoned") and isinstance(r["verified"], bool)
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(r["median_s"] > 0 for r in ok)
    assert {r["schedule"] for r in rows if r["schedule"]}, "no schedule text"
    assert waco_hybrid.results(work / "tune.sqlite", "ablation") == []
    with pytest.raises(ValueError, match="unknown table"):
        waco_hybrid.results(work / "tune.sqlite", "nope")
    with pytest.raises(FileNotFoundError):
        waco_hybrid.results(work / "missing.sqlite")


def test_results_as_a_structured_array(cli_tune, work):
    rows = waco_hybrid.results(work / "tune.sqlite")
    arr = waco_hybrid.results(work / "tune.sqlite", as_array=True)
    assert isinstance(arr, np.ndarray) and arr.dtype.names is not None
    assert len(arr) == len(rows) and list(arr.dtype.names) == list(rows[0])
    kinds = {name: arr.dtype[name] for name in arr.dtype.names}
    for name in ("median_s", "min_s", "max_s", "conversion_s", "wall_s"):
        assert kinds[name] == np.float64, name
    for name in ("rows", "cols", "nnz", "repeats", "warmup", "threads", "id"):
        assert kinds[name] == np.int64, name
    assert kinds["verified"] == np.bool_ and kinds["cache_hit"] == np.bool_
    for name in ("fingerprint", "status", "kernel", "schedule", "times_s", "context"):
        assert kinds[name] == object, name
    for r, a in zip(rows, arr):
        assert a["fingerprint"] == r["fingerprint"] and a["status"] == r["status"]
        assert a["times_s"] == r["times_s"] and a["context"] == r["context"]
        for name in ("median_s", "max_rel_error", "compile_s"):
            if r[name] is None:
                assert math.isnan(a[name]), name
            else:
                assert a[name] == r[name], name
        assert (a["schedule"] is None) == (r["schedule"] is None)  # a baseline has none
    ok = arr["status"] == "ok"
    assert ok.any() and (arr["median_s"][ok] > 0).all()
    # Ablation rows have the fields of their JSON: none in a tune's database, an empty array.
    assert len(waco_hybrid.results(work / "tune.sqlite", "ablation", as_array=True)) == 0
    # A database without measurements: no rows, but the fields are the table's.
    empty = work / "empty.sqlite"
    shutil.copy(work / "tune.sqlite", empty)
    con = sqlite3.connect(empty)
    con.execute("DELETE FROM measurements")
    con.commit()
    con.close()
    none = waco_hybrid.results(empty, as_array=True)
    assert len(none) == 0 and none.dtype.names == arr.dtype.names


def test_results_reads_the_rows_of_a_cli_ablate(work):
    run([CLI, "ablate", "--kernel", "spmv", "--configs", "few", "--config",
         "few=--search random --budget 2",
         "--db", str(work / "ablate.sqlite"), "--work", str(work / "ablate-work"),
         "--tune-args", "--repeat 3 --warmup 1 --confirm-rounds 4", "--bench-repeat", "5",
         "--final-runs-max", "2", "--threads", "2", str(EXAMPLE)])
    rows = waco_hybrid.results(work / "ablate.sqlite", table="ablation")
    configs = {r["config"] for r in rows}
    assert "few" in configs, configs
    few = next(r for r in rows if r["config"] == "few")
    assert few["kernel"] == "spmv" and few["threads"] == 2 and few["status"] == "ok"
    assert few["fingerprint"] == waco_hybrid.load(EXAMPLE).fingerprint
    assert "winner" in few and "claimed_speedup" in few
    arr = waco_hybrid.results(work / "ablate.sqlite", table="ablation", as_array=True)
    assert len(arr) == len(rows)
    assert arr.dtype["config"] == object and arr.dtype["threads"] == np.int64
    assert arr.dtype["claimed_speedup"] == np.float64
    assert list(arr["config"]) == [r["config"] for r in rows]


def test_dataset_reads_the_committed_exports():
    rows = waco_hybrid.dataset("sddmm")
    assert len(rows) > 1000
    first = rows[0]
    for key in ("fingerprint", "matrix", "rows", "cols", "nnz", "split", "kernel", "dense",
                "threads", "schedule", "status", "median_s"):
        assert key in first, key
    assert {r["kernel"] for r in rows} == {"sddmm"}
    assert {r["split"] for r in rows} <= {"train", "validation", "test", None}
    groups = waco_hybrid.dataset("sddmm", groups=True)
    assert len(groups) >= 100  # one a matrix (303 in data/dataset when this was written)
    assert sum(len(g["rows"]) for g in groups) == len(rows)
    with pytest.raises(ValueError, match="unknown kernel"):
        waco_hybrid.dataset("spmx")


def test_dataset_as_a_structured_array():
    rows = waco_hybrid.dataset("sddmm")
    arr = waco_hybrid.dataset("sddmm", as_array=True)
    assert len(arr) == len(rows) and list(arr.dtype.names) == list(rows[0])
    assert arr.dtype["median_s"] == np.float64 and arr.dtype["nnz"] == np.int64
    assert arr.dtype["split"] == object and arr.dtype["schedule"] == object
    assert (arr["kernel"] == "sddmm").all()
    assert np.array_equal(arr["median_s"], np.array([r["median_s"] for r in rows], dtype=float),
                          equal_nan=True)
    # One matrix's group: its fastest schedule, as a notebook would ask.
    first = arr[arr["fingerprint"] == arr["fingerprint"][0]]
    ok = first[first["status"] == "ok"]
    best = ok[np.argmin(ok["median_s"])]
    assert best["median_s"] == min(r["median_s"] for r in rows
                                   if r["fingerprint"] == rows[0]["fingerprint"]
                                   and r["status"] == "ok")
    groups = waco_hybrid.dataset("sddmm", groups=True, as_array=True)
    assert groups.dtype["rows"] == object and groups.dtype["matrix"] == object
    assert sum(len(g) for g in groups["rows"]) == len(rows)


def test_to_structured_types_and_missing_values():
    rows = [{"name": "a", "n": 1, "x": 1.5, "flag": True, "maybe": 3, "list": [1, 2]},
            {"name": None, "n": 2, "x": None, "flag": False, "list": []},
            {"name": "ccc", "n": 3, "x": 2, "flag": True, "maybe": None, "extra": "e"}]
    arr = waco_hybrid.to_structured(rows)
    assert arr.dtype.names == ("name", "n", "x", "flag", "maybe", "list", "extra")
    assert arr.dtype["name"] == object and list(arr["name"]) == ["a", None, "ccc"]
    assert arr.dtype["n"] == np.int64 and list(arr["n"]) == [1, 2, 3]
    assert arr.dtype["x"] == np.float64
    assert arr["x"][0] == 1.5 and math.isnan(arr["x"][1]) and arr["x"][2] == 2.0
    assert arr.dtype["flag"] == np.bool_ and list(arr["flag"]) == [True, False, True]
    # An integer column with a value missing (None, or a key a row lacks): float64 with NaN.
    assert arr.dtype["maybe"] == np.float64
    assert arr["maybe"][0] == 3 and np.isnan(arr["maybe"][1:]).all()
    assert arr.dtype["list"] == object and arr["list"][0] == [1, 2] and arr["list"][1] == []
    assert list(arr["extra"]) == [None, None, "e"]
    # A bool with a value missing, and a column of mixed kinds: objects.
    mixed = waco_hybrid.to_structured([{"b": True, "m": 1}, {"b": None, "m": "one"}])
    assert mixed.dtype["b"] == object and mixed.dtype["m"] == object
    # Given columns: that order, only those; no rows: an empty array of those fields.
    assert waco_hybrid.to_structured(rows, ["x", "name"]).dtype.names == ("x", "name")
    empty = waco_hybrid.to_structured([], ["a", "b"])
    assert len(empty) == 0 and empty.dtype.names == ("a", "b")
    assert len(waco_hybrid.to_structured([])) == 0
    with pytest.raises(ValueError, match="twice"):
        waco_hybrid.to_structured(rows, ["x", "x"])
