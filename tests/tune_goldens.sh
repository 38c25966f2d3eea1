#!/usr/bin/env bash
# Goldens of `waco-hybrid tune --json` through the ScriptedRunner (issue 34: recorded before the
# tune pipeline moves into its own library, equal after it). Every case tunes
# examples/bcsstk13.mtx.gz (SpMV, 2 threads, the tile model's cache pinned to 1 MiB) with the
# timings of tests/goldens/tune/script.json, in a fresh database and tuning cache, normalizes the
# report with tests/goldens/tune/normalize.jq (wall-clock times, dates, paths and the machine
# out) and compares it with tests/goldens/tune/<case>.json.
#
# Usage: tune_goldens.sh WACO SRC OUT [--record]
#   WACO: the waco-hybrid binary; SRC: the source tree; OUT: a scratch folder.
#   --record: write the goldens instead, from two runs of each case that must agree (the
#   determinism the comparison relies on). Record only for a deliberate change of the report,
#   and say so in the commit.
# Exit 0: all equal; 1: a difference (shown, the actual reports left in OUT); 77: no jq (skip).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 WACO SRC OUT [--record]" >&2
  exit 2
fi
waco=$1 src=$2 out=$3 mode=${4:-check}
command -v jq >/dev/null || { echo "skip: jq is not installed"; exit 77; }
goldens=$src/tests/goldens/tune
matrix=$src/examples/bcsstk13.mtx.gz
mkdir -p "$out"

# name|tune arguments. A name starting with "cache-hit" runs its tune twice in one folder and keeps
# the second report (the decision from the tuning cache). @G@ is the goldens' folder.
cases=(
  "search-model|--search model"
  "search-anns|--search anns"
  "search-exhaustive|--search exhaustive"
  "search-random|--search random --budget 40 --seed 4"
  "search-bandit|--search bandit --budget 30 --seed 4"
  "schedules|--schedules @G@/schedules.txt"
  "expected-calls-worth-it|--expected-calls 1000000000"
  "expected-calls-not-worth-it|--expected-calls 10"
  "confirm-0|--confirm 0"
  "measure-first|--measure-first"
  "explain|--search random --budget 20 --seed 9 --explain"
  "cache-hit|--search model"
)

# run NAME ARGS DIR: the normalized report of one case on stdout.
run() {
  local name=$1 args=${2//@G@/$goldens} dir=$3 n=1
  rm -rf "$dir"
  mkdir -p "$dir"
  case $name in cache-hit*) n=2 ;; esac
  for _ in $(seq "$n"); do
    # shellcheck disable=SC2086  # the case's arguments are words
    # A data folder of its own: a calibration in the user's (tune/calibration.hpp) is not read.
    XDG_DATA_HOME="$dir/data" "$waco" tune --kernel spmv --json --quiet --threads 2 --cache-bytes 1M \
      --db "$dir/results.sqlite" --plan-cache "$dir/plans" \
      --runner "scripted:$goldens/script.json" $args "$matrix" >"$dir/report.json" \
      2>"$dir/stderr.txt" ||
      { echo "$name: tune failed:" >&2; cat "$dir/stderr.txt" >&2; return 1; }
  done
  jq -S -f "$goldens/normalize.jq" "$dir/report.json"
}

# The cost model's scores are floats from Eigen products whose blocking follows the vector width
# (-march=native): on another vector ISA near-tied schedules can swap ranks. The cases a model
# ranks are compared only on the ISA they were recorded on (isa.txt); the others everywhere.
isa() {
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then echo avx512
  elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then echo avx2
  else echo other; fi
}
model_ranked() {
  case $1 in search-random* | search-exhaustive* | search-bandit* | schedules* | explain*) return 1 ;; esac
  return 0
}
recorded_isa=$(cat "$goldens/isa.txt" 2>/dev/null || echo unknown)
this_isa=$(isa)

failed=0
for c in "${cases[@]}"; do
  name=${c%%|*} args=${c#*|}
  if [ "$mode" != --record ] && model_ranked "$name" && [ "$recorded_isa" != "$this_isa" ]; then
    echo "$name: skipped (model-ranked; recorded on $recorded_isa, this CPU is $this_isa)"
    continue
  fi
  if [ "$mode" = --record ]; then
    run "$name" "$args" "$out/$name.1" >"$out/$name.1.json"
    run "$name" "$args" "$out/$name.2" >"$out/$name.2.json"
    if ! diff -u "$out/$name.1.json" "$out/$name.2.json"; then
      echo "$name: two runs differ: not recorded" >&2
      failed=1
      continue
    fi
    cp "$out/$name.1.json" "$goldens/$name.json"
    echo "$name: recorded"
  else
    run "$name" "$args" "$out/$name" >"$out/$name.json"
    if diff -u "$goldens/$name.json" "$out/$name.json"; then
      echo "$name: equal"
    else
      echo "$name: differs from $goldens/$name.json (actual: $out/$name.json)" >&2
      failed=1
    fi
  fi
done
[ "$mode" = --record ] && [ $failed = 0 ] && echo "$this_isa" >"$goldens/isa.txt"
exit $failed
