// Private to io_matrix_market.cpp and io_frostt.cpp: a buffered line reader over a plain or
// gzip-compressed file, the number parsers the readers share, and the atomic output file
// (temporary + rename) the writers share.
//
// Gzip is recognised by its magic bytes (1f 8b), never by the file name. Plain files are read with
// read(2) in large blocks; gzip files with zlib's gzread. Lines are handed out as string_views into
// the reader's buffer (valid until the next call), with '\r' stripped, and the reader counts line
// numbers so that every parse error can say "<path>:<line>: <problem>". A truncated or corrupt gzip
// stream is an Error naming the file, detected from gzread's status, never a silent short read.
// Integers are parsed by a plain digit loop (from_chars only past 18 digits, for overflow), values
// with std::from_chars<float> (libstdc++ 12: the Eisel-Lemire fast path, correctly rounded, so a
// float written in shortest form reads back bit-exact).
#pragma once

#include <charconv>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels::io_detail {

/// Reads a file line by line. Throws Error (naming the path) when the file is missing, is a
/// directory, cannot be read, or when its gzip stream is truncated or corrupt.
class TextReader {
 public:
  explicit TextReader(const std::string& path);
  ~TextReader();
  TextReader(const TextReader&) = delete;
  TextReader& operator=(const TextReader&) = delete;

  /// The next line without its terminator; false at end of file. The view stays valid until the
  /// next call. Throws Error on a read error or on a line longer than kMaxLineBytes.
  bool next_line(std::string_view& line);

  /// 1-based number of the line last returned (0 before the first).
  std::int64_t line_number() const { return line_number_; }
  /// Uncompressed bytes consumed so far.
  std::int64_t bytes() const { return bytes_; }
  /// Size of the file on disk (compressed size for gzip).
  std::int64_t file_bytes() const { return file_bytes_; }
  bool gzip() const { return gzip_; }
  /// A regular file (not a FIFO or device): file_bytes() is its size, so it bounds the content
  /// of a plain (not gzip) file.
  bool regular() const { return regular_; }
  const std::string& path() const { return path_; }

  /// Throws Error("<path>:<line>: <problem>", hint) for the line last returned.
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = {}) const;
  /// Throws Error("<path>: <problem>", hint) (a problem of the whole file, no line).
  [[noreturn]] void fail_file(const std::string& problem, const std::string& hint = {}) const;

  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 24;

 private:
  /// Appends more uncompressed bytes after end_; returns the number read (0 at end of file).
  std::size_t fill();
  void close_gzip_checked();

  std::string path_;
  int fd_ = -1;
  void* gz_ = nullptr;  // gzFile, kept opaque so that zlib.h stays out of this header
  bool gzip_ = false;
  bool regular_ = false;
  bool eof_ = false;
  std::vector<char> buf_;
  std::size_t begin_ = 0;  // first unconsumed byte
  std::size_t end_ = 0;    // one past the last valid byte
  std::int64_t line_number_ = 0;
  std::int64_t bytes_ = 0;
  std::int64_t file_bytes_ = 0;
};

/// The next line with content: skips blank lines and lines whose first non-blank character is
/// `comment` ('%' in Matrix Market, '#' in FROSTT); leading blanks are removed. False at the end.
inline bool next_content_line(TextReader& in, std::string_view& line, char comment) {
  while (in.next_line(line)) {
    std::size_t k = 0;
    while (k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
    if (k == line.size() || line[k] == comment) continue;
    line.remove_prefix(k);
    return true;
  }
  return false;
}

/// Splits a line into whitespace-separated (space, tab) tokens.
class Tokens {
 public:
  explicit Tokens(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}
  /// The next token; false when none is left.
  bool next(std::string_view& tok) {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t')) ++p_;
    if (p_ == end_) return false;
    const char* s = p_;
    while (p_ < end_ && *p_ != ' ' && *p_ != '\t') ++p_;
    tok = std::string_view(s, static_cast<std::size_t>(p_ - s));
    return true;
  }
  /// True when only whitespace is left.
  bool at_end() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t')) ++p_;
    return p_ == end_;
  }
  /// What is left of the line, without leading whitespace.
  std::string_view rest() {
    at_end();
    return std::string_view(p_, static_cast<std::size_t>(end_ - p_));
  }

 private:
  const char* p_;
  const char* end_;
};

