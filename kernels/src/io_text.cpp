// The buffered line reader and number parsers behind the Matrix Market and FROSTT readers (see
// io_text.hpp). Plain files go through read(2) into a 1 MiB buffer; gzip files (magic 1f 8b)
// through gzread. zlib's gzread reports a truncated stream by returning a short count or 0 with
// gzerror() set to Z_BUF_ERROR ("unexpected end of file"), and gzclose() returns Z_BUF_ERROR when
// the last read stopped inside a member, so both are checked before end of file is believed.
// Writers go through OutputFile: a temporary file beside the target, renamed into place.
#include "io_text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "waco/kernels/context.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels::io_detail {

namespace {

constexpr std::size_t kBlockBytes = std::size_t{1} << 20;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

TextReader::TextReader(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      fail_file("no such file", "check the path (relative paths are taken from the current directory)");
    fail_file("cannot access the file: " + errno_text(err), "check the path and its permissions");
  }
  if (S_ISDIR(st.st_mode)) fail_file("is a directory, not a file", "give the path of a file inside it");
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
    fail_file("is not a regular file", "give the path of a Matrix Market or FROSTT file");
  file_bytes_ = static_cast<std::int64_t>(st.st_size);
  regular_ = S_ISREG(st.st_mode);

  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail_file("cannot open: " + errno_text(errno), "check the file's permissions");

  // A block of 1 MiB, less for a small file (a buffer grows when a line does not fit): the
  // fuzz targets read thousands of small files a second.
  const std::int64_t want = S_ISREG(st.st_mode) ? std::max<std::int64_t>(file_bytes_ * 4, 4096) : kBlockBytes;
  buf_.resize(static_cast<std::size_t>(std::min<std::int64_t>(want, kBlockBytes)));
  // Read the first block from the raw file and look for the gzip magic bytes.
  std::size_t got = 0;
  while (got < 2) {
    const ssize_t n = ::read(fd_, buf_.data() + got, buf_.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      fail_file("cannot read: " + errno_text(err), "check the file and the device it is on");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  // Other compressors are recognised only to say so clearly.
  struct Magic {
    const char* bytes;
    std::size_t size;
    const char* name;
    const char* tool;
  };
  static const Magic kOther[] = {{"BZh", 3, "bzip2", "bunzip2"},
                                 {"\xfd" "7zXZ", 5, "xz", "unxz"},
                                 {"\x28\xb5\x2f\xfd", 4, "zstd", "unzstd"},
                                 {"PK\x03\x04", 4, "zip", "unzip"}};
  for (const Magic& m : kOther)
    if (got >= m.size && std::memcmp(buf_.data(), m.bytes, m.size) == 0) {
      ::close(fd_);
      fd_ = -1;
      fail_file(std::string("is compressed with ") + m.name + ", which is not supported (only gzip is)",
                std::string("decompress it first (") + m.tool + "), or recompress it with gzip");
    }
  if (got >= 2 && static_cast<unsigned char>(buf_[0]) == 0x1f &&
      static_cast<unsigned char>(buf_[1]) == 0x8b) {
    gzip_ = true;
    if (::lseek(fd_, 0, SEEK_SET) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      fail_file("cannot rewind the gzip file: " + errno_text(err),
                "decompress it first (gunzip) or give a regular file");
    }
    gzFile gz = gzdopen(fd_, "rb");
    if (gz == nullptr) {
      ::close(fd_);
      fd_ = -1;
      fail_file("cannot open the gzip stream (out of memory?)");
    }
    fd_ = -1;  // now owned by gz
    gz_ = gz;
    gzbuffer(gz, 1u << 18);
    end_ = 0;
  } else {
    end_ = got;
    bytes_ = static_cast<std::int64_t>(got);
    if (got == 0) eof_ = true;
  }
}

TextReader::~TextReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
  if (fd_ >= 0) ::close(fd_);
}

void TextReader::fail(const std::string& problem, const std::string& hint) const {
  throw Error(path_ + ":" + std::to_string(line_number_) + ": " + problem, hint);
}

void TextReader::fail_file(const std::string& problem, const std::string& hint) const {
  throw Error(path_ + ": " + problem, hint);
}

void TextReader::close_gzip_checked() {
  gzFile gz = static_cast<gzFile>(gz_);
  gz_ = nullptr;
  const int rc = gzclose(gz);
  if (rc == Z_BUF_ERROR)
    fail_file("gzip data is truncated: it ends inside a compressed stream, after " + std::to_string(bytes_) +
                  " bytes of uncompressed text",
              "the file is incomplete: copy or download it again");
  if (rc != Z_OK)
    fail_file("error closing the gzip stream (zlib code " + std::to_string(rc) + ")",
              "check the file; try `gzip -t` on it");
}

std::size_t TextReader::fill() {
  if (eof_) return 0;
  const std::size_t room = buf_.size() - end_;
  WACO_ASSERT(room > 0, "TextReader::fill called with a full buffer");
  if (gzip_) {
    gzFile gz = static_cast<gzFile>(gz_);
    const int n = gzread(gz, buf_.data() + end_, static_cast<unsigned>(room));
    int errnum = Z_OK;
    const char* msg = gzerror(gz, &errnum);
    if (n < 0 || (errnum != Z_OK)) {
      // zlib prefixes its message with the stream's name ("<fd:3>: "): keep only the reason.
      std::string what = msg != nullptr ? msg : "unknown zlib error";
      if (what.rfind("<fd:", 0) == 0 && what.find(">: ") != std::string::npos)
        what.erase(0, what.find(">: ") + 3);
      const std::string where =
          " after " + std::to_string(bytes_ + (n > 0 ? n : 0)) + " bytes of uncompressed text";
      if (errnum == Z_BUF_ERROR)
        fail_file("gzip data is truncated (zlib: " + what + ")" + where,
                  "the file is incomplete: copy or download it again");
      if (errnum == Z_ERRNO)
        fail_file("read error in the gzip file: " + errno_text(errno), "check the file and its device");
      fail_file("gzip data is corrupt (zlib: " + what + ")" + where, "the file is damaged; `gzip -t` checks it");
    }
    if (n == 0) {
      eof_ = true;
      close_gzip_checked();
      return 0;
    }
    end_ += static_cast<std::size_t>(n);
    bytes_ += n;
    return static_cast<std::size_t>(n);
  }
  for (;;) {
    const ssize_t n = ::read(fd_, buf_.data() + end_, room);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_file("read error: " + errno_text(errno), "check the file and its device");
    }
    if (n == 0) {
      eof_ = true;
      return 0;
    }
    end_ += static_cast<std::size_t>(n);
    bytes_ += n;
    return static_cast<std::size_t>(n);
  }
}

