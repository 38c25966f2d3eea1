// Reading and writing sparse and dense operands: Matrix Market (.mtx, .mtx.gz; coordinate and
// array) and FROSTT (.tns, .tns.gz). Gzip is detected from the file's magic bytes, not its name.
//
// Every malformed input throws Error with a message "<path>:<line>: <problem>" (line omitted when
// not applicable) and a hint; nothing crashes or hangs on bad input. Readers return canonical
// operands (sorted, duplicates summed). Writers write a temporary file next to the target and
// rename it into place, so a failed write never leaves a half-written result.
#pragma once

#include <cstdint>
#include <string>

#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/sparse.hpp"

namespace waco::kernels {

enum class Field { Real, Integer, Pattern };
enum class Symmetry { General, Symmetric, SkewSymmetric };

std::string_view field_name(Field f);        ///< "real", "integer", "pattern"
std::string_view symmetry_name(Symmetry s);  ///< "general", "symmetric", "skew-symmetric"

struct ReadOptions {
  bool drop_explicit_zeros = false;  ///< drop stored zeros (default: keep them as entries)
  bool allow_nonfinite = false;      ///< accept NaN / Inf values (default: refuse)
  /// The precision values are read in. F32: each value correctly rounded to float (what the
  /// single-precision kernels compute with; finite values beyond float's range are refused),
  /// duplicates summed in float. F64: each value as a double, exactly as the file gives it.
  Dtype dtype = Dtype::F32;
  /// Bytes one operand may need (input_memory_limit's estimate); 0: input_memory_limit().
  std::int64_t max_memory = 0;
};

/// The memory limit of the readers, in bytes: a file whose operand would need more (estimated
/// before it is allocated: 24 bytes per matrix entry after symmetric expansion, 8 per row and per
/// column; 4 (order + 1) x 2 + 16 per tensor entry and 8 per index of each mode; 8 per value of
/// an array file) is refused with an Error stating both. `opts.max_memory` when set, else
/// $WACO_MAX_INPUT_MEMORY (bytes, or with a K, M, G or T suffix: powers of 1024), else the memory
/// available now (available_memory_bytes: MemAvailable). Throws Error when the variable is
/// malformed.
std::int64_t input_memory_limit(const ReadOptions& opts = {});

/// What the reader saw, beside the operand itself.
struct SourceInfo {
  std::string path;
  Field field = Field::Real;
  Symmetry symmetry = Symmetry::General;
  std::int64_t stored_entries = 0;     ///< entry lines in the file
  std::int64_t duplicates_summed = 0;  ///< entry lines merged into an earlier line of the same
                                       ///< position (a symmetric file's mirrors not counted again)
  std::int64_t explicit_zeros = 0;     ///< zero-valued entries kept (after expansion)
  std::int64_t zeros_dropped = 0;      ///< zero-valued entries dropped (drop_explicit_zeros)
  std::int64_t bytes = 0;              ///< uncompressed bytes parsed
  bool gzip = false;
  double seconds = 0.0;                ///< wall time of the read
};

struct LoadedMatrix {
  CooMatrix matrix;
  SourceInfo source;
};

struct LoadedTensor {
  CooTensor tensor;
  SourceInfo source;
};

/// Reads a Matrix Market coordinate file (real, integer or pattern; general, symmetric or
/// skew-symmetric, expanded to both triangles; pattern values are 1.0). A symmetric file may
/// store either triangle (some real files store the upper one) but not a mix of both.
LoadedMatrix read_matrix_market(const std::string& path, const ReadOptions& opts = {});

/// Reads a Matrix Market array file (real or integer, general) into the requested layout.
DenseMatrix read_matrix_market_dense(const std::string& path, Layout layout = Layout::RowMajor,
                                     const ReadOptions& opts = {});

/// Reads a FROSTT .tns file: one entry per line, 1-based indices then the value; the order comes
/// from the first entry line; dims are the maximum index per mode. Lines starting with '#' are
/// comments.
LoadedTensor read_frostt(const std::string& path, const ReadOptions& opts = {});

/// True when the path names a FROSTT tensor (.tns or .tns.gz), false for anything else.
bool is_tensor_path(const std::string& path);

/// Writes a coordinate real general Matrix Market file. `comment` lines go after the banner.
void write_matrix_market(const std::string& path, const CooMatrix& a,
                         const std::string& comment = {});

/// Writes an array real general Matrix Market file (column-major, as the format requires).
void write_matrix_market_dense(const std::string& path, const DenseMatrix& m,
                               const std::string& comment = {});

/// Writes a FROSTT .tns file (1-based).
void write_frostt(const std::string& path, const CooTensor& t);

/// Throws Error unless `path` can be created or overwritten (checked before long work starts).
void check_writable(const std::string& path);

/// Writes text to a file atomically: into a temporary file of the same directory (unique per
/// process), then renamed into place, so readers see the old file or the whole new one, never a
/// part (a kill -9 mid-write leaves the old file). Error if it cannot.
void write_text_file(const std::string& path, const std::string& text);

/// The whole file as bytes; an empty string when it cannot be read (callers that need to tell
/// check first: the children's output files this reads may legitimately be empty).
std::string read_text_file(const std::string& path);

}  // namespace waco::kernels
