#!/usr/bin/env bash
# A/A calibration of tune's verdict (issue 33, "true-verdicts"): how often `tune` reports a gain
# that cannot exist. Per matrix, N tunes of a list holding one kernel that *is* the csr schedule
# (the same loop nest, written with an explicit thread count, so that it is compiled and timed
# as a second kernel), judged against the csr schedule and the csr baseline as every tune is.
# Any `gain` is a false gain. Also reported: how the csr schedule and the csr baseline (the same
# loop, one generated, one hand-written) compared in the same tunes.
#   usage: scripts/bench_verdict.sh KERNEL N FILES...
#   env: WACO (binary; default build/experiments/waco-hybrid), THREADS (default 2),
#        TUNE_ARGS (more tune arguments, e.g. "--decide-always" to time the fresh decision runs in
#        every tune, or "--min-gain 0.03"), OUT (work folder; default build/bench-verdict),
#        WACO_CPU_LOCK (a file held exclusively around each tune, as collect --cpu-lock)
# Prints one line per matrix and a JSON summary (OUT/summary.json).
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:?usage: scripts/bench_verdict.sh KERNEL N FILES...}
n=${2:?usage: scripts/bench_verdict.sh KERNEL N FILES...}
shift 2
default_out=build/bench-verdict
# shellcheck source=scripts/bench_env.sh
source scripts/bench_env.sh
case "$kernel" in
  spmv) twin="order=i,k format=UC parallel=i threads=$threads chunk=auto" ;;
  spmm) twin="order=i,k,j format=UC parallel=i threads=$threads chunk=32" ;;
  sddmm) twin="order=i,j,k format=UC parallel=i threads=$threads chunk=32" ;;
  *) echo "error: bench_verdict.sh takes spmv, spmm or sddmm" >&2; exit 2 ;;
esac
echo "$twin" > "$out/twin.txt"
rows="$out/rows.jsonl"
: > "$rows"
for f in "$@"; do
  name=$(basename "$f")
  for ((k = 1; k <= n; k++)); do
    db="$out/aa.sqlite"
    rm -f "$db" "$db-wal" "$db-shm"
    # shellcheck disable=SC2086
    if ! "${lock[@]}" "$waco" tune --kernel "$kernel" --schedules "$out/twin.txt" --threads "$threads" \
         --no-plan-cache --json --quiet --db "$db" ${TUNE_ARGS:-} "$f" > "$out/tune.json" 2> "$out/tune.err"; then
      echo "error: tune failed on $f (see $out/tune.err)" >&2
      exit 1
    fi
    jq -c --arg m "$name" '{matrix: $m, verdict, reference: .verdict_detail.reference,
        ratio: .verdict_detail.ratio_median, lo: .verdict_detail.ratio_lo, hi: .verdict_detail.ratio_hi,
        runs: .verdict_detail.run_ratio_medians, fresh: .decision.fresh,
        refs: .decision.faster_reference, refs_ratio: .decision.references.ratio_median,
        busy: (.busy_warning != null or .decision.busy_warning != null), time_s}' "$out/tune.json" >> "$rows"
  done
  jq -rs --arg m "$name" '[.[] | select(.matrix == $m)] |
      "\($m): \(length) tunes, \([.[] | select(.verdict == "gain")] | length) false gains, " +
      "\([.[] | select(.fresh)] | length) decided on fresh runs, busy \([.[] | select(.busy)] | length); " +
      "twin/ref median ratio \([.[].ratio | select(. != null)] | sort | .[length / 2 | floor] // "-"); " +
      "csr schedule vs baseline: faster \([.[] | select(.refs == "schedule")] | length) / tie \([.[] | select(.refs == "tie")] | length) / slower \([.[] | select(.refs == "baseline")] | length), " +
      "median ratio \([.[].refs_ratio | select(. != null)] | sort | .[length / 2 | floor] // "-"); " +
      "mean tune \(([.[].time_s] | add) / length * 1000 | floor) ms"' "$rows"
done
jq -s --arg k "$kernel" --arg args "${TUNE_ARGS:-}" '{kernel: $k, tune_args: $args, tunes: length,
    false_gains: ([.[] | select(.verdict == "gain")] | length),
    false_gain_rate: (([.[] | select(.verdict == "gain")] | length) / length),
    undecided: ([.[] | select(.verdict == "undecided")] | length),
    fresh: ([.[] | select(.fresh)] | length),
    references: {schedule_faster: ([.[] | select(.refs == "schedule")] | length),
                 tie: ([.[] | select(.refs == "tie")] | length),
                 baseline_faster: ([.[] | select(.refs == "baseline")] | length)}}' "$rows" | tee "$out/summary.json"