/// Parses a whole token as a signed 64-bit integer (optional leading '+' or '-'). False when the
/// token is not an integer or does not fit in 64 bits.
inline bool parse_int64(std::string_view tok, std::int64_t& out) {
  const char* p = tok.data();
  const char* e = p + tok.size();
  bool neg = false;
  if (p < e && (*p == '+' || *p == '-')) {
    neg = *p == '-';
    ++p;
  }
  if (p == e) return false;
  if (e - p > 18) {  // may overflow: let from_chars decide
    if (*p == '+' || *p == '-') return false;
    std::uint64_t u = 0;
    auto [q, ec] = std::from_chars(p, e, u);
    if (ec != std::errc() || q != e) return false;
    if (u > static_cast<std::uint64_t>(INT64_MAX) + (neg ? 1u : 0u)) return false;
    out = neg ? static_cast<std::int64_t>(0 - u) : static_cast<std::int64_t>(u);
    return true;
  }
  std::uint64_t v = 0;  // at most 18 digits: no overflow
  for (; p < e; ++p) {
    const unsigned d = static_cast<unsigned>(*p) - '0';
    if (d > 9) return false;
    v = v * 10 + d;
  }
  out = neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  return true;
}

enum class ParseStatus { Ok, Malformed, Overflow };

/// Parses a whole token as a float or double V (decimal or exponent form, "nan", "inf"; optional
/// leading '+'; a Fortran 'd'/'D' exponent is accepted), correctly rounded to V. Values below
/// V's smallest subnormal round to zero; finite values beyond V's range give Overflow.
template <class V>
ParseStatus parse_real(std::string_view tok, V& out);
/// parse_real in the precision `dtype` names, widened to double.
ParseStatus parse_value(std::string_view tok, Dtype dtype, double& out);
/// Fails `in` for a value parse_value reported as Overflow (`what`: "matrix", "tensor").
[[noreturn]] void fail_value_range(const TextReader& in, std::string_view tok, Dtype dtype,
                                   const std::string& what);

/// A file being written: bytes go to a temporary file in the target's directory (gzip-compressed
/// when the target's name ends in ".gz"), which commit() renames into place. Destroying an
/// uncommitted OutputFile removes the temporary, so a failed write never leaves a partial result.
/// Throws Error (naming the target) when the path is not writable or a write fails.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= kFlushBytes) flush();
  }
  void put(char c) { buf_.push_back(c); }
  /// Appends the decimal form of an integer.
  void put_int(std::int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    buf_.append(tmp, r.ptr);
  }
  /// Appends the shortest decimal form that reads back as exactly the same float.
  void put_float(float v);
  /// A value kept in double: a float's shortest form when v is exactly a float (what every
  /// single-precision value is), else the shortest form that reads back as the same double.
  void put_value(double v);
  /// Writes a block of '%'-prefixed (or other `prefix`) comment lines, one per line of `text`.
  void put_comment(const std::string& text, const char* prefix);
  /// Call after each line or so: flushes the buffer when it is large.
  void maybe_flush() {
    if (buf_.size() >= kFlushBytes) flush();
  }
  /// Flushes, closes and renames the temporary file onto the target.
  void commit();

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 20;
  void flush();
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = {});

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  void* gz_ = nullptr;
  std::string buf_;
  bool committed_ = false;
};

/// The readers' memory limit (input_memory_limit) and where it came from, for messages:
/// "ReadOptions::max_memory", "WACO_MAX_INPUT_MEMORY" or "this machine's physical memory".
struct MemoryLimit {
  std::int64_t bytes = 0;
  std::string source;
};
MemoryLimit memory_limit(const ReadOptions& opts);

/// Throws Error "<path>[:<line>]: <what> needs about X GiB of memory, more than the input memory
/// limit of Y GiB (<source>)" when `need` bytes exceed the limit. `at_line`: name the line last
/// read (the size line, or the entry that crossed the limit).
void check_memory(const TextReader& in, double need, const std::string& what, const MemoryLimit& limit,
                  bool at_line = true);

/// "1.5 GiB", "640 MiB", "12 KiB": bytes for messages.
std::string size_text(double bytes);

/// Lower-case copy (ASCII).
std::string lower(std::string_view s);

/// A token for an error message: the first 40 characters, quoted, non-printable bytes as \xNN.
std::string quote(std::string_view tok);

}  // namespace waco::kernels::io_detail
