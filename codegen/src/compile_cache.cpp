// The on-disk compile cache (compiler.hpp has its layout and guarantees):
// - The key is SHA-256 (FIPS 180-4, implemented below: ~50 lines, no dependency) over a
//   length-prefixed record of everything that changes the produced code; 128 bits are kept
//   (cache_key).
// - The cache directory is created on demand (make_directories), the /tmp fallback checked
//   (check_tmp_fallback), and temporaries of processes that no longer run removed
//   (remove_stale_temporaries). Files are installed atomically: written to mkstemp names in the
//   cache directory and rename()d into place (write_file_atomically).
// - The read-only folders of kernels compiled ahead of time (shipped_kernel_dirs): first by the
//   compiler versions they record (shipped_by_recorded_compiler, record_shipped_compiler: no
//   compiler run), then by this machine's compiler after the cache directory (shipped_library;
//   in_cache, compile_and_load).
#include "compiler_internal.hpp"

#include <dirent.h>
#if defined(__x86_64__) && defined(__GNUC__)
#define WACO_SHA_NI 1  // the SHA extensions' code is built (used where the CPU has them)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/memo.hpp"
#include "waco/kernels/process.hpp"

#ifndef WACO_SHIPPED_KERNELS_DIR
#define WACO_SHIPPED_KERNELS_DIR ""
#endif

namespace waco::codegen {

using namespace detail;

namespace {

// ---------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4).

class Sha256 {
 public:
  /// `accelerated`: with the SHA extensions where the CPU has them (the same digest).
  explicit Sha256(bool accelerated = true) : accelerated_(accelerated && sha_ni_available()) {}
  void update(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    while (n > 0) {
      const std::size_t take = std::min(n, std::size_t{64} - fill_);
      std::memcpy(block_.data() + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
  }
  void update(const std::string& s) { update(s.data(), s.size()); }

  std::array<unsigned char, 32> finish() {
    const std::uint64_t bits = total_ * 8;
    const unsigned char pad = 0x80;
    update(&pad, 1);
    const unsigned char zero = 0;
    while (fill_ != 56) update(&zero, 1);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(len, 8);
    std::array<unsigned char, 32> out{};
    for (int i = 0; i < 8; ++i)
      for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<unsigned char>(h_[i] >> (24 - 8 * b));
    return out;
  }

 private:
  /// The round constants (FIPS 180-4, 4.2.2), 16-byte aligned for the SHA extensions' loads.
  alignas(16) static constexpr std::uint32_t kRound[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};

  static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void compress() {
#ifdef WACO_SHA_NI
    if (accelerated_) return compress_sha_ni(h_.data(), block_.data());
#endif
    compress_portable();
  }

  void compress_portable() {
    const std::uint32_t* k = kRound;
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t{block_[4 * i]} << 24) | (std::uint32_t{block_[4 * i + 1]} << 16) |
             (std::uint32_t{block_[4 * i + 2]} << 8) | std::uint32_t{block_[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
                  h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }

#ifdef WACO_SHA_NI
  /// One block with the SHA extensions (SHA-NI; Intel's SHA-256 guide, the usual two-rounds-a-
  /// step layout): the same digest as compress_portable, ~5x faster (a kernel source's key).
  __attribute__((target("sha,sse4.1"))) static void compress_sha_ni(std::uint32_t* h,
                                                                    const unsigned char* block) {
    const std::uint32_t* k = kRound;
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    // The state as the instructions hold it: ABEF and CDGH.
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)), 0xB1);
    __m128i cdgh =
        _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 4)), 0x1B);
    __m128i abef = _mm_alignr_epi8(t, cdgh, 8);
    cdgh = _mm_blend_epi16(cdgh, t, 0xF0);
    const __m128i abef0 = abef, cdgh0 = cdgh;
    __m128i w[16];  // the message schedule, four words each
    for (int i = 0; i < 16; ++i) {
      if (i < 4) {
        w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i)),
                                bswap);
      } else {
        const __m128i m = _mm_sha256msg1_epu32(w[i - 4], w[i - 3]);
        w[i] = _mm_sha256msg2_epu32(_mm_add_epi32(m, _mm_alignr_epi8(w[i - 1], w[i - 2], 4)),
                                    w[i - 1]);
      }
      __m128i m = _mm_add_epi32(w[i], _mm_load_si128(reinterpret_cast<const __m128i*>(k + 4 * i)));
      // Two rounds into cdgh (now the newer ABEF; abef the older, i.e. the CDGH), two back.
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);
      m = _mm_shuffle_epi32(m, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, m);
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
    t = _mm_shuffle_epi32(abef, 0x1B);                                                 // FEBA
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);                                              // DCHG
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm_blend_epi16(t, cdgh, 0xF0));   // DCBA
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + 4), _mm_alignr_epi8(cdgh, t, 8));  // HGFE
  }
