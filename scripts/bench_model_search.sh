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
#        SEARCH (model or anns, default model), SPLITS (default "test"; e.g. "validation test";
#        empty: none, only EXTRA),
#        EXTRA (more matrix files never trained on, e.g. freshly generated ones),
#        WACO_CPU_LOCK (a file held exclusively around every tune and bench)
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:-spmv}
out=${2:-bench-results/model-search}
budget=${BUDGET:-5}
threads=${THREADS:-2}
search=${SEARCH:-model}
splits=${SPLITS-test}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
measure() { if [ -n "${WACO_CPU_LOCK:-}" ]; then flock -x "$WACO_CPU_LOCK" "$@"; else "$@"; fi; }
model_args=(); [ -n "${MODEL:-}" ] && model_args=(--model "$MODEL")
# The real files of the chosen splits: evaluate's rows name each file's family.
files=()
for split in $splits; do
  "$waco" evaluate --kernel "$kernel" "${model_args[@]}" --split "$split" --json -q > "$out/evaluate.$split.json"
  mapfile -t more < <(jq -r '.rows[] | select(.family | startswith("file:")) | .matrix' "$out/evaluate.$split.json" |
                      awk '{print $1}' | sort -u)
  files+=("${more[@]}")
done
for f in ${EXTRA:-}; do files+=("$f"); done
data=${WACO_DATA_DIR:-../shared/data}
printf '%-26s %6s | %5s %8s | %5s %8s | %8s %8s %8s %9s\n' matrix admiss exh-n exh-time mod-n mod-time \
       exh/csr mod/csr mod/exh legal/exh
ratios=()
legal_ratios=()
for name in "${files[@]}"; do
  if [ -f "$name" ]; then f=$name; name=$(basename "$name"); else f=$(find "$data" -name "$name" | head -1); fi
  [ -n "$f" ] || { echo "skip $name: not found under $data" >&2; continue; }
  # Separate fresh databases: neither search may reuse the other's measurements.
  rm -f "$out/$name".*.sqlite*
  common=(--kernel "$kernel" --threads "$threads" --json -q)
  measure "$waco" tune --no-plan-cache "${common[@]}" --db "$out/$name.exhaustive.sqlite" --search exhaustive "$f" \
      > "$out/$name.exhaustive.json"
  measure "$waco" tune --no-plan-cache "${common[@]}" --db "$out/$name.model.sqlite" --search "$search" \
      --budget "$budget" "${model_args[@]}" "$f" > "$out/$name.model.json"
  se=$(jq -r .best.schedule "$out/$name.exhaustive.json")
  sm=$(jq -r .best.schedule "$out/$name.model.json")
  extra=()
  if [ -n "${LEGAL:-}" ]; then  # the passes off: the model searches the legal space alone
    measure "$waco" tune --no-plan-cache "${common[@]}" --db "$out/$name.legal.sqlite" --search anns --passes legality \
        --budget "$budget" "${model_args[@]}" "$f" > "$out/$name.legal.json"
    extra=(--schedule "$(jq -r .best.schedule "$out/$name.legal.json")")
  fi
  measure "$waco" bench --kernel "$kernel" --threads "$threads" --impl csr --schedule "$se" \
      --schedule "$sm" "${extra[@]}" --repeat 30 --json "$f" > "$out/$name.bench.json"
  read -r te tm tc tl < <(jq -r '[.results[] | .median_s] | "\(.[1]) \(.[2]) \(.[0]) \(.[3] // 0)"' "$out/$name.bench.json")
  r=$(awk -v a="$tm" -v b="$te" 'BEGIN{printf "%.3f", a/b}')
  ratios+=("$r")
  rl=-
  if [ -n "${LEGAL:-}" ]; then rl=$(awk -v a="$tl" -v b="$te" 'BEGIN{printf "%.3f", a/b}'); legal_ratios+=("$rl"); fi
  printf '%-26s %6s | %5s %7.1fs | %5s %7.1fs | %8.3f %8.3f %8s %9s\n' "$name" \
    "$(jq .space.admissible_count "$out/$name.exhaustive.json")" \
    "$(jq .candidates "$out/$name.exhaustive.json")" "$(jq .time_s "$out/$name.exhaustive.json")" \
    "$(jq .candidates "$out/$name.model.json")" "$(jq .time_s "$out/$name.model.json")" \
    "$(awk -v a="$te" -v b="$tc" 'BEGIN{print a/b}')" "$(awk -v a="$tm" -v b="$tc" 'BEGIN{print a/b}')" "$r" "$rl"
done
summary() { awk -v what="$1" '{s+=log($1); n++; if ($1 <= 1.05) k++} END {if (n) printf "%s: geometric mean %.3f over %d matrices, within 5%% on %d\n", what, exp(s/n), n, k}'; }
printf '%s\n' "${ratios[@]}" | summary "$search winner / exhaustive winner (time; lower is faster)"
[ ${#legal_ratios[@]} -eq 0 ] || printf '%s\n' "${legal_ratios[@]}" |
  summary "anns over the legal space (passes off) / exhaustive over the admissible set"
