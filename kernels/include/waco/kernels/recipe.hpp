// Matrix recipes (issue 17, "dataset"): how to make one sparse operand again, bit for bit. A
// dataset stores recipes, not matrices: a generator with its parameters and seed, a Matrix Market
// file plus a seeded augmentation, or a seeded random 3-D tensor. make_matrix / make_tensor turn a
// recipe into its operand; to_json / from_json and the recipe file (one JSON object per line) store
// it.
//
// Augmentations (WACO, ASPLOS'23, enlarged its training set by resizing real patterns) come
// in a fixed order: submatrix, resize, block expansion, permutation. Every random choice
// comes from SplitMix64 (dense.hpp) keyed by the augmentation's seed and the step, never from a std
// distribution, so a recipe makes the same matrix with every standard library. default_mix draws
// its parameters with IEEE arithmetic (libm only in the powerlaw estimate, as the generator has
// it), so shards on different machines agree on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/kernels/generators.hpp"
#include "waco/kernels/sparse.hpp"

namespace waco::kernels {

/// Schema version of Recipe::to_json ("recipe_version").
inline constexpr int kRecipeVersion = 1;

/// Which rows and columns a permutation reorders. Symmetric applies one permutation to both
/// (square matrices only), so symmetry and the diagonal survive; Both draws two independent ones.
enum class Permutation { None, Rows, Columns, Both, Symmetric };

/// "none", "rows", "cols", "both", "symmetric".
const char* permutation_name(Permutation p);

/// Seeded changes to a matrix, each optional, applied in this order:
/// 1. submatrix: the window of sub_rows x sub_cols at a uniformly random offset (on the diagonal,
///    column offset = row offset, when sub_diagonal);
/// 2. resize by a factor f (WACO's pattern resizing): coordinate i -> floor(i * f); for f < 1
///    entries landing in one cell are merged (values summed); for f > 1 entry (i, j) moves to a
///    random cell of its image, rows floor(i f) .. floor((i + 1) f) - 1 by the same for columns
///    (images of distinct cells do not overlap), so nnz is kept;
/// 3. block expansion: each entry becomes a block x block dense block of its value;
/// 4. permutation of rows and/or columns, uniform (Fisher-Yates), values kept.
struct Augmentation {
  index_t sub_rows = 0;  ///< submatrix window rows; 0 (with sub_cols 0): no submatrix
  index_t sub_cols = 0;
  bool sub_diagonal = false;  ///< the window's column offset equals its row offset
  double resize = 1.0;        ///< factor f > 0; 1: no resizing
  index_t block = 1;          ///< block edge; 1: no block expansion
  Permutation permute = Permutation::None;
  std::uint64_t seed = 0;  ///< keys every random choice above

  bool has_submatrix() const { return sub_rows != 0 || sub_cols != 0; }
  /// True when no step changes the matrix.
  bool empty() const;
};

/// How to make one sparse operand again, bit for bit: a generator with its parameters and seed, or
/// a source file plus an augmentation and its seed. Recipes are stored; matrices are not.
struct Recipe {
  enum class Source { Generator, File, Tensor };  ///< Tensor: generate_tensor(dims, nnz, seed)
  Source source = Source::Generator;
  GeneratorSpec generator;    ///< Source::Generator
  std::string path;           ///< Source::File: .mtx/.mtx.gz (or .tns), stored verbatim
  std::vector<index_t> dims;  ///< Source::Tensor
  std::int64_t nnz = 0;       ///< Source::Tensor
  std::uint64_t seed = 0;     ///< Source::Tensor
  Augmentation augment;       ///< Generator and File: applied after making the matrix

