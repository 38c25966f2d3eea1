// Sparse operands: COO and CSR matrices and COO tensors, the currency of every stage.
//
// Indices are 32-bit (index_t); readers parse 64-bit and refuse inputs that do not fit.
// Values are kept in double, exactly as read or generated; each implementation stores them in its
// problem's value type (values.hpp: float or double). References accumulate in double.
// A CooMatrix / CooTensor is *canonical* when its entries are sorted lexicographically by
// coordinate (row-major for matrices) with no repeated coordinate. Readers and generators return
// canonical operands, so the order of a canonical COO is also the order of its CSR / CSF.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "waco/kernels/values.hpp"

namespace waco::kernels {

using index_t = std::int32_t;
/// Largest dimension or entry count that 32-bit storage can hold.
inline constexpr std::int64_t kMaxIndex = std::numeric_limits<index_t>::max();

/// A sparse matrix in coordinate form. Invariant (when canonical): sorted by (row, col), unique.
struct CooMatrix {
  index_t rows = 0;
  index_t cols = 0;
  std::vector<index_t> row;
  std::vector<index_t> col;
  std::vector<double> val;

  std::int64_t nnz() const { return static_cast<std::int64_t>(val.size()); }
};

/// A sparse tensor of any order in coordinate form; idx[m][e] is the mode-m index of entry e.
struct CooTensor {
  std::vector<index_t> dims;
  std::vector<std::vector<index_t>> idx;
  std::vector<double> val;

  int order() const { return static_cast<int>(dims.size()); }
  std::int64_t nnz() const { return static_cast<std::int64_t>(val.size()); }
};

/// Compressed sparse rows with 32-bit positions and coordinates.
struct CsrMatrix {
  index_t rows = 0;
  index_t cols = 0;
  std::vector<index_t> rowptr;  ///< rows + 1 entries
  std::vector<index_t> colidx;
  std::vector<double> val;

  std::int64_t nnz() const { return static_cast<std::int64_t>(val.size()); }
};

/// Sorts the entries by (row, col) and sums repeated coordinates, each addition rounded to
/// `sum_in` (F32: as single-precision values always were, so the fingerprints of such operands
/// did not change when values moved to double). Returns how many entries were merged into an
/// earlier one (0 when there were no duplicates). O(nnz + rows) (counting sort).
std::int64_t canonicalize(CooMatrix& a, Dtype sum_in = Dtype::F32);
/// Same for a tensor (lexicographic order over the modes). Returns the number of merged entries.
std::int64_t canonicalize(CooTensor& t, Dtype sum_in = Dtype::F32);

/// True when sorted by coordinate with no repeats.
bool is_canonical(const CooMatrix& a);
bool is_canonical(const CooTensor& t);

/// Checks dimensions and that every coordinate is in range; throws InternalError otherwise.
void check_bounds(const CooMatrix& a);
void check_bounds(const CooTensor& t);

/// Room for n entries in each of a's arrays, a large one on transparent huge pages
/// (reserve_huge, huge_pages.hpp): for a matrix about to be filled.
void reserve_entries(CooMatrix& a, std::size_t n);

/// CSR of a canonical COO matrix, in O(nnz + rows). Precondition: is_canonical(a).
CsrMatrix to_csr(const CooMatrix& a);
/// The row pointers of a canonical COO matrix's CSR (rows + 1 entries; its column indices are
/// a.col, in the same order): what a format in another value type needs of to_csr, without a
/// copy of the values in double. Precondition: is_canonical(a).
std::vector<index_t> row_pointers(const CooMatrix& a);

/// A 64-bit content fingerprint of a canonical operand (dimensions, coordinates and the bits of
/// the values rounded to float), stable across runs and platforms: two files with the same
/// canonical content match. Values that differ only beyond float's precision share a
/// fingerprint (it names the matrix for results and caches, whose timings do not depend on them;
/// before values were kept in double it was the same hash of the float values).
std::uint64_t fingerprint(const CooMatrix& a);
std::uint64_t fingerprint(const CooTensor& t);
/// A 64-bit hash as 16 lower-case hex digits.
std::string hex16(std::uint64_t v);
/// The fingerprint as 16 lower-case hex digits (how results, datasets and exclusion lists name it).
std::string fingerprint_hex(const CooMatrix& a);
std::string fingerprint_hex(const CooTensor& t);

/// A 64-bit digest of the same content as fingerprint (dimensions, coordinates, values rounded
/// to float), about 8x as fast: four independent chains over the entries where fingerprint's
/// one chain waits ~30 cycles an entry (an adaptive plan's first step asked the tuning cache
/// under the fingerprint: 13-39 csr calls of SpMV, most of its choice). What the tuning cache
/// files decisions under (heuristics::TuningKey); unlike fingerprint, which datasets, results and
/// exclusion lists keep, it may change with the tuning cache's layout version.
std::uint64_t content_key(const CooMatrix& a);
std::uint64_t content_key(const CooTensor& t);
/// content_key as 16 lower-case hex digits.
std::string content_key_hex(const CooMatrix& a);
std::string content_key_hex(const CooTensor& t);

/// The transpose, canonical.
CooMatrix transpose(const CooMatrix& a);

}  // namespace waco::kernels