bool TextReader::next_line(std::string_view& line) {
  std::size_t scan = begin_;
  for (;;) {
    const char* base = buf_.data();
    const void* nl = scan < end_ ? std::memchr(base + scan, '\n', end_ - scan) : nullptr;
    if (nl != nullptr) {
      const std::size_t pos = static_cast<std::size_t>(static_cast<const char*>(nl) - base);
      std::size_t stop = pos;
      if (stop > begin_ && base[stop - 1] == '\r') --stop;
      line = std::string_view(base + begin_, stop - begin_);
      begin_ = pos + 1;
      ++line_number_;
      return true;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      std::size_t stop = end_;
      if (stop > begin_ && base[stop - 1] == '\r') --stop;
      line = std::string_view(base + begin_, stop - begin_);
      begin_ = end_;
      ++line_number_;
      return true;
    }
    // No newline in what is buffered: keep the partial line, make room and read more.
    const std::size_t partial = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, partial);
      begin_ = 0;
      end_ = partial;
    }
    if (end_ == buf_.size()) {
      if (buf_.size() >= kMaxLineBytes) {
        ++line_number_;
        fail("line is longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB",
             "this does not look like a text file of the expected format");
      }
      buf_.resize(buf_.size() * 2);
    }
    scan = end_;
    fill();
  }
}