  /// {"recipe_version": 1, "source": "generator" | "file" | "tensor", ...}: for a generator its
  /// kind, seed and exactly the parameters that kind reads ("generator": {...}); for a file its
  /// "path"; for a tensor "dims", "nnz", "seed"; "augment" with the steps present and its seed,
  /// omitted when empty. Keys are sorted (nlohmann::json), so the text form is stable.
  nlohmann::json to_json() const;
  /// The inverse of to_json. Throws Error naming the bad field (e.g. "generator.scale") for a
  /// missing, unknown or mistyped field, an unknown kind or source, or another version.
  static Recipe from_json(const nlohmann::json& j);
  /// Short human text: "rmat scale=14 ef=8 seed=3", "bcsstk13 permute=symmetric seed=5",
  /// "tensor 300x200x100 nnz=50000 seed=7"; a generator's augmentation follows " + ".
  std::string label() const;
};

/// Same operand: equal to_json() (so fields a generator kind does not read do not count).
bool operator==(const Recipe& a, const Recipe& b);
inline bool operator!=(const Recipe& a, const Recipe& b) { return !(a == b); }

/// Applies an augmentation to a canonical matrix; returns a canonical matrix. Throws Error when a
/// step does not fit the matrix (a window larger than it, a symmetric permutation of a rectangular
/// matrix, a result over the 32-bit limits). Values are kept, except that resizing down sums the
/// entries it merges and gives every zero it is left with (a cancellation, or merged stored
/// zeros) a nonzero value depending only on its coordinate, so the pattern is kept.
CooMatrix augment(const CooMatrix& a, const Augmentation& aug);

/// Makes the matrix (canonical, deterministic). A generator's values are never 0; a file's values
/// are the file's, stored zeros included (as read_matrix_market keeps them), so a file recipe
/// without augmentation has the same fingerprint as the file read directly (the held-out guard
/// compares those). Throws Error for a missing file, bad parameters, a tensor recipe or a .tns
/// file.
CooMatrix make_matrix(const Recipe& r);
/// Makes the tensor of a Source::Tensor recipe (canonical, values in (-1, 1), never 0), or reads
/// the FROSTT file of a Source::File recipe with a .tns / .tns.gz path (no augmentation allowed).
/// Throws Error for a matrix recipe.
CooTensor make_tensor(const Recipe& r);

/// An estimate of the recipe's nonzeros without making it: exact for uniform, stencils, tensors;
/// an upper bound for rmat, smallworld; the expectation for banded, blocks (Bernoulli fill) and
/// powerlaw (random degrees). A file's count comes from its Matrix Market size line (symmetric:
/// both triangles), scaled by the augmentation: a diagonal window keeps its larger share of the
/// rows or columns (as a banded matrix does), a plain window its share of the cells, resizing at
/// most all entries, blocks block^2 each. Throws Error for an unreadable file.
std::int64_t estimated_nnz(const Recipe& r);

/// The built-in default mix: `count` recipes drawn deterministically from `seed`, covering every
/// generator kind (uniform, banded, blocks, stencil2d, stencil3d, rmat, powerlaw, smallworld) with
/// parameter ranges giving 1k..1M rows and 10k..2M nonzeros (less when max_nnz is lower), skew and
/// block structure, plus (when `real_files` is non-empty) augmentations of those files, used in
/// turn. Recipes come in cycles of 8 generator slots (one per kind) and, with files, 4 file slots,
/// shuffled within each cycle: each cycle (from recipe 0) covers every kind, and
/// recipe k depends only on (seed, k, real_files), so a longer mix extends a shorter one.
/// `max_nnz` (>= 1000, e.g. 200k for fast collection) caps estimated_nnz of every generator
/// recipe, and for a file recipe an upper bound counted on the loaded file (the entries in its
/// window times block^2), so a file recipe's matrix never exceeds it. Reads each real file that a
/// recipe uses, one at a time (Error when one is unreadable).
std::vector<Recipe> default_mix(int count, std::uint64_t seed,
                                const std::vector<std::string>& real_files, std::int64_t max_nnz);
/// `count` 3-D tensor recipes for MTTKRP, drawn deterministically from `seed`: two modes of
/// 100..200k indices, the third the same or, half the time, short (16..2000, like a time mode);
/// 10k..2M nonzeros capped at max_nnz (>= 1000); density at most 1%.
std::vector<Recipe> default_tensor_mix(int count, std::uint64_t seed, std::int64_t max_nnz);

/// Reads a recipe file: one JSON object per line, '#' comments and blank lines allowed. Throws
/// Error "<path>:<line>: <problem>" for a malformed line, "<path>: ..." for an unreadable file.
std::vector<Recipe> read_recipes(const std::string& path);
/// Writes a recipe file (a '#' header line, then one recipe per line), atomically.
void write_recipes(const std::string& path, const std::vector<Recipe>& recipes);

/// Deterministic shard: recipe k (0-based index) belongs to shard (k mod n) — returns the indices
/// of shard i of n, ascending. Throws Error unless n >= 1 and 0 <= i < n.
std::vector<std::size_t> shard_indices(std::size_t count, int i, int n);

}  // namespace waco::kernels
