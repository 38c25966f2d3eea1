#!/usr/bin/env bash
# ctest "cluster_collect" (label cluster): the Slurm scale-out end to end on a single-node Slurm.
# Starts scripts/slurm/local_cluster.sh in a scratch directory, submits a tiny collection
# (scripts/slurm/submit.sh: 2 shards of --mix 4, then the merge job), waits for the merge job,
# checks that the merged `dataset stats --json` holds 4 spmv matrices, stops the cluster.
#
# Usage: tests/cluster_collect.sh WACO_HYBRID_BINARY
# Exit codes: 0 pass, 1 fail, 77 skipped (Slurm not installed, not root, ...; the reason is printed).
# Every wait is bounded: WACO_CLUSTER_TEST_TIMEOUT seconds for the jobs (default 1500).
# Environment: WACO_CPU_LOCK (default /tmp/waco-cpu.lock; collect holds it exclusively while it
# measures a matrix, so that the test never times beside another measurement),
# WACO_CLUSTER_TEST_KEEP=1 keeps the scratch directory.
set -uo pipefail

SKIP=77
BIN=${1:-}
HERE=$(cd "$(dirname "$0")" && pwd)
SLURM_SCRIPTS=$HERE/../scripts/slurm
JOB_TIMEOUT=${WACO_CLUSTER_TEST_TIMEOUT:-1500}
CPU_LOCK=${WACO_CPU_LOCK:-/tmp/waco-cpu.lock}

skip() { echo "SKIP: $*"; exit $SKIP; }
fail() { echo "FAIL: $*"; exit 1; }

[ -n "$BIN" ] || fail "usage: $0 WACO_HYBRID_BINARY"
[ -x "$BIN" ] || fail "waco-hybrid binary not found: $BIN (build it first)"
command -v slurmctld >/dev/null || skip "slurmctld is not installed (Debian: apt-get install slurmctld slurmd slurm-client); the cluster test needs a local single-node Slurm"
command -v slurmd >/dev/null || skip "slurmd is not installed (apt-get install slurmd)"
command -v sbatch >/dev/null || skip "the Slurm client commands are not installed (apt-get install slurm-client)"
[ "$(id -u)" -eq 0 ] || skip "not root: slurmd must run as root to launch jobs"
command -v jq >/dev/null || fail "jq is needed to read dataset stats --json (scripts/setup.sh installs it)"

SCRATCH=$(mktemp -d /tmp/waco-cluster-test.XXXXXX)
export WACO_SLURM_DIR=$SCRATCH/slurm
# A port of its own, so that a local cluster started by hand (default 6917) is left alone.
export WACO_SLURM_PORT=${WACO_CLUSTER_TEST_PORT:-6927}
export SLURM_CONF=$WACO_SLURM_DIR/slurm.conf
OUT=$SCRATCH/out
ok=0

cleanup() {
  local rc=$?
  timeout 60 bash "$SLURM_SCRIPTS/local_cluster.sh" stop || echo "warning: stopping the local cluster failed"
  if (( ok )) && [ "${WACO_CLUSTER_TEST_KEEP:-0}" != 1 ]; then rm -rf "$SCRATCH"
  else echo "scratch kept for inspection: $SCRATCH"; fi
  exit $rc
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 1' INT TERM

t0=$SECONDS
echo "== starting a single-node Slurm in $WACO_SLURM_DIR"
timeout 120 bash "$SLURM_SCRIPTS/local_cluster.sh" start
rc=$?
if (( rc == SKIP )); then skip "the local Slurm cannot run here (reason above)"; fi
(( rc == 0 )) || fail "the local Slurm did not start (exit $rc); logs in $WACO_SLURM_DIR/log"
echo "cluster up in $((SECONDS - t0))s"

echo "== submitting 2 shards + merge"
# The node is exclusive per shard (collect.sbatch's default), so the shards run one after another
# here; --busy-wait 0 because this test's own jobs are the only Slurm jobs, and the CPU lock keeps
# them out of other measurements' way.
submit_out=$(timeout 60 bash "$SLURM_SCRIPTS/submit.sh" --kernel spmv --out "$OUT" --shards 2 \
    --bin "$BIN" --collect-sbatch "--time=00:20:00" --merge-sbatch "--time=00:05:00 --mem=1G" -- \
    --mix 4 --max-nnz 3000 --schedules 4 --rounds 2 --warmup 0 --busy-wait 0 \
    --cpu-lock "$CPU_LOCK" --cache-dir "$SCRATCH/kernels")
rc=$?
echo "$submit_out"
(( rc == 0 )) || fail "submit.sh failed (exit $rc)"
collect_job=$(sed -n 's/^COLLECT_JOB=//p' <<<"$submit_out")
merge_job=$(sed -n 's/^MERGE_JOB=//p' <<<"$submit_out")
[[ $collect_job =~ ^[0-9]+$ && $merge_job =~ ^[0-9]+$ ]] || fail "no job ids in submit.sh's output"

echo "== waiting for merge job $merge_job (at most ${JOB_TIMEOUT}s)"
t1=$SECONDS
job_state() { timeout 10 scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
state=""
while (( SECONDS - t1 < JOB_TIMEOUT )); do
  state=$(job_state "$merge_job")
  case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) break ;; esac
  sleep 2
done
echo "merge job $merge_job: ${state:-unknown} after $((SECONDS - t1))s"
timeout 10 squeue -a 2>/dev/null
for f in "$OUT"/logs/*.out; do [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; }; done
for t in 0 1; do echo "array task ${collect_job}_$t: $(job_state "${collect_job}_$t")"; done

if [ "$state" != COMPLETED ]; then
  timeout 10 scancel "$collect_job" "$merge_job" 2>/dev/null
  fail "merge job ended ${state:-in no known state} (timeout ${JOB_TIMEOUT}s); slurm logs in $WACO_SLURM_DIR/log"
fi

echo "== merged dataset"
for f in shard-0.jsonl.gz shard-1.jsonl.gz merged.sqlite merged-spmv.jsonl.gz merged-stats.json; do
  [ -s "$OUT/$f" ] || fail "missing output $OUT/$f"
done
jq -c '.kernels.spmv | {matrices, groups, statuses, sources, splits}' "$OUT/merged-stats.json"
matrices=$(jq -r '.kernels.spmv.matrices // 0' "$OUT/merged-stats.json")
[ "$matrices" = 4 ] || fail "merged dataset has $matrices spmv matrices, expected 4"
# Each shard holds its half (recipes k mod 2), and the export of the merge has all four.
for s in 0 1; do
  n=$("$BIN" dataset stats --json "$OUT/shard-$s.jsonl.gz" | jq -r '.kernels.spmv.matrices // 0')
  [ "$n" = 2 ] || fail "shard $s holds $n matrices, expected 2"
done
n=$("$BIN" dataset stats --json "$OUT/merged-spmv.jsonl.gz" | jq -r '.kernels.spmv.matrices // 0')
[ "$n" = 4 ] || fail "merged export holds $n matrices, expected 4"

ok=1
echo "PASS: 2 shards collected and merged by Slurm, 4 spmv matrices, $((SECONDS - t0))s in all"
