#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/README.md: clang-14, libFuzzer, ASan + UBSan) into their own build
# folder and runs each for SECONDS (default 60), one after the other.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (targets: build-fuzz/fuzz/fuzz_replay --list)
#
# Each target keeps its corpus in build-fuzz/fuzz-corpus/<target> between runs and is seeded from
# the project's own files, generated seeds (fuzz_replay --seeds) and ../shared/peer when present.
# Findings (crash-*, leak-*, timeout-*, oom-* files) go to build-fuzz/fuzz-findings/<target>/;
# replay one with `build/fuzz/fuzz_replay <target> FILE`, and once fixed keep it in
# tests/corpus/<target>/ (the test suite replays that folder). Every run appends a line to
# build-fuzz/fuzz-runs.tsv: time, target, seconds asked, executions, coverage (cov: edges),
# features, corpus size, findings, and the CPU seconds (user + system) the fuzzer process used (on
# a busy machine fewer than the seconds asked, which are wall-clock time). Exit status 1 when a run
# left a new finding.
# Environment: WACO_FUZZ_BUILD_DIR (build-fuzz), WACO_PEER_DIR (../shared/peer), CXX (clang++-14),
# FUZZ_ARGS (more libFuzzer options).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
build=${WACO_FUZZ_BUILD_DIR:-build-fuzz}
peer=${WACO_PEER_DIR:-../shared/peer}
cxx=${CXX:-clang++-14}
cc=${CC:-clang-14}
command -v "$cxx" >/dev/null || { echo "error: $cxx not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }

CC=$cc CXX=$cxx cmake -S . -B "$build" -DWACO_FUZZ=ON -DWACO_BUILD_TESTS=OFF -DWACO_NATIVE=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DWACO_WITH_RSB=OFF \
  -DWACO_WITH_LIKWID=OFF >/dev/null
cmake --build "$build" --target fuzzers -j"$(nproc)"
replay="$build/fuzz/fuzz_replay"

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <("$replay" --list | awk '{print $1}'); fi

# seeds <target> <dir>: the starting inputs of a target (small files only: libFuzzer's input size
# limit follows the largest seed).
seeds() {
  local t=$1 dir=$2 f n=0
  rm -rf "$dir"; mkdir -p "$dir"
  "$replay" --seeds "$t" "$dir" >/dev/null
  small() { find "$@" -type f -size -64k 2>/dev/null || true; }
  case $t in
    matrix_market)
      for f in $(small "$peer/mtx" examples -name '*.mtx*'); do
        n=$((n + 1)); cp "$f" "$dir/$n-$(basename "$f")"; done ;;
    matrix_market_gz)
      for f in $(small "$peer/mtx" -name '*.mtx'); do n=$((n + 1)); cp "$f" "$dir/$n-$(basename "$f")"; done ;;
    frostt)
      for f in $(small "$peer" ../shared/data -name '*.tns*'); do n=$((n + 1)); cp "$f" "$dir/$n-$(basename "$f")"; done
      printf '1 1 1 1.0\n2 3 1 -2.5\n1 1 1 0.5\n' >"$dir/small.tns"
      printf '# comment\n\n3 1 2 1\n1 2 3 2\n' >"$dir/comments.tns"
      printf '1 2 1.0\r\n2 1 2e-3\r\n' >"$dir/crlf.tns"
      printf '4 3 2 1 7\n1 1 1 1 1\n' >"$dir/order4.tns"
      printf '1 1 1 1.0\n2 3 1 -2.5\n' | gzip -c >"$dir/small.tns.gz" ;;
    dataset_export)
      for f in data/dataset/*.jsonl.gz; do
        { zcat "$f" || true; } | head -n 4 | awk -v d="$dir" -v b="$(basename "$f" .jsonl.gz)" \
          'length($0) < 65536 { print > (d "/" b "-" NR ".jsonl") }'
      done ;;
  esac
  return 0
}

status=0
for t in "${targets[@]}"; do
  exe="$build/fuzz/fuzz_$t"
  [ -x "$exe" ] || { echo "error: no fuzz target $t (fuzz_replay --list)" >&2; exit 2; }
  corpus="$build/fuzz-corpus/$t"; found="$build/fuzz-findings/$t"; seed_dir="$build/fuzz-seeds/$t"
  mkdir -p "$corpus" "$found"
  seeds "$t" "$seed_dir"
  dict=()
  case $t in
    matrix_market|matrix_market_gz) dict=(-dict=fuzz/dicts/matrix_market.dict) ;;
    frostt) dict=(-dict=fuzz/dicts/frostt.dict) ;;
    schedule_text) dict=(-dict=fuzz/dicts/schedule_text.dict) ;;
    schedule_json|recipe|tuning_cache|plan_file|dataset_export|hnsw_index|cache_probe) dict=(-dict=fuzz/dicts/json.dict) ;;
    cost_model) dict=(-dict=fuzz/dicts/cost_model.dict) ;;
  esac
  before=$(find "$found" -type f | wc -l)
  log="$build/fuzz-logs/$t-$(date +%Y%m%d-%H%M%S).log"
  mkdir -p "$build/fuzz-logs"
  echo "fuzz: $t for ${seconds}s (log $log)"
  # The readers' scratch files go to a RAM disk when there is one.
  tmp=${TMPDIR:-/tmp}; [ -d /dev/shm ] && tmp=/dev/shm
  rc=0
  TIMEFORMAT='%U %S'
  # One OpenMP thread: the fuzzer's CPU seconds are then one thread's fuzzing (with the default
  # team, two of hnsw_index's runs recorded 1.8-1.9 CPU-s a wall second, on both cores of a shared
  # machine, and did a quarter of the executions of a one-thread run).
  { time TMPDIR=$tmp OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
      UBSAN_OPTIONS=print_stacktrace=1 \
      "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$found/" "${dict[@]}" ${FUZZ_ARGS:-} "$corpus" "$seed_dir" "tests/corpus/$t" \
      >"$log" 2>&1; } 2>"$log.cpu" || rc=$?
  cpu=$(awk 'NF == 2 { printf "%.1f", $1 + $2 }' "$log.cpu")
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  after=$(find "$found" -type f | wc -l)
  size=$(find "$corpus" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$seconds" "${execs:-0}" \
    "${cov:-0}" "${ft:-0}" "$size" "$((after - before))" "${cpu:-0}" >>"$build/fuzz-runs.tsv"
  echo "fuzz: $t: ${execs:-0} executions, cov ${cov:-0}, ft ${ft:-0}, corpus $size, new findings $((after - before)), CPU ${cpu:-0} s (exit $rc)"
  if [ "$after" -gt "$before" ] || [ "$rc" -ne 0 ]; then
    status=1
    grep -m1 -A3 -E 'ERROR|FUZZ FINDING|runtime error|deadly signal' "$log" || true
  fi
done
exit $status
