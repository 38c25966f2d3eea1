// Fixed-length feature vectors of sparse matrices and 3-D tensors (matrix_features.hpp); no torch.
//
// One code path gives both the values and the names (a Sink that records either), so the two
// cannot drift apart; feature_count is a constant per (set, dims) checked against that path.
#include "waco/learned/matrix_features.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "waco/kernels/error.hpp"
#include "waco/signature/signature.hpp"

namespace waco::learned {

using kernels::CooMatrix;
using kernels::CooTensor;
using kernels::index_t;

namespace {

// Entry counts per part (see the add_* functions below).
constexpr int kLengthStats = 10;                           // add_length_stats
constexpr int kMatrixStats = 5 + 2 * kLengthStats + 7;     // add_matrix_stats
constexpr int kPow2Steps = 16;                             // T = 2^0..2^15, distance bins
constexpr int kBlockSides = 6;                             // 1, 2, 4, 8, 16, 32
constexpr int kSignaturePart = 4 * kPow2Steps + kBlockSides * kBlockSides;  // add_signature_part
constexpr int kTensorStats = 6 + 2 * kLengthStats;         // add_tensor_stats
constexpr int kProjectionPart = 1 + kSignaturePart;        // add_projection

static_assert(kBlockSides == 6 && (1 << (kBlockSides - 1)) == signature::kMaxBlock,
              "block sides follow signature::kMaxBlock");

/// Collects the values (as float) or the names of the features, in order.
class Sink {
 public:
  explicit Sink(bool names) : record_names_(names) {}

  void add(const std::string& name, double value) {
    WACO_ASSERT(std::isfinite(value), "feature " + name + " is not finite");
    values_.push_back(static_cast<float>(value));
    if (record_names_) names_.push_back(name);
  }
  std::vector<float>& values() { return values_; }
  std::vector<std::string>& names() { return names_; }

