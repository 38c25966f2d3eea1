// A versioned integer encoding of SuperSchedule, the input form of the learned cost model
// (WACO section 4.2: the schedule embedding). Torch-free: plain integers and floats that the
// learned/ side turns into tensors.
//
// Every variable v of kernel_spec(kind).vars owns two loop slots whether it is split or not, so a
// kernel's code always has the same shape: slot 2v is v's outer loop (v1, or v itself when v is
// not split), slot 2v+1 its inner loop (v0; for an unsplit variable a loop of extent 1 placed
// directly after its outer slot). The encoding is a bijection between canonical valid schedules
// and the codes decode() accepts: decode(encode(s)) == canonicalize(s) and encode(decode(c)) == c,
// for schedules of U and C levels. An N (narrow) level encodes as C, the format the cost model
// knows (it was trained on U/C schedules; N differs only in 16-bit coordinates): a narrow schedule
// scores as its wide twin, and decode(encode(s)) == wide_twin(canonicalize(s)).
//
// Example (SpMV bcsr4x4, "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 chunk=32"):
//   split_log2 = {2, 2}, order = {0, 2, 1, 3}, format = {1, 1, 2, 1}, parallel = 0, chunk_log2 = 5.
// CSR SpMV in chunks of 128 ("order=i,k format=UC parallel=i chunk=128"; the csr shortcut's
// chunk=auto, like chunk=static, is scored as chunk 256 and has no code of its own):
//   split_log2 = {0, 0}, order = {0, 1, 2, 3}, format = {1, 0, 2, 0}, parallel = 0, chunk_log2 = 7.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"

namespace waco::codegen {

/// The encoding's version (bump on any change of the meaning or layout of ScheduleCode).
inline constexpr int kScheduleEncodingVersion = 1;

/// A SuperSchedule as integers. V = kernel_spec(kind).vars.size(); 2V loop slots: slot 2v is
/// variable v's outer loop (x1, or x itself when v is not split), slot 2v+1 its inner loop x0.
/// An unsplit variable's inner slot is a loop of extent 1 placed directly after its outer slot.
struct ScheduleCode {
  int version = kScheduleEncodingVersion;
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  std::vector<int> split_log2;  ///< per var, 0..16 (log2 of split size; 0 = not split)
  std::vector<int> order;       ///< 2V slot indices, outermost first (a permutation of 0..2V-1)
  /// Per slot: 0 = not a level of the sparse operand (a dense variable, or the inner slot of an
  /// unsplit variable), 1 = U, 2 = C (also N, see the file comment).
  std::vector<int> format;
  int parallel = 0;    ///< slot of the parallel loop (never the inner slot of an unsplit variable)
  int threads = 0;     ///< SuperSchedule::threads as is (0 = all cores)
  int chunk_log2 = 0;  ///< log2(chunk), 0..8

  // Written out rather than defaulted: the project builds as C++17.
  bool operator==(const ScheduleCode& o) const {
    return version == o.version && kind == o.kind && split_log2 == o.split_log2 &&
           order == o.order && format == o.format && parallel == o.parallel &&
           threads == o.threads && chunk_log2 == o.chunk_log2;
  }
  bool operator!=(const ScheduleCode& o) const { return !(*this == o); }
};

/// Largest split_log2 (log2 of kMaxSplit).
inline constexpr int kMaxSplitLog2 = 16;
/// Largest chunk_log2 (log2 of kMaxChunk).
inline constexpr int kMaxChunkLog2 = 8;
/// Number of thread categories (see categorical_fields).
inline constexpr int kThreadCategories = 9;

/// The code of canonicalize(s); a split-1 x1/x0 pair encodes as the merged loop. Throws
/// kernels::Error with validate()'s reasons when the canonical form is invalid.
ScheduleCode encode(const SuperSchedule& s);

/// The schedule of a code; the result is valid and canonical. Throws kernels::Error on a wrong
/// version, an unknown kernel, wrong field sizes, values out of range (including a format that
/// does not match the slot: 0 exactly for slots that are not sparse levels, and a parallel loop on
/// the inner slot of an unsplit variable), an order that is not a permutation, an unsplit variable
/// whose inner slot does not directly follow its outer slot, or a schedule validate() rejects.
SuperSchedule decode(const ScheduleCode& c);

/// The categorical fields in a fixed order for embedding tables: split_log2 (V values), format
/// (2V values), parallel (1), threads category (1: 0 for threads == 0, else
/// min(1 + floor(log2(threads)), 8)), chunk_log2 (1). Size 3V+3. Throws kernels::Error on a code
/// decode() would refuse for its shape or ranges.
std::vector<int> categorical_fields(const ScheduleCode& c);

/// The number of categories of each of those fields for a kernel (split 17, format 3,
/// parallel 2V, threads 9, chunk 9); same order and size as categorical_fields.
std::vector<int> categorical_cardinalities(kernels::KernelKind k);

/// The loop order as a row-major 2V x 2V permutation matrix (entry [position][slot] = 1.0f).
/// Throws kernels::Error when the order is not a permutation of 0..2V-1.
std::vector<float> order_matrix(const ScheduleCode& c);

/// {"version", "kernel", "split_log2", "order", "format", "parallel", "threads", "chunk_log2"}
nlohmann::json to_json(const ScheduleCode& c);

/// Inverse of to_json; a different version is refused with a kernels::Error naming both
/// versions. Also refuses unknown or missing keys, wrong types, an unknown kernel, and any code
/// decode() refuses.
ScheduleCode schedule_code_from_json(const nlohmann::json& j);

}  // namespace waco::codegen
