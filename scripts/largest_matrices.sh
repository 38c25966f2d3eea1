#!/usr/bin/env bash
# Prints the paths of the N largest matrices (by nnz) listed in DATA_DIR/MANIFEST.tsv, one per line.
#   usage: scripts/largest_matrices.sh DATA_DIR N
set -euo pipefail
data=$1
n=$2
[ -f "$data/MANIFEST.tsv" ] || { echo "error: $data/MANIFEST.tsv not found" >&2; exit 1; }
awk -F'\t' 'NR > 1 && $1 == "matrix" { print $8 "\t" $4 }' "$data/MANIFEST.tsv" |
  sort -t$'\t' -k1,1nr | head -n "$n" | cut -f2 | sed "s#^#$data/#"
