// Matrix Market reading and writing (NIST Matrix Market exchange format, "coordinate" for sparse
// operands and "array" for dense ones) and the output-path check shared by all writers.
//
// The reader follows the format strictly where leniency would hide a wrong result (entries above
// the diagonal of a symmetric file, a diagonal in a skew-symmetric file, trailing tokens, counts
// that disagree with the size line) and leniently where nothing can go wrong (case of the banner
// words, blank lines, '\r\n' line ends, comment lines among the entries). Indices are parsed as
// 64-bit and checked against kMaxIndex before anything is stored; the header's entry count only
// bounds, never sizes, the first allocation, so a lying header cannot make the reader allocate
// memory the file does not back.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "io_text.hpp"
#include "waco/kernels/huge_pages.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels {

using io_detail::OutputFile;
using io_detail::ParseStatus;
using io_detail::quote;
using io_detail::TextReader;
using io_detail::Tokens;

std::string_view field_name(Field f) {
  switch (f) {
    case Field::Real: return "real";
    case Field::Integer: return "integer";
    case Field::Pattern: return "pattern";
  }
  return "?";
}

std::string_view symmetry_name(Symmetry s) {
  switch (s) {
    case Symmetry::General: return "general";
    case Symmetry::Symmetric: return "symmetric";
    case Symmetry::SkewSymmetric: return "skew-symmetric";
  }
  return "?";
}

bool is_tensor_path(const std::string& path) {
  const std::string p = io_detail::lower(path);
  auto ends_with = [&](std::string_view suffix) {
    return p.size() >= suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".tns") || ends_with(".tns.gz");
}

void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error("empty output path", "give a file name");
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec))
    throw Error(path + ": is a directory, not a file", "give a file name inside the directory");
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st))
    throw Error(path + ": directory " + dir.string() + " does not exist",
                "create it first (mkdir -p " + dir.string() + ")");
  if (!fs::is_directory(st))
    throw Error(path + ": " + dir.string() + " is not a directory", "check the output path");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(path + ": directory " + dir.string() + " is not writable (" +
                    std::strerror(errno) + ")",
                "choose an output path in a writable directory");
}

std::string read_text_file(const std::string& path) {
  // read(2) straight into the string: an ifstream's set-up cost ~10x the read of a small file
  // (sysfs and procfs entries, read by every process's first machine identity).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void write_text_file(const std::string& path, const std::string& text) {
  check_writable(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error(tmp + ": cannot write", "check free space and permissions");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw Error(path + ": cannot move the result into place: " + ec.message());
  }
}

