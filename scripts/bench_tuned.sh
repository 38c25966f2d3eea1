#!/usr/bin/env bash
# tune's winner against the libraries (issue 15's table): for each of the N largest matrices of a
# data folder (and its 3-D tensors for MTTKRP), `tune` searches the admissible set, then `bench`
# times csr, eigen and rsb-tuned (where they exist for the kernel; csf for MTTKRP) beside the winner,
# interleaved in one run. Ratios are median time / csr's median (lower is faster); the winner's
# GFLOP/s and GB/s are printed beside them. Tables to stdout, JSON per run to OUT_DIR.
#   usage: scripts/bench_tuned.sh [DATA_DIR] [N] [OUT_DIR]
#   env: SEARCH (random | exhaustive, default random), BUDGET (random: candidates, default 60),
#        KERNELS (default "spmv spmm:64 spmm:256 sddmm mttkrp"), THREADS (default 2),
#        DTYPE (f32 or f64, default f32: the value type of the tune and of every bench row),
#        WACO_CPU_LOCK (a file: every tune and bench holds it exclusively, so that nothing that
#        takes the same lock, such as a build, runs beside a measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
n=${2:-6}
out=${3:-bench-results/tuned}
search=${SEARCH:-random}
budget=${BUDGET:-60}
threads=${THREADS:-2}
dtype=${DTYPE:-f32}
kernels=${KERNELS:-"spmv spmm:64 spmm:256 sddmm mttkrp"}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
measure() { if [ -n "${WACO_CPU_LOCK:-}" ]; then flock -x "$WACO_CPU_LOCK" "$@"; else "$@"; fi; }
mapfile -t matrices < <(scripts/largest_matrices.sh "$data" "$n")
mapfile -t tensors < <(find "$data/tensors" -name '*.tns*' 2>/dev/null | sort)
search_args=(--search "$search")
[ "$search" = random ] && search_args+=(--budget "$budget")

printf '%-28s %-9s %9s %7s %7s %9s %7s %8s %7s  %s\n' file kernel csr_ms eigen rsb-tun \
  tuned GFLOP/s GB/s verdict winner
for spec in $kernels; do
  kernel=${spec%%:*}
  dense=""
  [ "$spec" != "$kernel" ] && dense=${spec#*:}
  if [ "$kernel" = mttkrp ]; then files=("${tensors[@]}"); impls=csf
  else files=("${matrices[@]}"); impls=csr; fi
  case $kernel in spmv | spmm) impls=csr,eigen,rsb-tuned ;; esac
  dense_args=()
  [ -n "$dense" ] && dense_args=(--dense "$dense")
  for f in "${files[@]}"; do
    name=$(basename "$f"); name=${name%%.*}
    tag="${name}_${kernel}${dense:+_$dense}_$dtype"
    measure "$waco" tune --no-plan-cache --kernel "$kernel" "${dense_args[@]}" "${search_args[@]}" \
      --dtype "$dtype" --threads "$threads" --db "$out/tuned.sqlite" --json -q "$f" \
      > "$out/$tag.tune.json"
    winner=$(jq -r '.best.schedule' "$out/$tag.tune.json")
    verdict=$(jq -r '.verdict' "$out/$tag.tune.json")
    measure "$waco" bench --kernel "$kernel" "${dense_args[@]}" --impl "$impls" --dtype "$dtype" \
      --schedule "$winner" --threads "$threads" --repeat 15 --json "$f" > "$out/$tag.bench.json"
    jq -r --arg v "$verdict" --arg w "$winner" --arg k "$spec" '
      .results as $r
      | ($r | map(select(.impl | startswith("gen:"))) | .[0]) as $g
      | def ratio(i): ($r | map(select(.impl == i)) | if length > 0 then .[0].ratio_to_first else null end);
      [ (.results[0].file | split("/") | last), $k,
        ($r[0].median_s * 1000), ratio("eigen"), ratio("rsb-tuned"), $g.ratio_to_first,
        $g.gflops, $g.effective_gbs, $v, $w ]
      | map(if . == null then "-" elif type == "number" then (. * 1000 | round / 1000 | tostring)
            else . end)
      | "\(.[0][0:28]) \(.[1]) \(.[2]) \(.[3]) \(.[4]) \(.[5]) \(.[6]) \(.[7]) \(.[8])  \(.[9])"' \
      "$out/$tag.bench.json" | awk '{printf "%-28s %-9s %9s %7s %7s %9s %7s %8s %7s ", $1,$2,$3,$4,$5,$6,$7,$8,$9;
                                     for (i = 10; i <= NF; ++i) printf " %s", $i; printf "\n"}'
  done
done
echo "(ratios: median time / csr's median (csf for mttkrp), lower is faster; $threads threads; $dtype;"
echo " search: $search${budget:+ budget $budget}; JSON in $out)"
