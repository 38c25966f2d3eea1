#!/usr/bin/env bash
# The ablation of issue 21 on matrices never trained on: the real files whose family is in the
# cost model's validation and test splits (as `waco-hybrid evaluate` lists them) plus freshly
# generated matrices (seeds no dataset recipe uses), through every standard configuration of
# `waco-hybrid ablate`, then `waco-hybrid report`.
#   usage: scripts/ablation.sh KERNEL OUT_DIR
#   env: THREADS (default 2), SPLITS (default "validation test"), FRESH (default 1: add the
#        generated matrices; 0: real files only), CONFIGS (default: the standard set),
#        WACO_CPU_LOCK (a file held exclusively around every measuring child),
#        WACO (the waco-hybrid binary; default build/experiments/waco-hybrid), EXTRA_ARGS
#        (more ablate arguments, e.g. "--dense 64"), EXTRA_FILES (more inputs, space-separated)
# Resumable: run it again with the same OUT_DIR and it continues where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:?usage: scripts/ablation.sh KERNEL OUT_DIR}
out=${2:?usage: scripts/ablation.sh KERNEL OUT_DIR}
waco=${WACO:-build/experiments/waco-hybrid}
data=${WACO_DATA_DIR:-../shared/data}
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out/fresh"
files=()
for split in ${SPLITS-validation test}; do
  "$waco" evaluate --kernel "$kernel" --split "$split" --json -q > "$out/evaluate.$split.json"
  while read -r name; do
    f=$(find "$data" -name "$name" | head -1)
    [ -n "$f" ] && files+=("$f")
  done < <(jq -r '.rows[] | select(.family | startswith("file:")) | .matrix' "$out/evaluate.$split.json" |
           awk '{print $1}' | sort -u)
done
# gen NAME ARGS...: a generated input (made once; $ext: mtx, or tns for 3-D tensors).
ext=mtx
gen() { local f="$out/fresh/$1.$ext"; shift; [ -f "$f" ] || "$waco" generate "$@" -o "$f"; files+=("$f"); }
if [ "${FRESH:-1}" = 1 ] && [ "$kernel" = mttkrp ]; then
  # MTTKRP takes 3-D tensors: uniform ones of three shapes (seeds no dataset recipe uses).
  ext=tns
  gen cube200 --kind tensor --dims 200,200,200 --nnz 400000 --seed 90011
  gen long20k --kind tensor --dims 20000,5000,50 --nnz 300000 --seed 90012
  gen flat5k --kind tensor --dims 5000,5000,8 --nnz 200000 --seed 90013
elif [ "${FRESH:-1}" = 1 ]; then
  # One of each structure the generators make, at sizes like the dataset's (seed 90001+: the
  # dataset's default mix draws its seeds from a SplitMix64 stream, not small integers).
  gen banded60k --kind banded --rows 60000 --bandwidth 4 --fill 0.6 --seed 90001
  gen blocks30k --kind blocks --rows 30000 --block 8 --blocks 2500 --fill 0.7 --seed 90002
  gen powerlaw50k --kind powerlaw --rows 50000 --alpha 0.7 --beta 20000 --seed 90003
  gen rmat15 --kind rmat --scale 15 --edge-factor 6 --seed 90004
  gen stencil300 --kind stencil2d --nx 300 --ny 300 --seed 90005
fi
# EXTRA_FILES: more inputs (e.g. the real tensors, which the MTTKRP dataset's recipes augment).
# shellcheck disable=SC2206
[ -n "${EXTRA_FILES:-}" ] && files+=(${EXTRA_FILES})
[ ${#files[@]} -gt 0 ] || { echo "error: no matrices found (is $data there?)" >&2; exit 1; }
lock=()
[ -n "${WACO_CPU_LOCK:-}" ] && lock=(--cpu-lock "$WACO_CPU_LOCK")
configs=()
[ -n "${CONFIGS:-}" ] && configs=(--configs "$CONFIGS")
# shellcheck disable=SC2086
"$waco" ablate --kernel "$kernel" --db "$out/ablation.sqlite" --threads "${THREADS:-2}" "${lock[@]}" \
  "${configs[@]}" ${EXTRA_ARGS:-} "${files[@]}" | tee "$out/ablation-$kernel.txt"
"$waco" report --db "$out/ablation.sqlite" -o "$out/report.html"
echo "report: $out/report.html"