template <class V>
ParseStatus parse_real(std::string_view tok, V& out) {
  const char* b = tok.data();
  const char* e = b + tok.size();
  if (b < e && *b == '+') ++b;
  if (b == e) return ParseStatus::Malformed;
  char local[128];
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec == std::errc() && p == e) return ParseStatus::Ok;
  // Fortran-style exponent (1.5D+03): copy with 'e' and retry.
  if (ec == std::errc() && (*p == 'd' || *p == 'D') && static_cast<std::size_t>(e - b) < sizeof(local)) {
    const std::size_t n = static_cast<std::size_t>(e - b);
    std::memcpy(local, b, n);
    local[p - b] = 'e';
    return parse_real(std::string_view(local, n), out);
  }
  if (ec == std::errc::result_out_of_range && p == e) {
    // Below the type's subnormal range rounds to zero; beyond its largest value is an overflow.
    if (static_cast<std::size_t>(e - b) >= sizeof(local)) return ParseStatus::Overflow;
    const std::size_t n = static_cast<std::size_t>(e - b);
    std::memcpy(local, b, n);
    local[n] = '\0';
    const double d = std::strtod(local, nullptr);
    if (std::fabs(d) < 1.0) {
      out = static_cast<V>(d);
      return ParseStatus::Ok;
    }
    return ParseStatus::Overflow;
  }
  return ParseStatus::Malformed;
}

template ParseStatus parse_real<float>(std::string_view, float&);
template ParseStatus parse_real<double>(std::string_view, double&);

ParseStatus parse_value(std::string_view tok, Dtype dtype, double& out) {
  if (dtype == Dtype::F64) return parse_real(tok, out);
  float f = 0.0f;
  const ParseStatus st = parse_real(tok, f);
  out = f;
  return st;
}

void fail_value_range(const TextReader& in, std::string_view tok, Dtype dtype,
                      const std::string& what) {
  if (dtype == Dtype::F32)
    in.fail("value " + quote(tok) + " is outside the single-precision range (|v| > 3.4e38)",
            "compute in double precision (--dtype f64), or rescale the " + what);
  in.fail("value " + quote(tok) + " is outside the double-precision range (|v| > 1.8e308)",
          "rescale the " + what);
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
  check_writable(path);
  static std::atomic<unsigned> counter{0};
  tmp_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    tmp_.clear();
    fail("cannot create the file: " + errno_text(err),
         "choose an output path in a writable directory");
  }
  const bool gz = path.size() > 3 && lower(path.substr(path.size() - 3)) == ".gz";
  if (gz) {
    gzFile g = gzdopen(fd_, "wb6");
    if (g == nullptr) {
      ::close(fd_);
      fd_ = -1;
      fail("cannot start the gzip stream (out of memory?)");
    }
    fd_ = -1;
    gz_ = g;
  }
  buf_.reserve(kFlushBytes + 4096);
}

OutputFile::~OutputFile() {
  if (committed_) return;
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void OutputFile::fail(const std::string& problem, const std::string& hint) {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
  gz_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  throw Error(path_ + ": " + problem, hint);
}

void OutputFile::put_float(float v) {
  char tmp[48];
  auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
  WACO_ASSERT(r.ec == std::errc(), "to_chars(float) failed");
  buf_.append(tmp, r.ptr);
}

void OutputFile::put_value(double v) {
  const auto f = static_cast<float>(v);
  if (static_cast<double>(f) == v || std::isnan(v)) return put_float(f);
  char tmp[48];
  auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
  WACO_ASSERT(r.ec == std::errc(), "to_chars(double) failed");
  buf_.append(tmp, r.ptr);
}

void OutputFile::put_comment(const std::string& text, const char* prefix) {
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string_view ln(text.data() + start, nl - start);
    if (!ln.empty() && ln.back() == '\r') ln.remove_suffix(1);
    if (!(nl == text.size() && ln.empty() && start > 0)) {
      buf_.append(prefix);
      if (!ln.empty()) {
        buf_.push_back(' ');
        buf_.append(ln);
      }
      buf_.push_back('\n');
    }
    start = nl + 1;
  }
}

