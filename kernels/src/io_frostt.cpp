// FROSTT sparse tensor files (.tns, .tns.gz; frostt.io/tensors/file-formats.html): one nonzero
// per line, its 1-based indices followed by its value, whitespace-separated, '#' comment lines.
// There is no header: the order is the number of fields of the first entry line minus one, every
// other entry line must agree, and each mode's size is the largest index seen in it. Because the
// format stores no sizes, write_frostt cannot record trailing empty slices: reading back gives the
// dims of the largest indices present.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "io_text.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels {

using io_detail::OutputFile;
using io_detail::ParseStatus;
using io_detail::quote;
using io_detail::TextReader;
using io_detail::Tokens;

namespace {

/// More modes than this is taken as a malformed file, not a tensor.
constexpr int kMaxOrder = 64;

bool next_entry_line(TextReader& in, std::string_view& line) {
  return io_detail::next_content_line(in, line, '#');
}

std::int64_t count_fields(std::string_view line) {
  Tokens t(line);
  std::string_view tok;
  std::int64_t n = 0;
  while (t.next(tok)) ++n;
  return n;
}

}  // namespace

LoadedTensor read_frostt(const std::string& path, const ReadOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  TextReader in(path);
  LoadedTensor out;
  SourceInfo& info = out.source;
  info.path = path;
  info.field = Field::Real;
  info.symmetry = Symmetry::General;
  info.gzip = in.gzip();
  CooTensor& t = out.tensor;

  std::string_view line;
  if (!next_entry_line(in, line)) {
    if (in.bytes() == 0) in.fail_file("empty file", "a FROSTT file has one line 'i j k ... value' per nonzero");
    in.fail_file("no entry lines (only comments or blank lines), so the order cannot be determined",
                 "a FROSTT file has one line 'i j k ... value' per nonzero");
  }
  const std::int64_t fields = count_fields(line);
  if (fields < 2)
    in.fail("the first entry line " + quote(line) + " has " + std::to_string(fields) +
                " field; an entry needs at least one index and a value",
            "FROSTT lines are 'i j k ... value' with 1-based indices");
  if (fields - 1 > kMaxOrder)
    in.fail("the first entry line has " + std::to_string(fields) + " fields; tensors of order above " +
                std::to_string(kMaxOrder) + " are not supported",
            "this does not look like a FROSTT file");
  const int order = static_cast<int>(fields - 1);
  const std::int64_t order_line = in.line_number();
  t.dims.assign(static_cast<std::size_t>(order), 0);
  t.idx.resize(static_cast<std::size_t>(order));
  const std::int64_t per_line = 2 * (order + 1);  // shortest possible entry line, in bytes
  const std::size_t guess = static_cast<std::size_t>(
      in.gzip() ? in.file_bytes() / 2 + 16
                : in.file_bytes() / per_line + 16);
  for (auto& v : t.idx) v.reserve(guess);
  t.val.reserve(guess);

  // The input memory limit (io_text.hpp), checked as entries arrive (the format has no header to
  // check first): each entry's indices and value, twice while canonicalize() permutes them, and
  // the permutation; at the end 8 bytes per index of every mode as well.
  const io_detail::MemoryLimit limit = io_detail::memory_limit(opts);
  const double per_entry = 8.0 * (order + 1) + 24.0;  // values in double (+8 since float)
  const auto max_entries = static_cast<std::int64_t>(static_cast<double>(limit.bytes) / per_entry);
  std::vector<std::int64_t> maxi(static_cast<std::size_t>(order), 0);
  std::string_view tok;
  // On any error in an entry, a wrong number of fields is the more useful diagnosis.
  // Never returns (TextReader::fail throws).
  auto fail_entry = [&](const std::string& problem, const std::string& hint) {
    const std::int64_t n = count_fields(line);
    if (n != order + 1)
      in.fail("entry has " + std::to_string(n) + " fields, expected " + std::to_string(order + 1) + " (order " +
                  std::to_string(order) + ", from line " + std::to_string(order_line) + ")",
              "every entry line needs the same number of indices followed by a value");
    in.fail(problem, hint);
  };
  do {
    Tokens f(line);
    for (int m = 0; m < order; ++m) {
      if (!f.next(tok)) fail_entry("missing index", "");
      std::int64_t v = 0;
      if (!io_detail::parse_int64(tok, v))
        fail_entry("mode-" + std::to_string(m + 1) + " index " + quote(tok) + " is not an integer",
                   "FROSTT lines are 'i j k ... value' with 1-based indices");
      if (v < 1)
        in.fail("mode-" + std::to_string(m + 1) + " index " + std::to_string(v) + " is below 1",
                "FROSTT indices are 1-based");
      if (v > kMaxIndex)
        in.fail("mode-" + std::to_string(m + 1) + " index " + std::to_string(v) + " is above " + std::to_string(kMaxIndex),
                "waco-hybrid stores 32-bit indices");
      maxi[static_cast<std::size_t>(m)] = std::max(maxi[static_cast<std::size_t>(m)], v);
      t.idx[static_cast<std::size_t>(m)].push_back(static_cast<index_t>(v - 1));
    }
    if (!f.next(tok)) fail_entry("missing value", "");
    double v = 0.0;
    const ParseStatus st = io_detail::parse_value(tok, opts.dtype, v);
    if (st == ParseStatus::Malformed)
      fail_entry("value " + quote(tok) + " is not a number", "the last field of an entry is its value");
    if (st == ParseStatus::Overflow) io_detail::fail_value_range(in, tok, opts.dtype, "tensor");
    if (!std::isfinite(v) && !opts.allow_nonfinite)
      in.fail("value " + quote(tok) + " is not finite", "remove NaN/Inf values, or allow them explicitly (allow_nonfinite)");
    if (!f.at_end()) fail_entry("unexpected " + quote(f.rest()) + " after the value", "");
    if (t.nnz() >= max_entries)
      io_detail::check_memory(in, per_entry * static_cast<double>(t.nnz() + 1),
                              "a tensor of order " + std::to_string(order) + " with more than " +
                                  std::to_string(t.nnz()) + " entries",
                              limit);
    t.val.push_back(v);
    if (t.nnz() > kMaxIndex)
      in.fail("more than " + std::to_string(kMaxIndex) + " entries", "waco-hybrid stores 32-bit positions; split the tensor");
  } while (next_entry_line(in, line));

  double index_bytes = 0.0;
  std::string shape;
  for (int m = 0; m < order; ++m) {
    t.dims[static_cast<std::size_t>(m)] = static_cast<index_t>(maxi[static_cast<std::size_t>(m)]);
    index_bytes += 8.0 * static_cast<double>(maxi[static_cast<std::size_t>(m)]);
    shape += (m ? " x " : "") + std::to_string(maxi[static_cast<std::size_t>(m)]);
  }
  io_detail::check_memory(in, per_entry * static_cast<double>(t.nnz()) + index_bytes,
                          "a " + shape + " tensor of " + std::to_string(t.nnz()) + " entries", limit,
                          false);
  info.stored_entries = t.nnz();
  info.bytes = in.bytes();
  info.duplicates_summed = canonicalize(t, opts.dtype);

  const std::int64_t zeros = std::count(t.val.begin(), t.val.end(), 0.0f);
  if (opts.drop_explicit_zeros && zeros > 0) {
    std::size_t k = 0;
    for (std::size_t e = 0; e < t.val.size(); ++e) {
      if (t.val[e] == 0.0f) continue;
      for (auto& v : t.idx) v[k] = v[e];
      t.val[k] = t.val[e];
      ++k;
    }
    for (auto& v : t.idx) v.resize(k);
    t.val.resize(k);
    info.zeros_dropped = zeros;
  } else {
    info.explicit_zeros = zeros;
  }
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

void write_frostt(const std::string& path, const CooTensor& t) {
  WACO_ASSERT(t.idx.size() == t.dims.size(), "write_frostt: idx and dims disagree on the order");
  for (const auto& v : t.idx) WACO_ASSERT(v.size() == t.val.size(), "write_frostt: inconsistent COO arrays");
  OutputFile out(path);
  const int order = t.order();
  for (std::size_t e = 0; e < t.val.size(); ++e) {
    for (int m = 0; m < order; ++m) {
      out.put_int(std::int64_t{t.idx[static_cast<std::size_t>(m)][e]} + 1);
      out.put(' ');
    }
    out.put_value(t.val[e]);
    out.put('\n');
    out.maybe_flush();
  }
  out.commit();
}

}  // namespace waco::kernels
