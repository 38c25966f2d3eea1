#!/usr/bin/env bash
# Which cache-size source gives the tile model the better tiles (issue portable-tune): the model's
# J-Stream choice with the LLC share each source implies, re-timed against the best point of the
# measured tile grid (tile --exhaustive --calibrate), per matrix and kernel. The capacities are
# per thread and usable (size / CPUs sharing it x the default fraction 0.5), as the default
# cache level llc-core computes them: from sysfs, CPUID and the probe of this machine
# (waco-hybrid info --caches --json), and the per-thread share an Intel VM's sysfs gives
# (105 MiB / 2 x 0.5). Prints one row per run: the model/best time ratio for each source.
#   usage: scripts/bench_cache_sources.sh OUT_DIR FILE...
#   env:   KERNELS ("spmm sddmm"), DENSE (256), THREADS (2), WACO_BUILD_DIR (build)
#   e.g.:  scripts/bench_cache_sources.sh bench-results/cache-sources $(scripts/largest_matrices.sh ../shared/data 6)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
out=$1
shift
kernels=${KERNELS:-spmm sddmm}
dense=${DENSE:-256}
threads=${THREADS:-2}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
command -v jq >/dev/null || { echo "error: bench_cache_sources.sh needs jq" >&2; exit 1; }
mkdir -p "$out"

caches=$("$waco" info --caches --json)
# Usable bytes per thread of a source's L3 (0 when the source gives none).
share() { jq -r --arg s "$1" --argjson t "$threads" '
  (if $s == "probe" then .probe.l3 else .[$s].l3 end) as $l3 |
  (if $s == "sysfs" and .sysfs_llc_sharing_cpus > 0 then .sysfs_llc_sharing_cpus
   else .chain.llc_sharing_cpus end) as $cpus |
  if $l3 > 0 then ($l3 / ([$cpus, 1] | max) * 0.5 | floor) else 0 end' <<< "$caches"; }
sources=(sysfs cpuid probe intel-vm)
declare -A bytes=([sysfs]=$(share sysfs) [cpuid]=$(share cpuid) [probe]=$(share probe)
                  [intel-vm]=$((105 * 1024 * 1024 / 2 / 2)))
calibrate=""
for s in "${sources[@]}"; do
  if [ "${bytes[$s]}" -gt 0 ]; then calibrate+="${calibrate:+,}${bytes[$s]}"; fi
done
echo "usable bytes per thread: sysfs ${bytes[sysfs]}, cpuid ${bytes[cpuid]}," \
     "probe ${bytes[probe]}, intel-vm ${bytes[intel-vm]} ($threads threads, dense $dense)"
bjson=$(for s in "${sources[@]}"; do echo "{\"$s\": ${bytes[$s]}}"; done | jq -s add)
printf '%-22s %-6s %8s %8s %8s %8s %8s\n' matrix kernel default sysfs cpuid probe intel-vm
for file in "$@"; do
  name=$(basename "$file" | sed 's/\.gz$//; s/\.mtx$//')
  for kernel in $kernels; do
    json="$out/${name}_${kernel}.json"
    "$waco" tile --kernel "$kernel" --dense "$dense" --threads "$threads" --exhaustive \
      --calibrate "$calibrate" --json "$file" > "$json"
    row=$(jq -r --argjson b "$bjson" '
      def ratio($c): [.exhaustive.capacity_calibration[]? | select(.capacity_bytes == $c)
                      | .time_ratio_to_best][0] // null;
      [(.exhaustive.model_to_best_time_ratio), ratio($b.sysfs), ratio($b.cpuid),
       ratio($b.probe), ratio($b["intel-vm"])] | map(if . == null then "-" else
       (. * 1000 | round / 1000 | tostring) end) | join(" ")' "$json")
    # shellcheck disable=SC2086
    printf '%-22s %-6s %8s %8s %8s %8s %8s\n' "$name" "$kernel" $row
  done
done
