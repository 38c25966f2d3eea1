// Fixed-length, torch-free feature vectors of a sparse matrix or 3-D tensor, the inputs of the
// learned cost model's non-CNN encoders (an MLP over summary statistics instead of WACONet).
//
// Two sets:
//   - Stats: sizes, density, the moments of the row and column lengths (slice and fiber lengths
//     for tensors), diagonal and bandwidth shares, pattern symmetry, dense 8x8 blocks.
//     O(nnz + rows + cols), one thread.
//   - Signature: Stats plus the locality signature (signature/signature.hpp): nacs(T)/nnz and
//     nars(T)/nnz for T = 2^0..2^15, the distance from each nonzero to the next one of its row /
//     column in log bins, and the block fill ratios of bi x bk blocks, bi, bk in 1..32. For a
//     tensor, the signature part is that of its deduplicated projections onto (i, k) and (i, l).
//
// Every value is finite and roughly O(1): counts as log2(1 + x), shares and ratios in [0, 1],
// skewness clamped and scaled to [-1, 1]; the empty matrix and a 1x1 matrix are valid inputs.
// The vectors are deterministic (independent of the thread count). The statistics of a matrix's
// transpose are its own with the row and column entries swapped (exactly).
#pragma once

#include <string>
#include <vector>

#include "waco/kernels/sparse.hpp"
#include "waco/signature/signature.hpp"

namespace waco::learned {

/// Which fixed-length feature vector.
enum class FeatureSet { Stats, Signature };

/// "stats" / "signature".
std::string feature_set_name(FeatureSet set);
/// The set of a name; throws kernels::Error on unknown names, listing the known ones.
FeatureSet parse_feature_set(const std::string& name);

/// Length of the vector for a matrix (dims 2) or a 3-D tensor (dims 3); fixed per (set, dims).
/// Throws kernels::Error for other dims.
int feature_count(FeatureSet set, int dims);
/// Human-readable name of every entry (size feature_count), e.g. "log2_rows", "nacs_log2_T4".
std::vector<std::string> feature_names(FeatureSet set, int dims);

/// The features of a canonical matrix (sorted by (row, col), no repeats; throws InternalError
/// otherwise). threads: for compute_signature (0 = OpenMP's default); the result does not depend
/// on it. `signature`, when given, is a's locality signature computed already (e.g. by the
/// schedule space, heuristics::MatrixFacts): the Signature set reads it instead of computing it
/// again (the same values: the signature does not depend on how it was computed).
std::vector<float> matrix_features(FeatureSet set, const kernels::CooMatrix& a, int threads = 0,
                                   const signature::LocalitySignature* signature = nullptr);
/// The features of a canonical 3-D tensor (throws kernels::Error for another order).
std::vector<float> tensor_features(FeatureSet set, const kernels::CooTensor& t, int threads = 0);

}  // namespace waco::learned