namespace {

using Clock = std::chrono::steady_clock;

enum class Format { Coordinate, Array };

struct Header {
  Format format = Format::Coordinate;
  Field field = Field::Real;
  Symmetry symmetry = Symmetry::General;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t entries = 0;  // declared entry lines (coordinate) or rows*cols (array)
};

// Parses the banner line and the size line, leaving the reader positioned before the first entry.
// Refuses sizes the reader cannot hold: dimensions or entry counts over the 32-bit limit, an
// operand over the input memory limit (io_text.hpp's check_memory, estimated from the size line
// before anything is allocated), and an entry count that a plain file is too short to hold.
Header read_header(TextReader& in, const ReadOptions& opts) {
  Header h;
  std::string_view line;
  if (!in.next_line(line)) in.fail_file("empty file", "expected a Matrix Market file starting with %%MatrixMarket");
  Tokens t(line);
  std::string_view tok;
  if (!t.next(tok) || io_detail::lower(tok) != "%%matrixmarket")
    in.fail("not a Matrix Market file: the first line must start with %%MatrixMarket, found " + quote(line),
            "Matrix Market files begin with e.g. '%%MatrixMarket matrix coordinate real general'");
  std::string words[4];
  for (std::string& w : words) {
    if (!t.next(tok))
      in.fail("incomplete banner " + quote(line) + ": expected 'matrix <format> <field> <symmetry>'",
              "e.g. '%%MatrixMarket matrix coordinate real general'");
    w = io_detail::lower(tok);
  }
  if (!t.at_end()) in.fail("unexpected text after the banner: " + quote(t.rest()), "the banner has exactly five words");
  if (words[0] != "matrix")
    in.fail("unsupported object " + quote(words[0]) + " (only 'matrix' is supported)",
            "tensors are read from FROSTT .tns files");
  if (words[1] == "coordinate") h.format = Format::Coordinate;
  else if (words[1] == "array") h.format = Format::Array;
  else in.fail("unknown format " + quote(words[1]), "the format is 'coordinate' (sparse) or 'array' (dense)");
  if (words[2] == "real") h.field = Field::Real;
  else if (words[2] == "integer") h.field = Field::Integer;
  else if (words[2] == "pattern") h.field = Field::Pattern;
  else if (words[2] == "complex")
    in.fail("complex values are not supported", "waco-hybrid works on real single-precision values");
  else in.fail("unknown field " + quote(words[2]), "the field is 'real', 'integer' or 'pattern'");
  if (words[3] == "general") h.symmetry = Symmetry::General;
  else if (words[3] == "symmetric") h.symmetry = Symmetry::Symmetric;
  else if (words[3] == "skew-symmetric") h.symmetry = Symmetry::SkewSymmetric;
  else if (words[3] == "hermitian")
    in.fail("hermitian matrices are not supported", "hermitian applies to complex values, which waco-hybrid does not read");
  else in.fail("unknown symmetry " + quote(words[3]), "the symmetry is 'general', 'symmetric' or 'skew-symmetric'");
  if (h.format == Format::Array && h.field == Field::Pattern)
    in.fail("an array file cannot have the 'pattern' field", "use 'real' or 'integer'");

  // Comment lines (starting with '%') and blank lines may precede the size line.
  for (;;) {
    if (!in.next_line(line))
      in.fail_file("missing size line: the file ends after line " + std::to_string(in.line_number()),
                   h.format == Format::Coordinate ? "after the banner and comments comes 'rows cols entries'"
                                                  : "after the banner and comments comes 'rows cols'");
    Tokens c(line);
    if (c.at_end()) continue;
    if (c.rest().front() == '%') continue;
    break;
  }
  const int want = h.format == Format::Coordinate ? 3 : 2;
  const char* what[3] = {"rows", "columns", "entries"};
  std::int64_t v[3] = {0, 0, 0};
  Tokens s(line);
  const char* size_hint = h.format == Format::Coordinate
                              ? "the size line of a coordinate file is 'rows cols entries', e.g. '100 100 500'"
                              : "the size line of an array file is 'rows cols', e.g. '100 1'";
  for (int k = 0; k < want; ++k) {
    if (!s.next(tok)) in.fail("malformed size line " + quote(line) + ": missing the number of " + what[k], size_hint);
    if (!io_detail::parse_int64(tok, v[k]))
      in.fail("malformed size line: the number of " + std::string(what[k]) + " " + quote(tok) +
                  " is not an integer (or is too large)",
              size_hint);
    if (v[k] < 0) in.fail("negative number of " + std::string(what[k]) + " (" + std::to_string(v[k]) + ")", size_hint);
  }
  if (!s.at_end()) in.fail("malformed size line: unexpected " + quote(s.rest()) + " after the sizes", size_hint);
  h.rows = v[0];
  h.cols = v[1];
  if (h.rows > kMaxIndex || h.cols > kMaxIndex)
    in.fail("matrix is " + std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                ": dimensions above " + std::to_string(kMaxIndex) + " are not supported",
            "waco-hybrid stores 32-bit indices; split the matrix");
  if (h.symmetry != Symmetry::General && h.rows != h.cols)
    in.fail("a " + std::string(symmetry_name(h.symmetry)) + " matrix must be square, but it is " +
                std::to_string(h.rows) + " x " + std::to_string(h.cols),
            "fix the size line or declare the matrix 'general'");
  const io_detail::MemoryLimit limit = io_detail::memory_limit(opts);
  const std::string shape = std::to_string(h.rows) + " x " + std::to_string(h.cols);
  // A plain regular file needs at least this many bytes per entry line (the last without its
  // line end): "1 1\n" (pattern), "1 1 1\n", and "1\n" per value of an array file.
  const auto check_room = [&](std::int64_t count, std::int64_t min_line, const char* unit) {
    if (in.gzip() || !in.regular() || count == 0) return;
    const std::int64_t room = (in.file_bytes() + 1) / min_line;
    if (count > room)
      in.fail("the size line declares " + std::to_string(count) + " " + unit + ", but the file has " +
                  std::to_string(in.file_bytes()) + " bytes, room for at most " + std::to_string(room),
              "the file is truncated, or the size line is wrong");
  };
  // rows, cols <= 2^31 - 1, so these products fit in 64 bits.
  const std::int64_t cells = h.rows * h.cols;
  if (h.format == Format::Array) {
    if (h.symmetry != Symmetry::General)
      in.fail("only 'general' array files are supported, not " + quote(symmetry_name(h.symmetry)),
              "write the dense operand with all entries, column by column");
    h.entries = cells;
    check_room(cells, 2, "values (rows x columns)");
    // The values as read (double), then the dense matrix (float or double).
    io_detail::check_memory(in, (8.0 + static_cast<double>(dtype_size(opts.dtype))) *
                                    static_cast<double>(cells),
                            "a " + shape + " array", limit);
    return h;
  }
  // Duplicates are summed (canonicalize), so the entry count may exceed what the shape holds
  // (fast_matrix_market's GraphBLAS matrices: 3 x 1 with 4 entries, one stored twice); it is
  // bounded by the 32-bit positions and by the memory limit instead.
  h.entries = v[2];
  if (h.entries > kMaxIndex)
    in.fail("declares " + std::to_string(h.entries) + " entries; more than " + std::to_string(kMaxIndex) +
                " are not supported",
            "waco-hybrid stores 32-bit indices; split the matrix");
  check_room(h.entries, h.field == Field::Pattern ? 4 : 6, "entries");
  // 36 bytes an entry after symmetric expansion (the parsed triplets, the per-row scatter and the
  // assembled matrix, values in double: 24 when they were float), 8 a row and a column (CSR
  // positions, a dense vector, per-row counts).
  const double expanded = static_cast<double>(h.entries) * (h.symmetry == Symmetry::General ? 1.0 : 2.0);
  io_detail::check_memory(in, 36.0 * expanded + 8.0 * static_cast<double>(h.rows + h.cols),
                          "a " + shape + " matrix of " + std::to_string(h.entries) + " entries" +
                              (h.symmetry == Symmetry::General ? "" : " (both triangles)"),
                          limit);
  return h;
}

// Reads the next data line (skipping blank and comment lines); false at end of file.
bool next_data_line(TextReader& in, std::string_view& line) {
  return io_detail::next_content_line(in, line, '%');
}

// Parses one value token under the file's field rules, in the precision opts.dtype asks for.
double parse_value(TextReader& in, std::string_view tok, Field field, const ReadOptions& opts) {
  if (field == Field::Integer) {
    std::int64_t iv = 0;
    if (!io_detail::parse_int64(tok, iv))
      in.fail("value " + quote(tok) + " is not an integer (the file declares the 'integer' field)",
              "declare the field 'real' or fix the value");
    return opts.dtype == Dtype::F32 ? static_cast<double>(static_cast<float>(iv))
                                    : static_cast<double>(iv);
  }
  double v = 0.0;
  const ParseStatus st = io_detail::parse_value(tok, opts.dtype, v);
  if (st == ParseStatus::Malformed)
    in.fail("value " + quote(tok) + " is not a number", "entry lines are 'row col value'");
  if (st == ParseStatus::Overflow) io_detail::fail_value_range(in, tok, opts.dtype, "matrix");
  if (!std::isfinite(v) && !opts.allow_nonfinite)
    in.fail("value " + quote(tok) + " is not finite", "remove NaN/Inf values, or allow them explicitly (allow_nonfinite)");
  return v;
}

std::int64_t parse_index(TextReader& in, std::string_view tok, const char* what, std::int64_t size) {
  std::int64_t v = 0;
  if (!io_detail::parse_int64(tok, v))
    in.fail(std::string(what) + " index " + quote(tok) + " is not an integer", "entry lines are 'row col value' with 1-based indices");
  if (v < 1 || v > size)
    in.fail(std::string(what) + " index " + std::to_string(v) + " is outside 1.." + std::to_string(size),
            v == 0 ? "Matrix Market indices are 1-based" : "check the entry against the size line");
  return v;
}

// Counts (and optionally removes) stored zeros in a canonical matrix.
void handle_zeros(CooMatrix& a, SourceInfo& info, const ReadOptions& opts) {
  const std::int64_t zeros = std::count(a.val.begin(), a.val.end(), 0.0);
  if (!opts.drop_explicit_zeros || zeros == 0) {
    info.explicit_zeros = zeros;
    return;
  }
  std::size_t out = 0;
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    if (a.val[e] == 0.0) continue;
    a.row[out] = a.row[e];
    a.col[out] = a.col[e];
    a.val[out] = a.val[e];
    ++out;
  }
  a.row.resize(out);
  a.col.resize(out);
  a.val.resize(out);
  info.zeros_dropped = zeros;
  info.explicit_zeros = 0;
}

