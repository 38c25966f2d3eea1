#!/usr/bin/env bash
# The ANNS search against exact scoring, without measuring kernels (issue 20's recall and
# economy): for each matrix, `predict --search anns --check-recall` walks the HNSW graph and also
# scores every graph node the matrix admits; `predict --search model` scores the whole admissible
# set with the network. Twice per matrix: with the default passes and with legality alone (the
# legal space, millions of schedules, where the graph's templates are what a search can reach).
# Reports per matrix and pipeline: admissible count, recall@10, head evaluations, the ef the
# filter needed, walk time, brute-force time over the graph, the model search's time.
#   usage: scripts/bench_anns.sh [KERNEL] [OUT_DIR] MATRICES...
#   env: THREADS (default 2), MODEL (default: the shipped model), WACO_CPU_LOCK (held
#        exclusively around every run)
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:-spmv}
out=${2:-bench-results/anns}
shift 2 || true
threads=${THREADS:-2}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: scripts/bench_anns.sh KERNEL OUT_DIR MATRICES..." >&2; exit 2; }
mkdir -p "$out"
run() { if [ -n "${WACO_CPU_LOCK:-}" ]; then flock -x "$WACO_CPU_LOCK" "$@"; else "$@"; fi; }
model_args=(); [ -n "${MODEL:-}" ] && model_args=(--model "$MODEL")
common=(--kernel "$kernel" --threads "$threads" --json "${model_args[@]}")
printf '%-28s %-8s %9s %6s %7s %6s %9s %9s %9s\n' matrix passes admiss recall evals ef walk_ms \
  exact_ms model_ms
for f in "$@"; do
  name=$(basename "$f")
  for passes in all legality; do
    base="$out/$name.$passes"
    run "$waco" predict "${common[@]}" --search anns --passes "$passes" --check-recall "$f" \
      > "$base.anns.json" 2> "$base.anns.err" || { echo "skip $name ($passes): $(tail -1 "$base.anns.err")" >&2; continue; }
    model_ms=-
    if [ "$passes" = all ]; then
      run "$waco" predict "${common[@]}" --search model --passes all --top 20 "$f" \
        > "$base.model.json" 2> /dev/null &&
        model_ms=$(jq '(.prepare_seconds + .model_seconds) * 1000 | . * 10 | round / 10' "$base.model.json")
    fi
    jq -r --arg n "$name" --arg p "$passes" --arg m "$model_ms" \
      '[$n, $p, .admissible, .search_info.recall_at_10, .search_info.head_evaluations,
        .search_info.ef, (.search_info.walk_seconds * 1000 | . * 100 | round / 100),
        (.search_info.exact_seconds * 1000 | . * 100 | round / 100), $m] | @tsv' "$base.anns.json" |
      awk -F'\t' '{printf "%-28s %-8s %9s %6.2f %7s %6s %9s %9s %9s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
  done
done | tee "$out/table.txt"
awk '$2 == "all" {a += $4; na++} $2 == "legality" {l += $4; nl++}
     END {if (na) printf "mean recall@10: %.3f over %d matrices (default passes)\n", a / na, na;
          if (nl) printf "mean recall@10: %.3f over %d matrices (legality only)\n", l / nl, nl}' \
  "$out/table.txt"