 private:
  bool record_names_;
  std::vector<float> values_;
  std::vector<std::string> names_;
};

double log2p1(double x) { return std::log2(1.0 + x); }

/// Bits needed for x >= 0 (0 for 0): floor(log2 x) + 1.
int bit_width(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

double ratio(double num, double den) { return den > 0.0 ? num / den : 0.0; }

/// log2 of the density nnz / cells, scaled by 1/32 (a 2^31 x 2^31 matrix with one nonzero gives
/// -1.94); without nonzeros, that of a single one in cells + 1.
double log2_density_scaled(std::int64_t nnz, const std::vector<double>& dims) {
  double cells_log2 = 0.0;
  double cells = 1.0;
  for (double d : dims) {
    cells_log2 += d > 0.0 ? std::log2(d) : 0.0;
    cells *= d;
  }
  if (nnz > 0) return (std::log2(static_cast<double>(nnz)) - cells_log2) / 32.0;
  return -log2p1(cells) / 32.0;
}

/// The distribution of line lengths: hist[v] = how many lines hold v entries (hist[0] includes
/// the empty lines). From the histogram alone, so two equal multisets give identical values.
void add_length_stats(Sink& s, const std::string& p, const std::vector<std::int64_t>& hist) {
  double n = 0.0, total = 0.0;
  std::int64_t max_len = 0;
  for (std::size_t v = 0; v < hist.size(); ++v) {
    if (hist[v] == 0) continue;
    n += static_cast<double>(hist[v]);
    total += static_cast<double>(v) * static_cast<double>(hist[v]);
    max_len = static_cast<std::int64_t>(v);
  }
  double mean = 0.0, sd = 0.0, skew = 0.0, empty = 0.0, top = 0.0, gini = 0.0, lmean = 0.0,
         lsd = 0.0;
  if (n > 0.0) {
    mean = total / n;
    double m2 = 0.0, m3 = 0.0;
    for (std::size_t v = 0; v < hist.size(); ++v) {
      if (hist[v] == 0) continue;
      const double c = static_cast<double>(hist[v]);
      const double d = static_cast<double>(v) - mean;
      m2 += c * d * d;
      m3 += c * d * d * d;
      lmean += c * log2p1(static_cast<double>(v));
    }
    m2 /= n;
    m3 /= n;
    lmean /= n;
    sd = std::sqrt(m2);
    skew = sd > 0.0 ? std::clamp(m3 / (sd * sd * sd), -10.0, 10.0) : 0.0;
    for (std::size_t v = 0; v < hist.size(); ++v) {
      if (hist[v] == 0) continue;
      const double d = log2p1(static_cast<double>(v)) - lmean;
      lsd += static_cast<double>(hist[v]) * d * d;
    }
    lsd = std::sqrt(lsd / n);
    empty = static_cast<double>(hist[0]) / n;
    if (total > 0.0) {
      // Share of the entries in the ceil(1%) longest lines.
      std::int64_t lines = 0;
      for (std::int64_t v = 0; v < static_cast<std::int64_t>(hist.size()); ++v) lines += hist[v];
      std::int64_t k = (lines + 99) / 100;
      double in_top = 0.0;
      for (std::int64_t v = max_len; v >= 1 && k > 0; --v) {
        const std::int64_t take = std::min(k, hist[v]);
        in_top += static_cast<double>(take) * static_cast<double>(v);
        k -= take;
      }
      top = in_top / total;
      // Gini = sum_i (2i - n - 1) x_(i) / (n sum x) over the ascending order; a run of c equal
      // values with `before` smaller and `after` larger ones contributes v c (before - after).
      std::int64_t before = 0;
      double g = 0.0;
      for (std::int64_t v = 0; v < static_cast<std::int64_t>(hist.size()); ++v) {
        const std::int64_t c = hist[v];
        if (c == 0) continue;
        const std::int64_t after = lines - before - c;
        g += static_cast<double>(v) * static_cast<double>(c) * static_cast<double>(before - after);
        before += c;
      }
      gini = std::clamp(g / (n * total), 0.0, 1.0);
    }
  }
  s.add(p + "len_mean_log2", log2p1(mean));
  s.add(p + "len_std_log2", log2p1(sd));
  s.add(p + "len_max_log2", log2p1(static_cast<double>(max_len)));
  s.add(p + "len_cv_log2", log2p1(ratio(sd, mean)));
  s.add(p + "len_skew_div10", skew / 10.0);
  s.add(p + "empty_share", empty);
  s.add(p + "top1pct_share", top);
  s.add(p + "gini", gini);
  s.add(p + "loglen_mean", lmean);
  s.add(p + "loglen_std", lsd);
}

/// Histogram of the lengths of `lengths` (one per line).
template <class T>
std::vector<std::int64_t> length_histogram(const T* lengths, std::size_t n) {
  T max_len = 0;
  for (std::size_t k = 0; k < n; ++k) max_len = std::max(max_len, lengths[k]);
  std::vector<std::int64_t> hist(static_cast<std::size_t>(max_len) + 1, 0);
  for (std::size_t k = 0; k < n; ++k) ++hist[static_cast<std::size_t>(lengths[k])];
  return hist;
}
template <class T>
std::vector<std::int64_t> length_histogram(const std::vector<T>& lengths) {
  return length_histogram(lengths.data(), lengths.size());
}

void check_matrix(const CooMatrix& a) {
  kernels::check_bounds(a);
  WACO_ASSERT(kernels::is_canonical(a), "matrix features need a canonical matrix");
}

/// Sizes, density, row and column length statistics, diagonal / bandwidth shares, pattern
/// symmetry, 8x8 blocks. O(nnz + rows + cols).
void add_matrix_stats(Sink& s, const CooMatrix& a) {
  const std::int64_t nnz = a.nnz();
  const double dnnz = static_cast<double>(nnz);
  const double rows = a.rows, cols = a.cols;
  s.add("log2_rows", log2p1(rows));
  s.add("log2_cols", log2p1(cols));
  s.add("log2_nnz", log2p1(dnnz));
  s.add("log2_density_div32", log2_density_scaled(nnz, {rows, cols}));
  s.add("density", ratio(dnnz, rows * cols));

  // Row starts (row-major input) and column lengths; a column holds fewer than 2^31 entries
  // (rows are 32-bit), so its length is 4 bytes: at 20M nonzeros on 4M rows the statistics
  // hold 48 MB at their peak, not the 176 MB of 64-bit pointers and a transposed row list.
  std::vector<std::int64_t> rowptr(static_cast<std::size_t>(a.rows) + 1, 0);
  std::int64_t diag = 0, band16 = 0, dist_sum = 0, bits_sum = 0;
  {
    std::vector<std::int32_t> col_len(static_cast<std::size_t>(a.cols), 0);
    for (std::int64_t e = 0; e < nnz; ++e) {
      const index_t r = a.row[e], c = a.col[e];
      ++rowptr[static_cast<std::size_t>(r) + 1];
      ++col_len[static_cast<std::size_t>(c)];
      const std::int64_t d = std::abs(static_cast<std::int64_t>(r) - c);
      diag += d == 0;
      band16 += d <= 16;
      dist_sum += d;
      bits_sum += bit_width(static_cast<std::uint64_t>(d));
    }
    add_length_stats(s, "row_", length_histogram(rowptr.data() + 1, static_cast<std::size_t>(a.rows)));
    add_length_stats(s, "col_", length_histogram(col_len.data(), col_len.size()));
  }
  for (std::size_t i = 1; i < rowptr.size(); ++i) rowptr[i] += rowptr[i - 1];

  const std::int64_t side = std::max<std::int64_t>(a.rows, a.cols);
  s.add("diag_share", ratio(static_cast<double>(diag), dnnz));
  s.add("band16_share", ratio(static_cast<double>(band16), dnnz));
  s.add("dist_mean", ratio(static_cast<double>(dist_sum), dnnz * static_cast<double>(side)));
  s.add("dist_bits_mean",
        ratio(static_cast<double>(bits_sum),
              dnnz * bit_width(static_cast<std::uint64_t>(std::max<std::int64_t>(side, 1)))));

  // Pattern symmetry: share of the entries (i, j) whose mirror (j, i) is an entry too. Read in
  // row order, the entries ask row j "do you hold column i?" with i never decreasing, so one
  // cursor per row (an offset into it) walks each row once: O(nnz), no transposed copy.
  std::int64_t mirrored = 0;
  {
    std::vector<std::int32_t> seen(static_cast<std::size_t>(a.rows), 0);
    const index_t n = std::min(a.rows, a.cols);
    const std::int64_t upto = rowptr[static_cast<std::size_t>(n)];  // the entries of rows < n
    const index_t* col = a.col.data();
    for (std::int64_t e = 0; e < upto; ++e) {
      const index_t i = a.row[e], j = col[e];
      if (j >= a.rows) continue;
      const std::int64_t start = rowptr[static_cast<std::size_t>(j)];
      const std::int64_t end = rowptr[static_cast<std::size_t>(j) + 1];
      std::int64_t q = start + seen[static_cast<std::size_t>(j)];
      while (q < end && col[q] < i) ++q;
      mirrored += q < end && col[q] == i;
      seen[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(q - start);
    }
  }
  s.add("pattern_symmetry", ratio(static_cast<double>(mirrored), dnnz));

  // 8x8 blocks aligned at multiples of 8: the fill of the nonempty ones, and the share of the
  // entries in blocks at least half full (edge blocks counted by their positions in the matrix).
  std::int64_t nonempty = 0, dense_nnz = 0;
  {
    // Per panel of 8 rows: its entries (a run, row-major input), counted per block column; the
    // blocks it touched listed without a branch (the list has room for every block column).
    const std::size_t block_cols = (static_cast<std::size_t>(a.cols) + 7) / 8;
    std::vector<std::int32_t> count(block_cols, 0);
    std::vector<index_t> touched(block_cols + 1);
    const index_t* row = a.row.data();
    const index_t* col = a.col.data();
    std::int32_t* cnt = count.data();
    index_t* list = touched.data();
    for (std::int64_t e = 0; e < nnz;) {
      const index_t panel = row[e] >> 3;
      std::size_t listed = 0;
      std::int64_t f = e;
      for (; f < nnz && (row[f] >> 3) == panel; ++f) {
        const index_t b = col[f] >> 3;
        list[listed] = b;
        listed += cnt[b]++ == 0;
      }
      e = f;
      const std::int64_t h = std::min<std::int64_t>(8, std::int64_t{a.rows} - 8 * std::int64_t{panel});
      nonempty += static_cast<std::int64_t>(listed);
      for (std::size_t q = 0; q < listed; ++q) {
        const index_t b = list[q];
        const std::int64_t w = std::min<std::int64_t>(8, std::int64_t{a.cols} - 8 * std::int64_t{b});
        if (2 * static_cast<std::int64_t>(cnt[b]) >= h * w) dense_nnz += cnt[b];
        cnt[b] = 0;
      }
    }
  }
  s.add("block8_fill", ratio(dnnz, 64.0 * static_cast<double>(nonempty)));
  s.add("block8_dense_share", ratio(static_cast<double>(dense_nnz), dnnz));
}

/// The locality signature part: nacs(T)/nnz, nars(T)/nnz (T = 2^0..2^15), the distance from
/// each nonzero to the next one of its row / column in log2 bins ([2^b, 2^(b+1)), b = 0..14, and
/// >= 2^15; an entry that is the last of its line counts in none), and the fill ratios of the
/// bi x bk blocks (bi-major). `prefix` names a projection of a tensor.
void add_signature_part(Sink& s, const CooMatrix& a, int threads, const std::string& prefix,
                        const signature::LocalitySignature* given = nullptr) {
  const std::int64_t nnz = a.nnz();
  const double dnnz = static_cast<double>(nnz);
  signature::LocalitySignature computed;
  if (nnz > 0 && given == nullptr) computed = signature::compute_signature(a, threads);
  WACO_ASSERT(given == nullptr ||
                  (given->rows == a.rows && given->cols == a.cols && given->nnz == nnz),
              "the signature given to the features is another matrix's");
  const signature::LocalitySignature& sig = given != nullptr && nnz > 0 ? *given : computed;
  for (int t = 0; t < kPow2Steps; ++t)
    s.add(prefix + "nacs_log2_T" + std::to_string(t),
          nnz > 0 ? ratio(static_cast<double>(sig.nacs(std::int64_t{1} << t)), dnnz) : 0.0);
  for (int t = 0; t < kPow2Steps; ++t)
    s.add(prefix + "nars_log2_T" + std::to_string(t),
          nnz > 0 ? ratio(static_cast<double>(sig.nars(std::int64_t{1} << t)), dnnz) : 0.0);

  std::vector<std::int64_t> row_bins(kPow2Steps, 0), col_bins(kPow2Steps, 0);
  {
    const auto bin = [](std::int64_t d) {
      return std::min(bit_width(static_cast<std::uint64_t>(d)) - 1, kPow2Steps - 1);
    };
    std::vector<index_t> last_row(static_cast<std::size_t>(a.cols), -1);
    for (std::int64_t e = 0; e < nnz; ++e) {
      const index_t r = a.row[e], c = a.col[e];
      if (e > 0 && a.row[e - 1] == r) ++row_bins[bin(c - a.col[e - 1])];
      if (last_row[c] >= 0) ++col_bins[bin(r - last_row[c])];
      last_row[c] = r;
    }
  }
  for (int b = 0; b < kPow2Steps; ++b)
    s.add(prefix + "row_next_log2_" + std::to_string(b),
          ratio(static_cast<double>(row_bins[b]), dnnz));
  for (int b = 0; b < kPow2Steps; ++b)
    s.add(prefix + "col_next_log2_" + std::to_string(b),
          ratio(static_cast<double>(col_bins[b]), dnnz));

  for (int bi = 1; bi <= signature::kMaxBlock; bi *= 2)
    for (int bk = 1; bk <= signature::kMaxBlock; bk *= 2)
      s.add(prefix + "block_fill_" + std::to_string(bi) + "x" + std::to_string(bk),
            nnz > 0 ? sig.block(bi, bk).fill_ratio : 0.0);
}

void check_tensor(const CooTensor& t) {
  if (t.order() != 3)
    throw kernels::Error("tensor features need a 3-D tensor, got order " +
                         std::to_string(t.order()));
  kernels::check_bounds(t);
  WACO_ASSERT(kernels::is_canonical(t), "tensor features need a canonical tensor");
}

/// Sizes, density, mode-0 slice lengths, (i, k) fiber lengths. O(nnz + dim0).
void add_tensor_stats(Sink& s, const CooTensor& t) {
  const std::int64_t nnz = t.nnz();
  const double d0 = t.dims[0], d1 = t.dims[1], d2 = t.dims[2];
  s.add("log2_dim0", log2p1(d0));
  s.add("log2_dim1", log2p1(d1));
  s.add("log2_dim2", log2p1(d2));
  s.add("log2_nnz", log2p1(static_cast<double>(nnz)));
  s.add("log2_density_div32", log2_density_scaled(nnz, {d0, d1, d2}));
  s.add("density", ratio(static_cast<double>(nnz), d0 * d1 * d2));

  const std::vector<index_t>& i0 = t.idx[0];
  const std::vector<index_t>& i1 = t.idx[1];
  std::vector<std::int64_t> slice_len(static_cast<std::size_t>(t.dims[0]), 0);
  for (std::int64_t e = 0; e < nnz; ++e) ++slice_len[i0[e]];
  add_length_stats(s, "slice_", length_histogram(slice_len));

  // (i, k) fibers: runs of equal (i, k) in the canonical order; the empty ones as length 0.
  std::vector<std::int64_t> fiber_len;
  for (std::int64_t e = 0; e < nnz; ++e) {
    if (e == 0 || i0[e] != i0[e - 1] || i1[e] != i1[e - 1]) fiber_len.push_back(0);
    ++fiber_len.back();
  }
  std::vector<std::int64_t> hist = length_histogram(fiber_len);  // {0} for no fibers
  const std::int64_t fibers = static_cast<std::int64_t>(t.dims[0]) * t.dims[1];
  hist[0] += fibers - static_cast<std::int64_t>(fiber_len.size());
  add_length_stats(s, "fiber_", hist);
}

/// The deduplicated projection of a canonical 3-D tensor onto modes (0, m), canonical.
CooMatrix projection(const CooTensor& t, int m) {
  CooMatrix p;
  p.rows = t.dims[0];
  p.cols = t.dims[m];
  const std::vector<index_t>& i0 = t.idx[0];
  const std::vector<index_t>& im = t.idx[m];
  for (std::int64_t e = 0; e < t.nnz(); ++e) {
    // Mode 1 is sorted within each slice: equal pairs are adjacent. Mode 2 is deduplicated below.
    if (m == 1 && e > 0 && i0[e] == i0[e - 1] && im[e] == im[e - 1]) continue;
    p.row.push_back(i0[e]);
    p.col.push_back(im[e]);
    p.val.push_back(1.0f);
  }
  if (m != 1) kernels::canonicalize(p);
  return p;
}

/// The share of the tensor's entries that the projection keeps, and the projection's signature
/// part; `prefix` "ik_" or "il_".
void add_projection(Sink& s, const CooTensor& t, int m, int threads, const std::string& prefix) {
  const CooMatrix p = projection(t, m);
  s.add(prefix + "proj_nnz_share",
        ratio(static_cast<double>(p.nnz()), static_cast<double>(t.nnz())));
  add_signature_part(s, p, threads, prefix);
}

void check_dims(int dims) {
  if (dims != 2 && dims != 3)
    throw kernels::Error("feature vectors exist for dims 2 (matrices) and 3 (tensors), got " +
                         std::to_string(dims));
}

Sink matrix_sink(FeatureSet set, const CooMatrix& a, int threads, bool names,
                 const signature::LocalitySignature* signature = nullptr) {
  check_matrix(a);
  Sink s(names);
  add_matrix_stats(s, a);
  if (set == FeatureSet::Signature) add_signature_part(s, a, threads, "", signature);
  WACO_ASSERT(static_cast<int>(s.values().size()) == feature_count(set, 2),
              "matrix feature count mismatch");
  return s;
}

Sink tensor_sink(FeatureSet set, const CooTensor& t, int threads, bool names) {
  check_tensor(t);
  Sink s(names);
  add_tensor_stats(s, t);
  if (set == FeatureSet::Signature) {
    add_projection(s, t, 1, threads, "ik_");
    add_projection(s, t, 2, threads, "il_");
  }
  WACO_ASSERT(static_cast<int>(s.values().size()) == feature_count(set, 3),
              "tensor feature count mismatch");
  return s;
}

}  // namespace

std::string feature_set_name(FeatureSet set) {
  return set == FeatureSet::Stats ? "stats" : "signature";
}

FeatureSet parse_feature_set(const std::string& name) {
  if (name == "stats") return FeatureSet::Stats;
  if (name == "signature") return FeatureSet::Signature;
  throw kernels::Error("unknown feature set '" + name + "' (known: stats, signature)",
                       "choose one of: stats, signature");
}

int feature_count(FeatureSet set, int dims) {
  check_dims(dims);
  if (dims == 2) return kMatrixStats + (set == FeatureSet::Signature ? kSignaturePart : 0);
  return kTensorStats + (set == FeatureSet::Signature ? 2 * kProjectionPart : 0);
}

std::vector<std::string> feature_names(FeatureSet set, int dims) {
  check_dims(dims);
  if (dims == 2) {
    CooMatrix a;
    a.rows = a.cols = 1;
    return std::move(matrix_sink(set, a, 1, true).names());
  }
  CooTensor t;
  t.dims = {1, 1, 1};
  t.idx.assign(3, {});
  return std::move(tensor_sink(set, t, 1, true).names());
}

std::vector<float> matrix_features(FeatureSet set, const CooMatrix& a, int threads,
                                   const signature::LocalitySignature* signature) {
  return std::move(matrix_sink(set, a, threads, false, signature).values());
}

std::vector<float> tensor_features(FeatureSet set, const CooTensor& t, int threads) {
  return std::move(tensor_sink(set, t, threads, false).values());
}

}  // namespace waco::learned
