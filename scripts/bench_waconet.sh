#!/usr/bin/env bash
# The WACONet cost benchmark of issue 18 (not a test): per-layer profiles of the largest matrices
# and the table of the ten largest matrices of the data folder, 2 threads. Every timed run holds
# the machine's CPU lock exclusively (flock -x), as the project's timing protocol asks.
#
#   scripts/bench_waconet.sh [BUILD_DIR] [DATA_DIR] [OUT_DIR]
#
# Writes OUT_DIR/profile_<matrix>.txt (implementations side by side, per-layer rates beside the
# machine's GEMM rate and bandwidth) and OUT_DIR/top10.tsv (maps, forward, forward+backward,
# peak memory, in seconds and in csr SpMV / SpMM call units).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
data=${2:-../shared/data}
out=${3:-bench-waconet}
lock=${WACO_CPU_LOCK:-/tmp/waco-cpu.lock}
bench="$build/learned/bench_waconet"
mkdir -p "$out"
for m in loc-Gowalla copter2; do
  impls=fused,autograd
  [ "$m" = loc-Gowalla ] && impls=fused  # autograd saves every gathered block: > 2 GB here
  flock -x "$lock" "$bench" --profile "$data/matrices/$m.mtx.gz" --impls "$impls" \
    --thread-count 2 --repeats 5 > "$out/profile_$m.txt"
done
flock -x "$lock" "$bench" --data "$data" --top 10 --variants full --threads 2 --impls fused \
  --repeats 3 > "$out/top10.tsv"
echo "bench_waconet: results in $out"