// The positions a symmetric file's lines name, counted on its expanded, canonical matrix: each
// diagonal entry once, each off-diagonal pair (an entry and its mirror) once.
std::int64_t stored_positions(const CooMatrix& a) {
  std::int64_t diagonal = 0;
  for (std::size_t e = 0; e < a.row.size(); ++e) diagonal += a.row[e] == a.col[e];
  return diagonal + (a.nnz() - diagonal) / 2;
}

// The stored entries of a file, as parsed (0-based), before expansion and sorting.
struct Stored {
  std::vector<index_t> row;
  std::vector<index_t> col;
  std::vector<double> val;
};

// Builds the matrix sorted by (row, col), expanding symmetric files (`sign` -1 for skew), so that
// canonicalize() finds it in order and only merges duplicates. A stable counting sort by row (one
// scatter pass) does it: Matrix Market files are mostly written column by column, so each row's
// columns come out ascending, for general files and for both triangles of symmetric ones; a row
// that does not gets a stable sort of its own. O(nnz + rows) in the common case.
void assemble(Stored& s, bool mirrored, double sign, CooMatrix& a) {
  const std::size_t n = s.val.size();
  if (!mirrored) {
    bool sorted = true;
    for (std::size_t e = 1; e < n && sorted; ++e)
      sorted = s.row[e - 1] < s.row[e] || (s.row[e - 1] == s.row[e] && s.col[e - 1] <= s.col[e]);
    if (sorted) {
      a.row = std::move(s.row);
      a.col = std::move(s.col);
      a.val = std::move(s.val);
      return;
    }
  }
  const auto rows = static_cast<std::size_t>(a.rows);
  if (rows > 4 * (mirrored ? 2 * n : n) + 4096) {
    // Far more rows than entries: per-row arrays would cost more than the entries; expand and
    // leave the order to canonicalize() (a comparison sort at such sizes).
    a.row = std::move(s.row);
    a.col = std::move(s.col);
    a.val = std::move(s.val);
    if (mirrored)
      for (std::size_t e = 0; e < n; ++e)
        if (a.row[e] != a.col[e]) {
          a.row.push_back(a.col[e]);
          a.col.push_back(a.row[e]);
          a.val.push_back(sign * a.val[e]);
        }
    s = Stored{};
    return;
  }
  // Scatter (column, value) pairs, one cache line touched per entry, then split them per row.
  std::vector<index_t> start(rows + 1, 0);  // positions fit: the total is checked <= kMaxIndex
  for (std::size_t e = 0; e < n; ++e) {
    ++start[static_cast<std::size_t>(s.row[e]) + 1];
    if (mirrored && s.row[e] != s.col[e]) ++start[static_cast<std::size_t>(s.col[e]) + 1];
  }
  for (std::size_t r = 0; r < rows; ++r) start[r + 1] += start[r];
  const auto total = static_cast<std::size_t>(start[rows]);
  struct ColVal {
    index_t col;
    double val;
  };
  std::vector<ColVal> cv = huge_vector<ColVal>(total);
  {
    std::vector<index_t> next(start.begin(), start.end() - 1);
    for (std::size_t e = 0; e < n; ++e) {
      const index_t r = s.row[e];
      const index_t c = s.col[e];
      cv[static_cast<std::size_t>(next[static_cast<std::size_t>(r)]++)] = ColVal{c, s.val[e]};
      if (mirrored && r != c) cv[static_cast<std::size_t>(next[static_cast<std::size_t>(c)]++)] = ColVal{r, sign * s.val[e]};
    }
  }
  s = Stored{};  // release the parsed arrays before the per-row pass
  reserve_entries(a, total);
  a.row.resize(total);
  a.col.resize(total);
  a.val.resize(total);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto b = static_cast<std::size_t>(start[r]);
    const auto e = static_cast<std::size_t>(start[r + 1]);
    bool sorted = true;
    for (std::size_t k = b + 1; k < e; ++k) sorted &= cv[k - 1].col <= cv[k].col;
    if (!sorted)
      std::stable_sort(cv.begin() + static_cast<std::ptrdiff_t>(b), cv.begin() + static_cast<std::ptrdiff_t>(e),
                       [](const ColVal& x, const ColVal& y) { return x.col < y.col; });
    for (std::size_t k = b; k < e; ++k) {
      a.row[k] = static_cast<index_t>(r);
      a.col[k] = cv[k].col;
      a.val[k] = cv[k].val;
    }
  }
}