#endif

  std::array<std::uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  std::size_t fill_ = 0;
  std::uint64_t total_ = 0;
  bool accelerated_ = false;  ///< the SHA extensions, asked for and present
};

// ---------------------------------------------------------------------------------------------
// Cache key.

/// When the flags ask for host-specific code (-march=native and friends), the same flags mean
/// different code on another CPU; a cache shared across machines (e.g. an NFS home) must not hand
/// one machine's object to another. The CPU model and feature flags from /proc/cpuinfo (or
/// uname's machine when that is absent) identify the host.
const std::string& host_identity() {
  static const std::string identity = [] {
    const kernels::CpuinfoLines& cpu = kernels::cpuinfo_identity_lines();
    utsname u{};
    std::string machine = ::uname(&u) == 0 ? u.machine : "unknown";
    return machine + "\n" + cpu.model + "\n" + cpu.flags;
  }();
  return identity;
}

/// The first `bytes` bytes of a digest in lowercase hex.
std::string hex(const std::array<unsigned char, 32>& digest, std::size_t bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

void hash_field(Sha256& h, const std::string& name, const std::string& value) {
  h.update(name + " " + std::to_string(value.size()) + "\n");
  h.update(value);
  h.update("\n", 1);
}

}  // namespace

namespace detail {

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int make_temp(const std::string& prefix, std::string& name) {
  std::string templ = prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  const int fd = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot create a temporary file '" + templ + "' in the kernel cache: " +
                    errno_text(err),
                "make the cache directory writable or choose another one (CompilerOptions::"
                "cache_dir / --cache-dir)");
  }
  name.assign(buf.data());
  return fd;
}

void write_file_atomically(const std::string& final_path, const std::string& content, mode_t mode) {
  std::string tmp;
  const int fd = make_temp(final_path + ".tmp." + std::to_string(::getpid()) + ".", tmp);
  TempFileGuard guard(tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      throw BuildEnvironmentError("cannot write '" + tmp + "': " + errno_text(err), "check free space in the cache");
    }
    done += static_cast<std::size_t>(w);
  }
  ::fchmod(fd, mode);
  if (::close(fd) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot write '" + tmp + "': " + errno_text(err), "check free space in the cache");
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot install '" + final_path + "': " + errno_text(err),
                "make the cache directory writable or choose another one");
  }
  guard.release();
}

void make_directories(const std::string& dir) {
  const std::string hint =
      "choose another kernel cache directory (CompilerOptions::cache_dir / --cache-dir) or "
      "remove what is in the way";
  if (dir.empty()) throw BuildEnvironmentError("the kernel cache directory is an empty path", hint);
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    const std::string prefix = dir.substr(0, pos);
    if (prefix.empty() || prefix == "/") continue;
    if (::mkdir(prefix.c_str(), 0755) == 0) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) continue;
      throw BuildEnvironmentError("cannot create the kernel cache directory '" + dir + "': '" + prefix +
                      "' exists and is not a directory",
                  hint);
    }
    throw BuildEnvironmentError("cannot create the kernel cache directory '" + dir + "': mkdir '" + prefix +
                    "': " + errno_text(err),
                hint);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("the kernel cache directory '" + dir + "' is not writable: " + errno_text(err),
                hint);
  }
}

