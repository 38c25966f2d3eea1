#!/usr/bin/env bash
# Oracle survival (issue 5's closing report): does the best schedule of the admissible set (the
# default trimming pipeline) hold up against the best of SAMPLES schedules drawn uniformly from
# the full legal space? Per matrix:
#   (a) tune --search exhaustive over the admissible set (--passes PASSES, default all);
#   (b) space --passes legality --sample SAMPLES --seed SEED (uniform over the legal space), then
#       tune --schedules over that sample;
#   (c) bench, interleaved: the csr baseline (csf for mttkrp), the best admissible and the best
#       random schedule, --repeat REPEAT. ratio = best admissible median / best random median;
#       survived = ratio <= 1.02; speedup = baseline median / best admissible median.
# Both tunes share one results database (OUT_DIR/oracle_KERNEL.db), so a stopped run resumes and a
# schedule in both sets is measured once. A random schedule may run at most TIMEOUT seconds
# (verification, warm-up and timed runs; tune --timeout), by default 20x the csr schedule's
# time over those runs, at least 2 s: a pathological one costs a few seconds, not minutes
# (TIMEOUT_FACTOR and TIMEOUT_MIN change the 20 and the 2 s: a schedule that slow cannot be the
# best of the sample, and on SpMM the timeouts took two thirds of the random phase).
# Prints one table row per matrix and writes OUT_DIR/oracle_KERNEL.json. Needs jq and awk.
#   usage: scripts/bench_oracle.sh KERNEL OUT_DIR FILE...
#   env:   THREADS (1), SAMPLES (300), SEED (1), REPEAT (20), TIMEOUT (auto), PASSES (all),
#          DENSE (the tool's default: J/K 256 spmm/sddmm, 16 mttkrp), TIMEOUT_FACTOR (20),
#          TIMEOUT_MIN (2), WACO_BUILD_DIR (build), REBENCH=1 (only phase (c) again, from the
#          tunes an earlier run left in OUT_DIR: re-times the winners, e.g. on a quieter machine)
#   e.g.:  scripts/bench_oracle.sh spmv bench-results/oracle $(scripts/largest_matrices.sh ../shared/data 10)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
kernel=$1
out=$2
shift 2
threads=${THREADS:-1}
samples=${SAMPLES:-300}
seed=${SEED:-1}
repeat=${REPEAT:-20}
timeout=${TIMEOUT:-auto}
passes=${PASSES:-all}
timeout_factor=${TIMEOUT_FACTOR:-20}
timeout_min=${TIMEOUT_MIN:-2}
dense=()
[ -n "${DENSE:-}" ] && [ "$kernel" != spmv ] && dense=(--dense "$DENSE")
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq not found (hint: apt-get install jq)" >&2; exit 1; }
for f in "$@"; do [ -f "$f" ] || { echo "error: no such file: $f" >&2; exit 1; }; done
baseline=csr
[ "$kernel" = mttkrp ] && baseline=csf

mkdir -p "$out/runs"
db="$out/oracle_$kernel.db"
rows=()

