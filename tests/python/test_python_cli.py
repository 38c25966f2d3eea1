"""What the waco-hybrid CLI wrote, read from Python: results(db) on databases of `tune --db` and
`ablate --db`, dataset(kernel) on the committed exports, and `python3 -m waco_hybrid tune`
against `waco-hybrid tune --json` on the same tuning cache, in float32 and with --dtype f64."""

import json
import os
import subprocess
import sys

import pytest

import waco_hybrid
from conftest import EXAMPLE

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
