#!/usr/bin/env bash
# Submit a sharded waco-hybrid data collection to Slurm: an array job of N shards
# (collect.sbatch, one shard per task) and a merge job (merge.sbatch) that runs after every shard
# succeeded (--dependency=afterok). Prints both job ids.
#
# Usage: scripts/slurm/submit.sh --kernel K --out DIR --shards N [options] [-- COLLECT ARGS...]
#
#   --kernel K          spmv, spmm, sddmm or mttkrp
#   --out DIR           run directory, visible on every node (shard databases, exports, logs,
#                       merged result); one directory per kernel
#   --shards N          number of shards = array tasks
#   --max-running M     at most M shards at once (--array=0-(N-1)%M)
#   --bin PATH          waco-hybrid binary as the nodes see it (default: this checkout's
#                       build/experiments/waco-hybrid, else waco-hybrid on PATH)
#   --sbatch "OPTS"     extra sbatch options for both jobs, e.g. "--partition=cpu --account=lab"
#   --collect-sbatch "OPTS"  extra sbatch options for the array job only (e.g. "--time=4:00:00")
#   --merge-sbatch "OPTS"    extra sbatch options for the merge job only
#   --dry-run           print the sbatch commands, submit nothing
#   -h, --help          this text
#   COLLECT ARGS        passed to `waco-hybrid collect` in every shard: a matrix source
#                       (--mix N, --recipes FILE, or files) and its options
#
# Example: 2,000 SpMV matrices of the default mix over 20 nodes, at most 10 at a time:
#   scripts/slurm/submit.sh --kernel spmv --out /shared/waco/spmv --shards 20 --max-running 10 \
#       --sbatch "--partition=cpu" -- --mix 2000 --max-nnz 200000 --schedules 100
#
# A shard's task runs on a whole node (--exclusive) with collect on all its cores. A failed or
# timed-out shard can be re-submitted alone and resumes where it stopped (see collect.sbatch);
# then submit the merge again:
#   sbatch --export=ALL,KERNEL=spmv,OUT=/shared/waco/spmv,SHARDS=20 scripts/slurm/merge.sbatch
# Output: DIR/merged.sqlite, DIR/merged-K.jsonl.gz, DIR/merged-stats.json, logs in DIR/logs.
# Exit codes: 0 submitted, 1 failure (e.g. no sbatch), 2 usage error.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
usage_error() { echo "submit.sh: error: $*" >&2; echo "Run 'scripts/slurm/submit.sh --help' for usage." >&2; exit 2; }

kernel="" out="" shards="" max_running="" bin="" dry=0
sb_both="" sb_collect="" sb_merge=""
while [ $# -gt 0 ]; do
  case $1 in
    --kernel) kernel=${2:-}; shift 2 || usage_error "--kernel needs a value" ;;
    --out) out=${2:-}; shift 2 || usage_error "--out needs a value" ;;
    --shards) shards=${2:-}; shift 2 || usage_error "--shards needs a value" ;;
    --max-running) max_running=${2:-}; shift 2 || usage_error "--max-running needs a value" ;;
    --bin) bin=${2:-}; shift 2 || usage_error "--bin needs a value" ;;
    --sbatch) sb_both=${2:-}; shift 2 || usage_error "--sbatch needs a value" ;;
    --collect-sbatch) sb_collect=${2:-}; shift 2 || usage_error "--collect-sbatch needs a value" ;;
    --merge-sbatch) sb_merge=${2:-}; shift 2 || usage_error "--merge-sbatch needs a value" ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage_error "unknown option '$1' (collect's own options go after --)" ;;
  esac
done
collect_args=("$@")

case $kernel in spmv|spmm|sddmm|mttkrp) ;; "") usage_error "--kernel is required" ;;
  *) usage_error "--kernel must be spmv, spmm, sddmm or mttkrp, not '$kernel'" ;; esac
[ -n "$out" ] || usage_error "--out is required"
[[ $shards =~ ^[1-9][0-9]*$ ]] || usage_error "--shards must be a positive integer"
[ -z "$max_running" ] || [[ $max_running =~ ^[1-9][0-9]*$ ]] || usage_error "--max-running must be a positive integer"
(( ${#collect_args[@]} > 0 )) || usage_error "no matrix source: give collect's arguments after --, e.g. -- --mix 200"

if [ -z "$bin" ]; then
  if [ -x "$REPO/build/experiments/waco-hybrid" ]; then bin=$REPO/build/experiments/waco-hybrid
  else bin=$(command -v waco-hybrid || true); fi
  [ -n "$bin" ] || { echo "submit.sh: error: no waco-hybrid binary (build it, or give --bin PATH)" >&2; exit 1; }
fi
[ -x "$bin" ] || { echo "submit.sh: error: --bin $bin is not executable" >&2; exit 1; }
bin=$(realpath "$bin")
out=$(realpath -m "$out")
# sbatch --export=NAME=value,... cannot carry commas inside values.
[[ $out != *,* && $bin != *,* ]] || { echo "submit.sh: error: paths with commas cannot be passed through sbatch --export: $out $bin" >&2; exit 1; }

if (( !dry )) && ! command -v sbatch >/dev/null; then
  echo "submit.sh: error: sbatch not found: this needs a Slurm cluster's client commands on PATH" \
       "(Debian: apt-get install slurm-client). To try it on this machine, start a single-node" \
       "cluster with scripts/slurm/local_cluster.sh start." >&2
  exit 1
fi

array="0-$((shards - 1))${max_running:+%$max_running}"
env_export="ALL,KERNEL=$kernel,OUT=$out,SHARDS=$shards,WACO_BIN=$bin"
# shellcheck disable=SC2206  # the --*sbatch values are option lists, split on purpose
collect_cmd=(sbatch --parsable --array="$array" --export="$env_export"
             --output="$out/logs/collect-%A_%a.out" $sb_both $sb_collect
             "$HERE/collect.sbatch" "${collect_args[@]}")
# shellcheck disable=SC2206
merge_cmd=(sbatch --parsable --export="$env_export" --output="$out/logs/merge-%j.out"
           $sb_both $sb_merge)

if (( dry )); then
  printf '%q ' "${collect_cmd[@]}"; echo
  printf '%q ' "${merge_cmd[@]}" --dependency=afterok:'<array job>' "$HERE/merge.sbatch"; echo
  exit 0
fi

mkdir -p "$out/logs"
collect_id=$("${collect_cmd[@]}")
collect_id=${collect_id%%;*}   # --parsable prints "id" or "id;cluster"
[[ $collect_id =~ ^[0-9]+$ ]] || { echo "submit.sh: error: sbatch printed no job id: '$collect_id'" >&2; exit 1; }
if ! merge_id=$("${merge_cmd[@]}" --dependency="afterok:$collect_id" --kill-on-invalid-dep=yes \
                "$HERE/merge.sbatch"); then
  echo "submit.sh: error: the merge job was not submitted; the array job $collect_id runs anyway" \
       "(cancel it with: scancel $collect_id)" >&2
  exit 1
fi
merge_id=${merge_id%%;*}
echo "submit.sh: collect array job $collect_id ($shards shard(s) of $kernel, tasks ${collect_id}_[$array])"
echo "submit.sh: merge job $merge_id (runs after every shard succeeded)"
echo "submit.sh: output in $out (logs in $out/logs); watch with: squeue -j $collect_id,$merge_id"
echo "COLLECT_JOB=$collect_id"
echo "MERGE_JOB=$merge_id"
