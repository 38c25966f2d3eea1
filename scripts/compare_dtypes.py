#!/usr/bin/env python3
"""Single against double precision on the same matrices: from a dataset export (or several) that
holds groups of both value types (`collect --dtype f32` and `--dtype f64` on the same recipes, one
machine), per matrix the fastest schedule in each type, whether it is the same, how much slower
the f32 winner runs in f64 than the f64 winner, and the Spearman correlation of the two types'
times over the schedules timed ok in both (both groups sample the same schedules: the sample is
seeded by the matrix's fingerprint).

  usage: scripts/compare_dtypes.py [--kernel K] [--json] EXPORT.jsonl[.gz]...
  make the export with: waco-hybrid dataset export --db D -o EXPORT.jsonl.gz
Standard library only (Debian's python3)."""
import argparse
import gzip
import json
import statistics
import sys

from rankstats import spearman


def groups(paths, kernel):
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                if line.strip():
                    g = json.loads(line)
                    if g["kernel"] == kernel:
                        yield g


def ok_times(g):
    """Schedule -> median time of the rows timed ok (baselines left out)."""
    return {r[0]: r[2] for r in g["rows"] if r[1] == "ok" and not r[0].startswith("impl=")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exports", nargs="+")
    ap.add_argument("--kernel", default="spmv")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    by = {}
    for g in groups(a.exports, a.kernel):
        by.setdefault(g["matrix"]["fingerprint"], {})[g.get("dtype", "f32")] = g
    rows = []
    for fp, d in sorted(by.items()):
        if "f32" not in d or "f64" not in d:
            continue
        t32, t64 = ok_times(d["f32"]), ok_times(d["f64"])
        common = sorted(set(t32) & set(t64))
        if len(common) < 2:
            continue
        best32 = min(common, key=lambda s: t32[s])
        best64 = min(common, key=lambda s: t64[s])
        rows.append({
            "fingerprint": fp,
            "source": d["f64"].get("source"),
            "split": d["f64"].get("split"),
            "schedules": len(common),
            "best_f32": best32,
            "best_f64": best64,
            "same_best": best32 == best64,
            # What choosing the f32 winner for a double kernel costs (1 = nothing).
            "f32_winner_in_f64": t64[best32] / t64[best64],
            "spearman_f32_f64": spearman([t32[s] for s in common], [t64[s] for s in common]),
        })
    if not rows:
        sys.exit("no matrix has groups of both value types in " + ", ".join(a.exports))
    loss = sorted(r["f32_winner_in_f64"] for r in rows)
    rho = [r["spearman_f32_f64"] for r in rows if r["spearman_f32_f64"] is not None]
    summary = {
        "kernel": a.kernel,
        "matrices": len(rows),
        "same_best": sum(r["same_best"] for r in rows),
        "f32_winner_in_f64_median": statistics.median(loss),
        "f32_winner_in_f64_p90": loss[min(len(loss) - 1, int(0.9 * len(loss)))],
        "f32_winner_in_f64_max": loss[-1],
        "spearman_f32_f64_median": statistics.median(rho) if rho else None,
    }
    if a.json:
        print(json.dumps({"summary": summary, "rows": rows}, indent=1))
        return
    for r in rows:
        print(f"{r['source'][:44]:44s} {r['schedules']:4d}  same={int(r['same_best'])}  "
              f"f32-winner-in-f64 {r['f32_winner_in_f64']:.3f}  rho {r['spearman_f32_f64'] or 0:.3f}")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
