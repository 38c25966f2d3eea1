#!/usr/bin/env bash
# The model-guided search against exhaustive search (issue 20's first comparison): for each
# matrix never trained on (the real files whose family is in the cost model's test split, as
# `waco-hybrid evaluate` lists them), `tune --search exhaustive` measures the whole admissible
# set and `tune --search model --budget B` only the model's B best; then `bench` times csr and
# both winners side by side, interleaved in one run. Reports per matrix: candidates measured and
# tune time of each search, and the model winner's time over the exhaustive winner's (1.00 =
# as fast; the geometric mean at the end). Tables to stdout, JSON per run to OUT_DIR.
#   usage: scripts/bench_model_search.sh [KERNEL] [OUT_DIR]
#   env: BUDGET (default 5), THREADS (default 2), MODEL (default: the shipped model),
#        WACO_CPU_LOCK (a file held exclusively around every tune and bench)
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:-spmv}
out=${2:-bench-results/model-search}
budget=${BUDGET:-5}
threads=${THREADS:-2}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
measure() { if [ -n "${WACO_CPU_LOCK:-}" ]; then flock -x "$WACO_CPU_LOCK" "$@"; else "$@"; fi; }
model_args=(); [ -n "${MODEL:-}" ] && model_args=(--model "$MODEL")
# The test-split real files: evaluate's rows name each file's family.
"$waco" evaluate --kernel "$kernel" "${model_args[@]}" --split test --json -q > "$out/evaluate.json"
mapfile -t files < <(jq -r '.rows[] | select(.family | startswith("file:")) | .matrix' "$out/evaluate.json" |
                     awk '{print $1}' | sort -u)
data=${WACO_DATA_DIR:-../shared/data}
printf '%-26s %6s | %5s %8s | %5s %8s | %8s %8s %8s\n' matrix admiss exh-n exh-time mod-n mod-time \
       exh/csr mod/csr mod/exh
ratios=()
for name in "${files[@]}"; do
  f=$(find "$data" -name "$name" | head -1)
  [ -n "$f" ] || { echo "skip $name: not found under $data" >&2; continue; }
  # Separate fresh databases: neither search may reuse the other's measurements.
  rm -f "$out/$name".*.sqlite*
  common=(--kernel "$kernel" --threads "$threads" --json -q)
  measure "$waco" tune "${common[@]}" --db "$out/$name.exhaustive.sqlite" --search exhaustive "$f" \
      > "$out/$name.exhaustive.json"
  measure "$waco" tune "${common[@]}" --db "$out/$name.model.sqlite" --search model \
      --budget "$budget" "${model_args[@]}" "$f" > "$out/$name.model.json"
  se=$(jq -r .best.schedule "$out/$name.exhaustive.json")
  sm=$(jq -r .best.schedule "$out/$name.model.json")
  measure "$waco" bench --kernel "$kernel" --threads "$threads" --impl csr --schedule "$se" \
      --schedule "$sm" --repeat 30 --json "$f" > "$out/$name.bench.json"
  read -r te tm tc < <(jq -r '[.results[] | .median_s] | "\(.[1]) \(.[2]) \(.[0])"' "$out/$name.bench.json")
  r=$(awk -v a="$tm" -v b="$te" 'BEGIN{printf "%.3f", a/b}')
  ratios+=("$r")
  printf '%-26s %6s | %5s %7.1fs | %5s %7.1fs | %8.3f %8.3f %8s\n' "$name" \
    "$(jq .space.admissible_count "$out/$name.exhaustive.json")" \
    "$(jq .candidates "$out/$name.exhaustive.json")" "$(jq .time_s "$out/$name.exhaustive.json")" \
    "$(jq .candidates "$out/$name.model.json")" "$(jq .time_s "$out/$name.model.json")" \
    "$(awk -v a="$te" -v b="$tc" 'BEGIN{print a/b}')" "$(awk -v a="$tm" -v b="$tc" 'BEGIN{print a/b}')" "$r"
done
printf '%s\n' "${ratios[@]}" | awk '{s+=log($1); n++; if ($1 <= 1.05) k++} END {if (n) printf "model winner / exhaustive winner: geometric mean %.3f over %d matrices, within 5%% on %d\n", exp(s/n), n, k}'
