#!/usr/bin/env bash
# Issue 3's report: the tile model's choice against the best measured tile (tile --exhaustive),
# and J-Stream (model tiles) against csr, eigen and rsb-tuned side by side, for SpMM (J=128, 256)
# and SDDMM (K=128, 256) on the N largest matrices of a data folder (the 14 largest of
# ../shared/data are those with at least 100k nonzeros). JSON per run to OUT_DIR; a summary table
# (model tiles, model/best time ratio, rank) to stdout.
#   usage: scripts/bench_jstream.sh [DATA_DIR] [N] [OUT_DIR]
#   env: THREADS (default 1), REPEAT (tile sweep, default 5), SKIP_SWEEP=1, SKIP_BENCH=1
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
n=${2:-14}
out=${3:-bench-results}
threads=${THREADS:-1}
repeat=${REPEAT:-5}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq not found (hint: apt-get install jq)" >&2; exit 1; }
mkdir -p "$out"
mapfile -t files < <(scripts/largest_matrices.sh "$data" "$n")
[ ${#files[@]} -gt 0 ] || exit 1

# A number-valued key of a JSON file (the first occurrence).
json_number() { grep -m1 "\"$2\"" "$1" | sed -E 's/.*: *([-0-9.eE+]+).*/\1/'; }

if [ "${SKIP_SWEEP:-0}" != 1 ]; then
  # ratio: median of the model's tile / median of the best point of the sweep; interleaved: the
  # two re-measured back to back (less exposed to drift during the sweep).
  printf '%-24s %-6s %5s %8s %8s %8s %11s %6s %8s\n' matrix kernel dense T_i T_k ratio interleaved rank points
  for f in "${files[@]}"; do
    name=$(basename "$f"); name=${name%%.*}
    for kernel in spmm sddmm; do
      for dense in 128 256; do
        j="$out/tile_${kernel}_${dense}_$name.json"
        "$waco" tile --kernel "$kernel" --dense "$dense" --exhaustive --min-ti 16 \
          --repeat "$repeat" --warmup 1 --threads "$threads" --json "$f" > "$j"
        printf '%-24s %-6s %5s %8s %8s %8.3f %11.3f %6s %8s\n' "$name" "$kernel" "$dense" \
          "$(json_number "$j" T_i)" "$(json_number "$j" T_k)" \
          "$(json_number "$j" model_to_best_time_ratio)" \
          "$(json_number "$j" model_to_best_time_ratio_interleaved)" "$(json_number "$j" model_rank)" \
          "$(jq '.exhaustive.points | length' "$j")"
      done
    done
  done
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  for dense in 128 256; do
    "$waco" bench --kernel spmm --dense "$dense" --impl csr,jstream,eigen,rsb-tuned \
      --threads "$threads" --repeat 10 --save "$out/jstream_spmm_$dense.json" "${files[@]}"
    "$waco" bench --kernel sddmm --dense "$dense" --impl csr,jstream \
      --threads "$threads" --repeat 10 --save "$out/jstream_sddmm_$dense.json" "${files[@]}"
  done
fi
