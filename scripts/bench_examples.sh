#!/usr/bin/env bash
# The example applications on larger inputs (issue 16's tables): time to solution of the CG
# solver and of the GCN propagation with each back-end (plan = waco::tune's choice, tuning
# included and started from an empty tuning cache; csr; Eigen), side by side in one process per
# matrix, and the break-even calls of the plan. plan_us / csr_us: one CG iteration (SpMV and the
# vector updates) or one SpMM. sparse csr/plan: the same ratio over what waco runs alone (set-up,
# tuning and the SpMMs; CG: the whole solve): a GCN's dense products H W (Eigen's, the same in
# every back-end) took 2-3x longer in some processes than in others (Intel Xeon 2-vCPU VM), which
# swamps csr/plan. Tables to stdout, JSON per run to OUT_DIR.
#   usage: scripts/bench_examples.sh [DATA_DIR] [OUT_DIR]
#   env: SPD (default: the five largest SPD matrices of the data folder, by name),
#        GRAPHS (default: the five largest matrices of the data folder),
#        CG_ARGS (default "--tol 1e-6 --max-iter 5000"), GNN_ARGS (default
#        "--features 64 --layers 2 --epochs 200"), SEARCH (default model), THREADS (default 2),
#        SHARE (the share of the expected calls' csr time tuning may take, default 0.1),
#        ALWAYS_TUNE (set: tune without telling waco the expected calls),
#        ADAPTIVE (set: an adaptive plan, waco::Options::adaptive: csr at once, the model's
#        nominees tried on the application's own calls),
#        WACO_CPU_LOCK (a file every run holds exclusively: no build or test beside a timing),
#        SEPARATE (set: each back-end in a process of its own instead of the three in one)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
out=${2:-bench-results/examples}
build=${WACO_BUILD_DIR:-build}
threads=${THREADS:-2}
search=${SEARCH:-model}
cg_args=${CG_ARGS:-"--tol 1e-6 --max-iter 5000"}
gnn_args=${GNN_ARGS:-"--features 64 --layers 2 --epochs 200"}
for b in waco-cg waco-gnn; do
  [ -x "$build/examples/$b" ] || { echo "error: $build/examples/$b not built (scripts/build.sh)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
measure() { if [ -n "${WACO_CPU_LOCK:-}" ]; then flock -x "$WACO_CPU_LOCK" "$@"; else "$@"; fi; }
# SPD matrices of ../shared/data (real symmetric with a positive diagonal that CG accepts),
# largest first.
spd=${SPD:-"bcsstk16 bcsstk13 bcsstk09 bcsstk02 lund_a"}
mapfile -t graphs < <(if [ -n "${GRAPHS:-}" ]; then printf '%s\n' $GRAPHS; else scripts/largest_matrices.sh "$data" 5; fi)
file_of() { ls "$data"/matrices/"$1".mtx* 2>/dev/null | head -1; }

row() {  # name kind json
  jq -r --arg n "$1" --arg k "$2" '
    (.backends | map({(.backend): .}) | add) as $b |
    [$n, $k, (.nnz|tostring),
     ($b.plan.setup_s*1000|floor|tostring), ($b.plan.total_s*1000|floor|tostring),
     ($b.csr.total_s*1000|floor|tostring), ($b.eigen.total_s*1000|floor|tostring),
     (($b.csr.total_s / $b.plan.total_s)*1000|floor/1000|tostring),
     (($b.eigen.total_s / $b.plan.total_s)*1000|floor/1000|tostring),
     ((($b.csr.setup_s + ($b.csr.spmm_s // $b.csr.solve_s)) /
       ($b.plan.setup_s + ($b.plan.spmm_s // $b.plan.solve_s)))*1000|floor/1000|tostring),
     ($b.plan.iterations // 0 | tostring),
     ((($b.plan.per_spmm_s // $b.plan.per_iteration_s) * 1e6 * 10 | floor) / 10 | tostring),
     ((($b.csr.per_spmm_s // $b.csr.per_iteration_s) * 1e6 * 10 | floor) / 10 | tostring),
     (if $b.plan.break_even_calls < 0 then "-" else ($b.plan.break_even_calls|floor|tostring) end),
     $b.plan.detail] | @tsv' "$3"
}
printf '%-22s %-5s %8s %9s %9s %9s %9s %8s %8s %8s %6s %9s %9s %9s  %s\n' matrix app nnz tune_ms plan_ms \
  csr_ms eigen_ms csr/plan eig/plan sparse iters plan_us csr_us breakeven "plan (verdict)"
run() {  # name app args...
  local name=$1 app=$2
  shift 2
  local json=$out/$name.$app.json
  one() {  # backends args...: those back-ends in one process
    local backends=$1
    shift
    rm -rf "$out/plans"  # tuning counted: an empty tuning cache every run
    measure "$build/examples/waco-$app" "$@" --threads "$threads" --search "$search" \
      --tuning-share "${SHARE:-0.1}" ${ALWAYS_TUNE:+--always-tune} ${ADAPTIVE:+--adaptive} \
      --cache-dir "$out/plans" --json --backends "$backends"
  }
  # A csr run first, its output dropped: the csr baseline's machine probes (its serial bound,
  # its loop; once per user cache, 40-100 ms on bcsstk13 in double) are then stored before any
  # timed back-end, instead of being paid by whichever runs first (the plan's).
  one csr "$@" > /dev/null || true
  if [ -n "${SEPARATE:-}" ]; then
    # Each back-end in a process of its own, as an application runs one: in one process the
    # back-end timed first pays what the process does the first time (page faults of the
    # allocator's first large blocks, waco's code run for the first time), and on small solves
    # that is most of the difference between them.
    local b parts=()
    for b in plan csr eigen; do
      one "$b" "$@" > "$json.$b" || { rm -f "$json".*; return 1; }
      parts+=("$json.$b")
    done
    jq -s '.[0] + {backends: [.[].backends[]]}' "${parts[@]}" > "$json"
    rm -f "${parts[@]}"
  else
    one plan,csr,eigen "$@" > "$json"
  fi
  row "$name" "$app" "$json" | awk -F'\t' '{printf "%-22s %-5s %8s %9s %9s %9s %9s %8s %8s %8s %6s %9s %9s %9s  %s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15}'
}
for m in $spd; do
  f=$(file_of "$m")
  [ -n "$f" ] || { echo "skip $m: not in $data/matrices" >&2; continue; }
  run "$m" cg "$f" $cg_args
done
for f in "${graphs[@]}"; do
  [ -n "$f" ] || continue
  m=$(basename "$f"); m=${m%%.mtx*}
  run "$m" cg "$f" --laplacian $cg_args
  run "$m" gnn "$f" $gnn_args
done
echo "JSON per run in $out (plan.detail: the schedule and tune's verdict)"