now() { echo "$EPOCHREALTIME"; }
# A phase that fails leaves an empty JSON file: that matrix's row says null, the study goes on.
failed() { echo "warning: $name: $1 failed, see $2" >&2; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

format='%-24s %14s %10s %7s %8s %8s %8s %8s %7s  %s | %s\n'
# shellcheck disable=SC2059
printf "$format" matrix legal admissible ratio survived speedup tune_s random_s bench_s \
  "best admissible" "best random"
for f in "$@"; do
  name=$(basename "$f")
  name=${name%.gz}
  name=${name%.mtx}
  name=${name%.tns}
  run="$out/runs/${kernel}_$name"

  if [ "${REBENCH:-0}" = 1 ]; then
    for x in admissible.json random.json row.json; do
      [ -f "$run.$x" ] || { echo "error: REBENCH=1 but $run.$x is missing" >&2; exit 1; }
    done
    # The tunes' durations are those of the earlier run.
    t0=0
    t1=$(jq -r '.seconds.admissible' "$run.row.json")
    t2=$(awk -v a="$t1" -v b="$(jq -r '.seconds.random' "$run.row.json")" 'BEGIN { print a + b }')
    limit=$(jq -r '.random_timeout_s' "$run.row.json")
    rm -f "$run.bench.json" "$run.bench.log"
  else
    rm -f "$run".*

    # (a) the admissible set, exhaustively.
    t0=$(now)
    "$waco" tune --no-plan-cache --kernel "$kernel" "$f" "${dense[@]}" --search exhaustive --passes "$passes" \
      --db "$db" --threads "$threads" --json > "$run.admissible.json" 2> "$run.admissible.log" ||
      failed "the admissible tune" "$run.admissible.log"
    t1=$(now)

    # (b) SAMPLES schedules uniformly from the legal space (threads 1..THREADS), then measured.
    "$waco" space --kernel "$kernel" "$f" "${dense[@]}" --passes legality --cores "$threads" \
      --sample "$samples" --seed "$seed" > "$run.sample.txt" 2> "$run.sample.log" ||
      failed "sampling the legal space" "$run.sample.log"
    limit=$timeout
    if [ "$limit" = auto ]; then  # 20x the csr schedule over warm-up + timed runs + verification
      limit=$(jq -r --argjson f "$timeout_factor" --argjson m "$timeout_min" \
                   'if .csr.median_s then [$m, (.warmup + .repeats + 1) * $f * .csr.median_s] | max
                    else empty end' "$run.admissible.json")
      limit=${limit:-60}
    fi
    "$waco" tune --no-plan-cache --kernel "$kernel" "$f" "${dense[@]}" --schedules "$run.sample.txt" --db "$db" \
      --threads "$threads" --timeout "$limit" --json > "$run.random.json" 2> "$run.random.log" ||
      failed "the random tune" "$run.random.log"
    t2=$(now)
  fi

  # (c) the two winners and the baseline side by side, interleaved.
  t2b=$(now)
  adm=$(jq -r '.best.schedule // empty' "$run.admissible.json")
  rnd=$(jq -r '.best.schedule // empty' "$run.random.json")
  schedules=()
  [ -n "$adm" ] && schedules+=(--schedule "$adm")
  [ -n "$rnd" ] && [ "$rnd" != "$adm" ] && schedules+=(--schedule "$rnd")
  # A wrong result makes bench exit 1; its row then says verified=false.
  "$waco" bench --kernel "$kernel" "${dense[@]}" --impl "$baseline" "${schedules[@]}" \
    --threads "$threads" --repeat "$repeat" "$f" --save "$run.bench.json" > "$run.bench.log" 2>&1 ||
    failed "bench (or a verification in it)" "$run.bench.log"
  [ -f "$run.bench.json" ] || echo '{"results": []}' > "$run.bench.json"
  t3=$(now)
  # REBENCH: the bench's own duration after the earlier tunes'.
  [ "${REBENCH:-0}" = 1 ] && t3=$(awk -v a="$t2" -v b="$(elapsed "$t2b" "$t3")" 'BEGIN { print a + b }')

  # Rows of bench: the baseline, then the schedules in the order given.
  row=$(jq -n --arg matrix "$name" --arg file "$f" --arg adm "$adm" --arg rnd "$rnd" \
    --arg tune_s "$(elapsed "$t0" "$t1")" --arg random_s "$(elapsed "$t1" "$t2")" \
    --arg bench_s "$(elapsed "$t2" "$t3")" --arg timeout "$limit" \
    --slurpfile a "$run.admissible.json" --slurpfile r "$run.random.json" \
    --slurpfile b "$run.bench.json" '
    def med(i): ($b[0].results[i] // {}) | if .verified == true then .median_s else null end;
    def mn(i): ($b[0].results[i] // {}) | if .verified == true then .min_s else null end;
    def idx_random: if $adm == "" or $rnd == $adm then 1 else 2 end;
    (med(0)) as $base | (if $adm == "" then null else med(1) end) as $ta
    | (if $rnd == "" then null elif $rnd == $adm then $ta elif $adm == "" then med(1)
       else med(2) end) as $tr
    | {matrix: $matrix, file: $file,
       nnz: $a[0].nnz,
       legal_count: $a[0].space.legal_count,
       admissible_count: $a[0].space.admissible_count,
       best_admissible: (if $adm == "" then null else $adm end),
       best_random: (if $rnd == "" then null else $rnd end),
       random_measured: $r[0].considered,
       random_status_counts: $r[0].status_counts,
       random_timeout_s: ($timeout | tonumber),
       baseline_median_s: $base, best_admissible_median_s: $ta, best_random_median_s: $tr,
       ratio: (if $ta and $tr then $ta / $tr else null end),
       ratio_of_minima: (if $ta and $tr and $adm != "" and $rnd != "" then mn(1) / mn(idx_random)
                         else null end),
       survived: (if $ta and $tr then ($ta / $tr <= 1.02) else null end),
       speedup_over_baseline: (if $ta and $base then $base / $ta else null end),
       tune_speedup_over_csr: $a[0].speedup_over_csr,
       seconds: {admissible: ($tune_s | tonumber), random: ($random_s | tonumber),
                 bench: ($bench_s | tonumber)}}')
  echo "$row" > "$run.row.json"
  rows+=("$run.row.json")
  echo "$row" | jq -r '[.matrix, (.legal_count | tostring), (.admissible_count | tostring),
      (if .ratio then (.ratio * 1000 | round / 1000 | tostring) else "-" end),
      (if .survived == null then "n/a" elif .survived then "yes" else "no" end),
      (if .speedup_over_baseline then (.speedup_over_baseline * 100 | round / 100 | tostring)
       else "-" end),
      (.seconds.admissible | tostring), (.seconds.random | tostring), (.seconds.bench | tostring),
      (.best_admissible // "-"), (.best_random // "-")] | @tsv' |
    awk -F'\t' -v fmt="$format" '{ printf fmt, $1, $2, $3, $4, $5, $6 "x", $7, $8, $9, $10, $11 }'
done

jq -s --arg kernel "$kernel" --argjson threads "$threads" --argjson samples "$samples" \
  --arg dense "${DENSE:-default}" --argjson timeout_factor "$timeout_factor" \
  --argjson seed "$seed" --argjson repeat "$repeat" --arg passes "$passes" \
  --arg baseline "$baseline" --slurpfile ctx "$out/runs/${kernel}_$name.admissible.json" '
  {kernel: $kernel, dense: $dense, threads: $threads, samples: $samples, seed: $seed,
   bench_repeat: $repeat, timeout_factor: $timeout_factor,
   passes: $passes, baseline: $baseline, survival_tolerance: 1.02,
   survived: (map(select(.survived == true)) | length),
   compared: (map(select(.survived != null)) | length),
   matrices: .,
   context: $ctx[0].context}' "${rows[@]}" > "$out/oracle_$kernel.json"
jq -r '"survived: \(.survived) of \(.compared) matrices (ratio <= 1.02); results in '"$out/oracle_$kernel.json"'"' \
  "$out/oracle_$kernel.json"