// Parses "row col [value]" with plain digits and one kind of separator: the shape of nearly every
// entry line. Returns false when anything is unusual (signs, odd values, errors), in which case
// the caller's checked path parses the line again and reports the precise problem.
inline bool skip_blanks(const char*& p, const char* e) {
  const char* s = p;
  while (p < e && (*p == ' ' || *p == '\t')) ++p;
  return p > s;
}

inline bool scan_index(const char*& p, const char* e, std::int64_t size, std::int64_t& out) {
  const char* s = p;
  std::int64_t v = 0;
  while (p < e) {
    const unsigned d = static_cast<unsigned>(*p) - '0';
    if (d > 9) break;
    if (p - s == 18) return false;  // 19 digits may overflow: the checked path says so
    v = v * 10 + d;
    ++p;
  }
  if (p == s || v < 1 || v > size) return false;
  out = v;
  return true;
}

inline bool fast_entry(std::string_view line, const Header& h, Dtype dtype, std::int64_t& r, std::int64_t& c,
                       double& v) {
  const char* p = line.data();
  const char* e = p + line.size();
  if (!scan_index(p, e, h.rows, r) || !skip_blanks(p, e) || !scan_index(p, e, h.cols, c)) return false;
  const bool sep = skip_blanks(p, e);
  if (h.field == Field::Pattern) {
    v = 1.0;
    return p == e;
  }
  if (!sep || p == e) return false;
  const char* q = p;
  while (q < e && *q != ' ' && *q != '\t') ++q;
  if (h.field == Field::Integer) {
    std::int64_t iv = 0;
    const char* s = p;
    while (p < q) {
      const unsigned d = static_cast<unsigned>(*p) - '0';
      if (d > 9 || p - s >= 18) return false;
      iv = iv * 10 + d;
      ++p;
    }
    if (p == s) return false;
    v = dtype == Dtype::F32 ? static_cast<double>(static_cast<float>(iv)) : static_cast<double>(iv);
  } else if (dtype == Dtype::F32) {
    float f = 0.0f;
    auto [end, ec] = std::from_chars(p, q, f);
    if (ec != std::errc() || end != q || !std::isfinite(f)) return false;
    v = f;
    p = q;
  } else {
    auto [end, ec] = std::from_chars(p, q, v);
    if (ec != std::errc() || end != q || !std::isfinite(v)) return false;
    p = q;
  }
  skip_blanks(p, e);
  return p == e;
}