std::string resolve_cache_dir(const CompilerOptions& opts) {
  return opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
}

void check_tmp_fallback(const std::string& dir) {
  const std::string top = "/tmp/waco-hybrid-" + std::to_string(::getuid());
  if (dir.rfind(top + "/", 0) != 0) return;
  struct stat st {};
  if (::lstat(top.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    throw BuildEnvironmentError("the kernel cache directory '" + top +
                    "' is not a directory owned by this user (or is a symbolic link)",
                "set XDG_CACHE_HOME or HOME, or choose a cache directory (--cache-dir)");
}

void remove_stale_temporaries(const std::string& dir, const std::string& key) {
  // Every key's the first time in this process (a folder of thousands of kernels is listed once).
  static std::mutex swept_mutex;
  static std::set<std::string> swept;
  bool every_key = false;
  {
    const std::lock_guard<std::mutex> lock(swept_mutex);
    every_key = swept.insert(dir).second;
  }
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string me = std::to_string(::getpid());
  const std::string own = key + ".";
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const bool mine = name.rfind(own, 0) == 0;
    if (!mine && !every_key) continue;
    const auto tmp = name.find(".tmp.");
    if (tmp == std::string::npos) continue;
    // Another key's: only a kernel's source or library (write_file_atomically's, the compiler's).
    if (!mine && !(tmp >= 3 && name.compare(tmp - 3, 3, ".so") == 0) &&
        !(tmp >= 4 && name.compare(tmp - 4, 4, ".cpp") == 0))
      continue;
    const auto pid_end = name.find('.', tmp + 5);
    const std::string pid = name.substr(tmp + 5, pid_end == std::string::npos ? std::string::npos
                                                                            : pid_end - tmp - 5);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid == me) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;
    ::unlink(join_path(dir, name).c_str());
  }
  ::closedir(d);
}

std::string shipped_library(const std::string& key) {
  for (const std::string& dir : shipped_kernel_dirs()) {
    const std::string path = join_path(dir, key + ".so");
    if (is_regular_file(path)) return path;
  }
  return {};
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Public API.

std::string default_cache_dir() { return join_path(kernels::user_cache_dir(), "kernels"); }

namespace {

/// What a key is kept under within a process: the compiler (its name, or a version line), the
/// flags and the source.
std::string memo_key(const std::string& compiler, const std::string& source,
                     const CompilerOptions& opts) {
  std::string k = compiler;
  for (const std::string& f : opts.flags) k += '\0' + f;
  k += '\1';
  k += source;
  return k;
}

/// The key of `source` compiled with `opts` by the compiler whose version line is `version`.
std::string compute_cache_key(const std::string& source, const CompilerOptions& opts,
                              const std::string& version) {
  Sha256 h;
  hash_field(h, "format", "waco-hybrid kernel cache v" + std::to_string(kCompilerCacheFormatVersion));
  hash_field(h, "compiler", version);
  bool native = false;
  h.update("flags " + std::to_string(opts.flags.size()) + "\n");
  for (const std::string& f : opts.flags) {
    hash_field(h, "flag", f);
    native = native || f.find("native") != std::string::npos;
  }
  if (native) hash_field(h, "host", host_identity());
  hash_field(h, "source", source);
  return hex(h.finish(), 16);  // 128 bits
}

}  // namespace

bool detail::sha_ni_available() {
#ifdef WACO_SHA_NI
  // CPUID itself, not __builtin_cpu_supports("sha"): Clang (14) has no "sha" feature name
  // there, and the project builds with it too (the fuzz targets, scripts/fuzz.sh). SHA: leaf 7,
  // EBX bit 29; SSE4.1: leaf 1, ECX bit 19.
  static const bool available = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19))) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b & (1u << 29)) != 0;
  }();
  return available;
#else
  return false;
#endif
}

