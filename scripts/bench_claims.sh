#!/usr/bin/env bash
# Claimed against delivered on near-tied kernels (issue 33, the winner's curse): per matrix, N
# tunes of a list of 20 csr-like SpMV kernels (ten chunk choices, each entered twice: once with
# the run's thread count written out, so that it is compiled and timed as another kernel), then
# every distinct winner timed beside the csr schedule and the csr baseline in R fresh `bench`
# processes. Per tune: the verdict, the speedup it claimed, and the speedup its result delivered
# over the faster csr reference in those fresh runs (the median over the runs of each run's
# ratio of medians). A result that is csr delivers 1.0 by definition of the reference.
#   usage: scripts/bench_claims.sh N FILES...
#   env: WACO (binary; default build/experiments/waco-hybrid), THREADS (default 2), R (fresh bench
#        runs, default 3), ROUNDS (bench rounds, default 40), TUNE_ARGS, OUT (default
#        build/bench-claims), WACO_CPU_LOCK (held exclusively around each tune and bench)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:?usage: scripts/bench_claims.sh N FILES...}
shift
default_out=build/bench-claims
# shellcheck source=scripts/bench_env.sh
source scripts/bench_env.sh
list="$out/near-tied.txt"
: > "$list"
for c in 1 2 4 8 16 32 64 128 256 static; do
  echo "order=i,k format=UC parallel=i chunk=$c" >> "$list"
  echo "order=i,k format=UC parallel=i threads=$threads chunk=$c" >> "$list"
done
rows="$out/rows.jsonl"
: > "$rows"
for f in "$@"; do
  name=$(basename "$f")
  tunes="$out/$name.tunes.jsonl"
  : > "$tunes"
  for ((k = 1; k <= n; k++)); do
    db="$out/claims.sqlite"
    rm -f "$db" "$db-wal" "$db-shm"
    # shellcheck disable=SC2086
    "${lock[@]}" "$waco" tune --kernel spmv --schedules "$list" --threads "$threads" --no-plan-cache \
      --json --quiet --db "$db" ${TUNE_ARGS:-} "$f" 2> "$out/tune.err" |
      jq -c '{verdict, winner: .best.schedule, claimed: .claimed_speedup,
              reference: .verdict_detail.reference, lo: .speedup_interval.lo, hi: .speedup_interval.hi}' >> "$tunes"
  done
  # Every distinct winner beside both references, in R fresh processes.
  mapfile -t winners < <(jq -r '.winner' "$tunes" | sort -u)
  args=()
  for w in "${winners[@]}"; do args+=(--schedule "$w"); done
  : > "$out/$name.bench.jsonl"
  for ((r = 1; r <= ${R:-3}; r++)); do
    "${lock[@]}" "$waco" bench --kernel spmv --impl csr --schedule csr "${args[@]}" --threads "$threads" \
      --repeat "${ROUNDS:-40}" --json "$f" 2> "$out/bench.err" | jq -c '.' >> "$out/$name.bench.jsonl"
  done
  # The delivered speedup of schedule S in one bench run: min(csr, csr schedule) / S, medians.
  jq -c -s --arg m "$name" --slurpfile b "$out/$name.bench.jsonl" '
    def delivered($s): [$b[] | .results as $r |
        ([$r[] | select(.impl == "csr" or .impl == "gen:csr") | .median_s] | min) as $ref |
        ([$r[] | select(.impl == "gen:" + $s) | .median_s][0]) as $t | $ref / $t] | sort | .[length / 2 | floor];
    .[] | . + {matrix: $m, delivered: (if .verdict == "gain" then delivered(.winner) else 1.0 end)}' "$tunes" >> "$rows"
  jq -rs --arg m "$name" '[.[] | select(.matrix == $m)] |
    "\($m): \(length) tunes, \([.[] | select(.verdict == "gain")] | length) gains; delivered/claimed median " +
    "\([.[] | select(.verdict == "gain") | .delivered / .claimed] | sort | .[length / 2 | floor] // "-"), " +
    "min \([.[] | select(.verdict == "gain") | .delivered / .claimed] | min // "-"); delivered below 0.97: " +
    "\([.[] | select(.delivered < 0.97)] | length)"' "$rows"
done