void OutputFile::flush() {
  const char* p = buf_.data();
  std::size_t left = buf_.size();
  if (gz_ != nullptr) {
    while (left > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(left, 1u << 30));
      const int n = gzwrite(static_cast<gzFile>(gz_), p, chunk);
      if (n <= 0) {
        int errnum = Z_OK;
        const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
        fail(std::string("write error (zlib: ") + (msg != nullptr ? msg : "?") + ")",
             "check the free space on the output device");
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  } else {
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write error: " + errno_text(errno), "check the free space on the output device");
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  buf_.clear();
}

void OutputFile::commit() {
  WACO_ASSERT(!committed_, "OutputFile committed twice");
  flush();
  if (gz_ != nullptr) {
    const int rc = gzclose(static_cast<gzFile>(gz_));
    gz_ = nullptr;
    if (rc != Z_OK) fail("error finishing the gzip stream (zlib code " + std::to_string(rc) + ")",
                         "check the free space on the output device");
  } else {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail("error closing the file: " + errno_text(errno),
                      "check the free space on the output device");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail("cannot move the finished file into place: " + errno_text(errno),
         "check that the path is not a directory and that the directory is writable");
  committed_ = true;
}

MemoryLimit memory_limit(const ReadOptions& opts) {
  if (opts.max_memory > 0) return {opts.max_memory, "ReadOptions::max_memory"};
  if (const char* env = std::getenv("WACO_MAX_INPUT_MEMORY"); env != nullptr && *env != '\0') {
    const std::string text = env;
    std::size_t k = 0;
    std::uint64_t v = 0;
    bool overflow = false;
    for (; k < text.size() && text[k] >= '0' && text[k] <= '9'; ++k) {
      overflow |= v > (std::uint64_t{1} << 62) / 10;
      v = v * 10 + static_cast<unsigned>(text[k] - '0');
    }
    int shift = 0;
    std::string unit = lower(std::string_view(text).substr(k));
    if (!unit.empty() && unit.back() == 'b') unit.pop_back();
    if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();
    if (unit == "k") shift = 10;
    else if (unit == "m") shift = 20;
    else if (unit == "g") shift = 30;
    else if (unit == "t") shift = 40;
    else if (!unit.empty()) k = 0;  // an unknown unit: malformed
    overflow |= shift > 0 && v > (std::uint64_t{1} << (62 - shift));
    if (k == 0 || v == 0 || overflow)
      throw Error("WACO_MAX_INPUT_MEMORY='" + text + "' is not a size in bytes",
                  "give bytes, optionally with K, M, G or T (powers of 1024), e.g. WACO_MAX_INPUT_MEMORY=64G");
    return {static_cast<std::int64_t>(v << shift), "WACO_MAX_INPUT_MEMORY"};
  }
  // What is free now, not the machine's size: a gzip bomb or a huge declared size is stopped
  // before it takes the memory other processes hold (on a 24 GB machine, the physical figure let a
  // 20 GB bomb grow to ~18 GB).
  const double avail = available_memory_bytes();
  const double cap = static_cast<double>(std::int64_t{1} << 62);
  return {static_cast<std::int64_t>(std::min(avail, cap)), "the memory available now (MemAvailable)"};
}

void check_memory(const TextReader& in, double need, const std::string& what, const MemoryLimit& limit,
                  bool at_line) {
  if (need <= static_cast<double>(limit.bytes)) return;
  const std::string problem = what + " needs about " + size_text(need) +
                              " of memory, more than the input memory limit of " +
                              size_text(static_cast<double>(limit.bytes)) + " (" + limit.source + ")";
  const std::string hint =
      "set WACO_MAX_INPUT_MEMORY (bytes, or with K, M, G, T: e.g. WACO_MAX_INPUT_MEMORY=64G) to raise it, "
      "if this machine can hold the operand";
  if (at_line) in.fail(problem, hint);
  in.fail_file(problem, hint);
}

std::string size_text(double bytes) {
  char buf[48];
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

std::string quote(std::string_view tok) {
  constexpr std::size_t kMax = 40;
  std::string r = "'";
  for (const char ch : tok.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f) {
      r.push_back(ch);
    } else {  // keep the message on one printable line
      static const char* kHex = "0123456789abcdef";
      r += "\\x";
      r.push_back(kHex[u >> 4]);
      r.push_back(kHex[u & 15]);
    }
  }
  if (tok.size() > kMax) r += "...";
  r += "'";
  return r;
}

}  // namespace waco::kernels::io_detail

namespace waco::kernels {

std::int64_t input_memory_limit(const ReadOptions& opts) { return io_detail::memory_limit(opts).bytes; }

}  // namespace waco::kernels
