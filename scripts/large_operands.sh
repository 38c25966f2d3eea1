#!/usr/bin/env bash
# The large-operand set of issue 36: generated matrices of 15-30M nonzeros, one of each structure
# the generators make, whose CSR (190-340 MB in f32) is far beyond the last-level cache of the
# machines we run on (32 MiB), through `waco-hybrid ablate --roofline` (each configuration's
# winner, the csr schedule and the libraries side by side, replicated, with the STREAM bandwidth
# measured beside them), then `waco-hybrid report`, whose "beyond the LLC" section tables them
# apart from cache-resident matrices with each implementation's GB/s and share of STREAM.
# Six are generated (seeds no dataset recipe uses); three are real files of the held-out (test and
# validation) splits scaled up, `waco-hybrid generate --from FILE --copies K`: K copies on the block
# diagonal, so each row's pattern and the locality within a copy are the file's and only the
# working set grows. Their names end in -xK ("scaled up": say so wherever one is used).
#   usage: scripts/large_operands.sh KERNEL OUT_DIR [NAME...]
#     NAME: only these matrices (stencil2d stencil3d banded blocks rmat uniform bayer10-x200
#     email-Enron-x50 web-indochina-x200; default: all; the real ones need WACO_DATA_DIR
#     (default ../shared/data) and are skipped with a note when it is absent)
#   env: CONFIGS (default "hybrid,model-alone": the exhaustive search of a 20M-nonzero matrix
#        takes hours), THREADS (2), WACO_CPU_LOCK, WACO, EXTRA_ARGS (e.g. "--dense 16") as
#        scripts/ablation.sh takes them.
# Needs ~4 GB of disk for the matrices (Matrix Market text) and ~8 GB of memory for a tune.
# Resumable: run it again with the same OUT_DIR and it continues where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:?usage: scripts/large_operands.sh KERNEL OUT_DIR [NAME...]}
out=${2:?usage: scripts/large_operands.sh KERNEL OUT_DIR [NAME...]}
shift 2
waco=${WACO:-build/experiments/waco-hybrid}
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
case "$kernel" in spmv|spmm) ;; *) echo "error: the large-operand set is for spmv and spmm" >&2; exit 2;; esac
mkdir -p "$out/matrices"
data=${WACO_DATA_DIR:-../shared/data}/matrices
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(stencil2d stencil3d banded blocks rmat uniform bayer10-x200 email-Enron-x50 web-indochina-x200)
files=()
for name in "${names[@]}"; do
  case "$name" in
    stencil2d) args=(--kind stencil2d --nx 2000 --ny 2000 --seed 91001);;            # 4.0M rows, 20.0M nnz
    stencil3d) args=(--kind stencil3d --nx 160 --ny 160 --nz 160 --seed 91002);;     # 4.1M rows, 28.5M nnz
    banded) args=(--kind banded --rows 2000000 --bandwidth 5 --fill 1 --seed 91003);;  # 22.0M nnz
    blocks) args=(--kind blocks --rows 2000000 --block 8 --blocks 320000 --fill 1 --seed 91004);;  # 20.5M nnz
    rmat) args=(--kind rmat --scale 21 --edge-factor 8 --seed 91005);;              # 2.1M rows, ~15M nnz
    uniform) args=(--kind uniform --rows 2000000 --nnz 20000000 --seed 91006);;     # 20.0M nnz
    bayer10-x200) args=(--from "$data/bayer10.mtx.gz" --copies 200);;               # 2.7M rows, 19.0M nnz (scaled up)
    email-Enron-x50) args=(--from "$data/email-Enron.mtx.gz" --copies 50);;         # 1.8M rows, 18.4M nnz (scaled up)
    web-indochina-x200) args=(--from "$data/web-indochina-2004.mtx.gz" --copies 200);;  # 2.3M rows, 19.0M nnz (scaled up)
    *) echo "error: no large matrix '$name' (stencil2d stencil3d banded blocks rmat uniform" \
            "bayer10-x200 email-Enron-x50 web-indochina-x200)" >&2; exit 2;;
  esac
  if [ "${args[0]}" = --from ] && [ ! -f "${args[1]}" ]; then
    echo "note: ${args[1]} is absent (WACO_DATA_DIR): $name skipped" >&2
    continue
  fi
  f="$out/matrices/$name-large.mtx"
  [ -f "$f" ] || "$waco" generate "${args[@]}" -o "$f"  # written whole or not at all
  files+=("$f")
done
SPLITS="" FRESH=0 CONFIGS="${CONFIGS:-hybrid,model-alone}" EXTRA_FILES="${files[*]}" \
  EXTRA_ARGS="--roofline --bench-repeat 30 ${EXTRA_ARGS:-}" WACO="$waco" \
  scripts/ablation.sh "$kernel" "$out"
