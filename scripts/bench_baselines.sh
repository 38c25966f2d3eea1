#!/usr/bin/env bash
# The baseline comparison of issue 2: SpMV and SpMM (J=256) with csr, eigen, rsb and rsb-tuned side
# by side (interleaved, ratios to csr) on the N largest matrices (by nnz) of a data folder with a
# MANIFEST.tsv (default ../shared/data). Results go to stdout as tables and to OUT_DIR as JSON.
#   usage: scripts/bench_baselines.sh [DATA_DIR] [N] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
n=${2:-10}
out=${3:-bench-results}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
mapfile -t files < <(scripts/largest_matrices.sh "$data" "$n")
[ ${#files[@]} -gt 0 ] || exit 1
for kernel in spmv spmm; do
  "$waco" bench --kernel "$kernel" --impl csr,eigen,rsb,rsb-tuned --threads 2 --repeat 10 \
    --save "$out/baselines_$kernel.json" "${files[@]}"
done
