#!/usr/bin/env bash
# Generated kernels against the hand-written baselines (issue 4's report): generated CSR vs csr
# for SpMV and SpMM on the N largest matrices of a data folder; generated 4x4 BCSR vs CSR SpMV
# on a generated block-structured matrix and the same real matrices; compile time of a first
# kernel and of a cache hit. Tables to stdout, JSON to OUT_DIR.
#   usage: scripts/bench_codegen.sh [DATA_DIR] [N] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
n=${2:-10}
out=${3:-bench-results}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
cache=$(mktemp -d)  # a fresh kernel cache: the first compile below is a real one
trap 'rm -rf "$cache"' EXIT
mapfile -t files < <(scripts/largest_matrices.sh "$data" "$n")
[ ${#files[@]} -gt 0 ] || exit 1

echo "== compile time: first compile, then a cache hit (fresh cache $cache)"
for attempt in first hit; do
  "$waco" run --kernel spmv --schedule bcsr4x4 --repeat 1 --cache-dir "$cache" --json \
    examples/bcsstk13.mtx.gz > "$out/compile_$attempt.json"
  grep -E '"(compile_s|cache_hit|conversion_s)"' "$out/compile_$attempt.json" | tr -d ' ,' | sed "s/^/$attempt: /"
done

"$waco" generate --kind blocks --rows 65536 --block 4 --blocks 60000 --fill 1 --seed 1 -o "$out/blocks4.mtx"
"$waco" bench --kernel spmv --impl csr --schedule csr --schedule bcsr4x4 --threads 2 --repeat 20 \
  --cache-dir "$cache" --save "$out/codegen_spmv.json" "$out/blocks4.mtx" "${files[@]}"
"$waco" bench --kernel spmm --impl csr --schedule csr --threads 2 --repeat 10 \
  --cache-dir "$cache" --save "$out/codegen_spmm.json" "${files[@]}"