std::string detail::sha256_hex(const std::string& data, bool accelerated) {
  Sha256 h(accelerated);
  h.update(data);
  return hex(h.finish(), 32);
}

std::string cache_key(const std::string& source, const CompilerOptions& opts) {
  // Once per process and (compiler, flags, source): the SHA-256 of a kernel's source (several
  // kilobytes) cost more than finding it again, and a plan asks for each nominee's key twice (is it
  // compiled? then load it). The compiler's version and the host are read once per process too.
  static kernels::Memo<std::string, std::string> memo(512);
  return memo.get(memo_key(opts.compiler, source, opts),
                  [&] { return compute_cache_key(source, opts, compiler_version(opts.compiler)); });
}

namespace {

constexpr const char* kShippedCompilers = "compilers.txt";

/// The compiler version lines a shipped folder records (record_shipped_compiler), kept while
/// the file stays.
std::vector<std::string> recorded_compilers(const std::string& dir) {
  static kernels::PerFileCache<std::vector<std::string>> kept;
  const std::string path = join_path(dir, kShippedCompilers);
  return kept.get(path, [&] {
    std::vector<std::string> lines;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && std::find(lines.begin(), lines.end(), line) == lines.end())
        lines.push_back(line);
    return lines;
  });
}

/// The keys a shipped folder's bundle lists (build_kernel_bundle's index), kept while the file
/// stays; null without one.
std::shared_ptr<const std::set<std::string>> bundle_keys(const std::string& dir) {
  static kernels::PerFileCache<std::shared_ptr<const std::set<std::string>>> kept;
  const std::string path = join_path(dir, kBundleIndex);
  return kept.get(path, [&] {
    auto keys = std::make_shared<std::set<std::string>>();
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') keys->insert(line);
    return std::shared_ptr<const std::set<std::string>>(std::move(keys));
  });
}

}  // namespace

namespace detail {

ShippedFind shipped_by_recorded_compiler(const std::string& source, const CompilerOptions& opts) {
  // Once per process and (version, flags, source), as cache_key.
  static kernels::Memo<std::string, std::string> memo(512);
  for (const std::string& dir : shipped_kernel_dirs()) {
    const std::vector<std::string> versions = recorded_compilers(dir);
    if (versions.empty()) continue;
    const std::shared_ptr<const std::set<std::string>> bundled = bundle_keys(dir);
    for (const std::string& version : versions) {
      const std::string key = memo.get(memo_key(version, source, opts),
                                        [&] { return compute_cache_key(source, opts, version); });
      const std::string path = join_path(dir, key + ".so");
      if (bundled && bundled->count(key)) return {path, key, join_path(dir, kBundleLibrary)};
      if (is_regular_file(path)) return {path, key, {}};
    }
  }
  return {};
}

}  // namespace detail

void record_shipped_compiler(const std::string& dir, const CompilerOptions& opts) {
  const std::string version = compiler_version(opts.compiler);
  std::vector<std::string> lines = recorded_compilers(dir);
  if (std::find(lines.begin(), lines.end(), version) != lines.end()) return;
  lines.push_back(version);
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  make_directories(dir);
  write_file_atomically(join_path(dir, kShippedCompilers), text, 0644);
}

std::vector<std::string> shipped_kernel_dirs() {
  if (const char* env = std::getenv("WACO_SHIPPED_KERNELS"); env != nullptr && *env != '\0') {
    std::vector<std::string> dirs;
    if (std::string(env) == "none") return dirs;
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
    return dirs;
  }
  return {kernels::shipped_dir("kernels", WACO_SHIPPED_KERNELS_DIR)};
}

bool in_cache(const std::string& source, const CompilerOptions& opts) {
  if (!detail::shipped_by_recorded_compiler(source, opts).path.empty()) return true;
  const std::string key = cache_key(source, opts);
  return is_regular_file(join_path(resolve_cache_dir(opts), key + ".so")) ||
         !shipped_library(key).empty();
}

}  // namespace waco::codegen