// How many entries to reserve for a declared count: bounded by what the file can back.
std::size_t reservation(const TextReader& in, std::int64_t declared) {
  // An entry line has at least 4 bytes ("1 1\n"); gzip text rarely compresses beyond 20x.
  const std::int64_t backed = in.gzip() ? in.file_bytes() * 5 + 4096 : in.file_bytes() / 4 + 16;
  return static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(declared, backed)));
}

}  // namespace

LoadedMatrix read_matrix_market(const std::string& path, const ReadOptions& opts) {
  const auto t0 = Clock::now();
  TextReader in(path);
  const Header h = read_header(in, opts);
  if (h.format != Format::Coordinate)
    in.fail("this is a Matrix Market array (dense) file; a sparse operand must be in coordinate format",
            "array files are dense operands (--inputs); convert the matrix to 'coordinate' format");

  LoadedMatrix out;
  SourceInfo& info = out.source;
  info.path = path;
  info.field = h.field;
  info.symmetry = h.symmetry;
  info.gzip = in.gzip();
  CooMatrix& a = out.matrix;
  a.rows = static_cast<index_t>(h.rows);
  a.cols = static_cast<index_t>(h.cols);
  const bool mirrored = h.symmetry != Symmetry::General;
  Stored st;
  const std::size_t want = reservation(in, h.entries);
  reserve_huge(st.row, want);
  reserve_huge(st.col, want);
  reserve_huge(st.val, want);

  const double sign = h.symmetry == Symmetry::SkewSymmetric ? -1.0 : 1.0;
  int triangle = 0;  // symmetric files: -1 lower, +1 upper, 0 not yet seen
  std::int64_t triangle_line = 0;
  std::int64_t seen = 0;
  std::int64_t expanded = 0;
  std::string_view line;
  std::string_view tok;
  while (next_data_line(in, line)) {
    if (seen == h.entries)
      in.fail("more entries than the " + std::to_string(h.entries) + " declared on the size line",
              "fix the entry count on the size line or remove the extra lines");
    ++seen;
    std::int64_t r = 0;
    std::int64_t c = 0;
    double v = 1.0;
    if (!fast_entry(line, h, opts.dtype, r, c, v)) {
      Tokens t(line);
      t.next(tok);  // non-empty: next_data_line skipped blank lines
      r = parse_index(in, tok, "row", h.rows);
      if (!t.next(tok)) in.fail("entry " + quote(line) + " has no column index", "entry lines are 'row col value'");
      c = parse_index(in, tok, "column", h.cols);
      if (h.field != Field::Pattern) {
        if (!t.next(tok)) in.fail("entry " + quote(line) + " has no value", "entry lines are 'row col value'");
        v = parse_value(in, tok, h.field, opts);
      }
      if (!t.at_end())
        in.fail("unexpected " + quote(t.rest()) + " after the entry",
                h.field == Field::Pattern ? "pattern entries are 'row col' only" : "entries are 'row col value' only");
    }
    if (mirrored) {
      // The format stores the lower triangle. A file that stores only the upper one (some
      // converters write those; ../shared/data has one) describes the same matrix and is
      // accepted; a file mixing both triangles is ambiguous and refused.
      if (r != c) {
        const int side = c > r ? 1 : -1;
        if (triangle == 0) {
          triangle = side;
          triangle_line = in.line_number();
        } else if (side != triangle) {
          const bool above = side > 0;
          in.fail("entry (" + std::to_string(r) + ", " + std::to_string(c) + ") lies " +
                      (above ? "above" : "below") + " the diagonal, but the entry on line " +
                      std::to_string(triangle_line) + " lies " + (above ? "below" : "above") + " it: a " +
                      std::string(symmetry_name(h.symmetry)) + " file stores one triangle",
                  "Matrix Market symmetric files store only the lower triangle (row >= col); "
                  "remove the mirrored entries or declare the matrix 'general'");
        }
        if (++expanded + seen > kMaxIndex)
          in.fail("more than " + std::to_string(kMaxIndex) + " entries after symmetric expansion",
                  "waco-hybrid stores 32-bit positions; split the matrix");
      } else if (h.symmetry == Symmetry::SkewSymmetric) {
        in.fail("diagonal entry (" + std::to_string(r) + ", " + std::to_string(c) + ") in a skew-symmetric file",
                "a skew-symmetric matrix has a zero diagonal, which is not stored");
      }
    }
    st.row.push_back(static_cast<index_t>(r - 1));
    st.col.push_back(static_cast<index_t>(c - 1));
    st.val.push_back(v);
  }
  if (seen < h.entries)
    in.fail("the file ends after " + std::to_string(seen) + " of the " + std::to_string(h.entries) +
                " entries declared on the size line",
            "the file is truncated, or the size line's entry count is wrong");
  info.stored_entries = seen;
  info.bytes = in.bytes();
  assemble(st, mirrored, sign, a);
  const std::int64_t merged = canonicalize(a, opts.dtype);
  // Lines merged into an earlier line of the same position. In a symmetric file a repeated
  // off-diagonal line merges twice in the expanded matrix (the entry and its mirror): counted
  // once, so that the duplicates never exceed the lines (10 stored lines of which 6 repeated once
  // were 12 duplicates summed before; fuzz_matrix_market's check).
  info.duplicates_summed = mirrored ? seen - stored_positions(a) : merged;
  handle_zeros(a, info, opts);
  info.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

DenseMatrix read_matrix_market_dense(const std::string& path, Layout layout, const ReadOptions& opts) {
  TextReader in(path);
  const Header h = read_header(in, opts);
  if (h.format != Format::Array)
    in.fail("this is a Matrix Market coordinate (sparse) file; a dense operand must be in array format",
            "write the dense operand as '%%MatrixMarket matrix array real general'");
  // Values arrive column by column; collect them before allocating the matrix so that a header
  // declaring a huge size cannot allocate memory the file does not back.
  std::vector<double> values;
  values.reserve(reservation(in, h.entries));
  std::string_view line;
  std::string_view tok;
  while (next_data_line(in, line)) {
    if (static_cast<std::int64_t>(values.size()) == h.entries)
      in.fail("more values than the " + std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                  " declared on the size line",
              "an array file has exactly rows*cols values, one per line, column by column");
    Tokens t(line);
    t.next(tok);
    values.push_back(parse_value(in, tok, h.field, opts));
    if (!t.at_end())
      in.fail("unexpected " + quote(t.rest()) + " after the value", "an array file has one value per line");
  }
  if (static_cast<std::int64_t>(values.size()) < h.entries)
    in.fail("the file ends after " + std::to_string(values.size()) + " of the " + std::to_string(h.entries) +
                " values (" + std::to_string(h.rows) + " x " + std::to_string(h.cols) + ") declared on the size line",
            "the file is truncated, or the size line is wrong");
  DenseMatrix m(static_cast<index_t>(h.rows), static_cast<index_t>(h.cols), layout, opts.dtype);
  std::size_t k = 0;
  if (m.rows > 0)  // a 0 x 2^31-1 array has no value: no pass over its empty columns
    for (index_t j = 0; j < m.cols; ++j)
      for (index_t i = 0; i < m.rows; ++i) m.set(i, j, values[k++]);
  return m;
}

void write_matrix_market(const std::string& path, const CooMatrix& a, const std::string& comment) {
  WACO_ASSERT(a.row.size() == a.val.size() && a.col.size() == a.val.size(),
              "write_matrix_market: inconsistent COO arrays");
  OutputFile out(path);
  out.write("%%MatrixMarket matrix coordinate real general\n");
  if (!comment.empty()) out.put_comment(comment, "%");
  out.put_int(a.rows);
  out.put(' ');
  out.put_int(a.cols);
  out.put(' ');
  out.put_int(a.nnz());
  out.put('\n');
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    out.put_int(std::int64_t{a.row[e]} + 1);
    out.put(' ');
    out.put_int(std::int64_t{a.col[e]} + 1);
    out.put(' ');
    out.put_value(a.val[e]);
    out.put('\n');
    out.maybe_flush();
  }
  out.commit();
}

void write_matrix_market_dense(const std::string& path, const DenseMatrix& m, const std::string& comment) {
  WACO_ASSERT(m.data.size() == static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols),
              "write_matrix_market_dense: data size does not match rows x cols");
  OutputFile out(path);
  out.write("%%MatrixMarket matrix array real general\n");
  if (!comment.empty()) out.put_comment(comment, "%");
  out.put_int(m.rows);
  out.put(' ');
  out.put_int(m.cols);
  out.put('\n');
  for (index_t j = 0; j < (m.rows > 0 ? m.cols : 0); ++j)
    for (index_t i = 0; i < m.rows; ++i) {
      out.put_value(m.at(i, j));
      out.put('\n');
      out.maybe_flush();
    }
  out.commit();
}

}  // namespace waco::kernels
