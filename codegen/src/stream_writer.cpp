// The output's streaming writer (stream_writer.hpp).
#include "stream_writer.hpp"

#include <utility>
#include <vector>

namespace waco::codegen {
namespace {

/// The streaming writer of a register block's flush (Analysis::stream_flush), in the source
/// before the kernel. Each thread flushes its blocks in order, each where the previous ended (a
/// run: one static range or dynamic chunk of rows); the writer assembles the run into whole
/// cache lines and writes each with one non-temporal store, so no line of the output is read
/// before it is written. Only a run's first and last lines, when the run does not start or end
/// on a line, take plain (masked) stores. Measured (issue 36, SpMM J=64 beyond the LLC: a 4M-row
/// 2-D stencil, 2 threads, split=j:64 order=i,j1,k,j0 format=UC static, side by side in a
/// harness, AVX-512): 1.29-1.45x the plain stores with a 64-byte-aligned output, 1.16-1.31x with
/// the output and B 16 bytes off a line (as large std::vector and malloc buffers are), 1.25-1.27x
/// with only the output off. Plain stores to the lines at either end of every block instead lost
/// (0.69-0.95x: the stores pull the neighbouring lines into the cache, and a streaming store to a
/// cached line first evicts it). Assembling the lines in memory with copy loops lost too (0.58x:
/// the compiler made them memcpy calls); with the conditional loops below, 1.06-1.08x, which is
/// what the AVX2 form gets (AVX-512 assembles a line in a register with masked loads). Other x86
/// CPUs assemble lines in memory, and other CPUs copy with plain stores.
constexpr const char* kStreamWriter = R"WACO(// The output's streaming writer (WacoArgs::stream_out): a thread's contiguous pieces of the output
// are assembled into whole 64-byte lines, each written with one non-temporal store (the line is
// not read first); a run's partial first and last lines take plain stores (waco_stream_finish).
#if defined(WACO_STREAM_PROBE)
// Tests only (compiled with -DWACO_STREAM_PROBE): the whole lines written (non-temporal on x86).
WACO_PROBE_STORAGE long long waco_stream_probe_lines = 0;
WACO_STORAGE void waco_stream_probe_count() { __atomic_fetch_add(&waco_stream_probe_lines, 1, __ATOMIC_RELAXED); }
#else
WACO_STORAGE void waco_stream_probe_count() {}
#endif
struct waco_stream_line {
  waco_value_t* line;     // the line being assembled (null: none)
  long long start, next;  // its values held: [start, next) of the line's values
#if defined(__AVX512F__)
  __m512i held;
#else
  alignas(64) waco_value_t held[64 / sizeof(waco_value_t)];
#endif
};
WACO_STORAGE void waco_stream_put(waco_value_t* line, const waco_value_t* from) {
  waco_stream_probe_count();
#if defined(__AVX512F__)
  _mm512_stream_si512((__m512i*)line, _mm512_loadu_si512((const void*)from));
#elif defined(__AVX__)
  _mm256_stream_si256((__m256i*)line, _mm256_loadu_si256((const __m256i*)from));
  _mm256_stream_si256((__m256i*)line + 1, _mm256_loadu_si256((const __m256i*)from + 1));
#elif defined(__SSE2__)
  for (int q = 0; q < 4; ++q) _mm_stream_si128((__m128i*)line + q, _mm_loadu_si128((const __m128i*)from + q));
#else
  for (long long q = 0; q < (long long)(64 / sizeof(waco_value_t)); ++q) line[q] = from[q];
#endif
}
#if defined(__AVX512F__)
// The 32-bit lanes of values [lo, hi) of a line.
WACO_STORAGE __mmask16 waco_stream_lanes(long long lo, long long hi) {
  const long long r = sizeof(waco_value_t) / 4;
  return (__mmask16)(((1u << (hi * r)) - 1u) & ~((1u << (lo * r)) - 1u));
}
#endif
// Writes the values held of the line being assembled with plain stores.
WACO_STORAGE void waco_stream_drop(waco_stream_line* w) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_epi32((void*)w->line, waco_stream_lanes(w->start, w->next), w->held);
#else
  const long long lo = w->start, hi = w->next;
  for (long long t = 0; t < (long long)(64 / sizeof(waco_value_t)); ++t)
    if (t >= lo && t < hi) w->line[t] = w->held[t];
#endif
  w->line = 0;
}
// Copies n values from src to dst (the next piece of the output).
WACO_STORAGE void waco_stream_store(waco_stream_line* w, waco_value_t* dst, const waco_value_t* src, long long n) {
  const long long L = 64 / sizeof(waco_value_t);
  if (w->line && dst != w->line + w->next) waco_stream_drop(w);
  if (!w->line) {  // a run starts: inside a line, or at one
    const long long in = (long long)(((unsigned long long)dst & 63) / sizeof(waco_value_t));
    if (in) {
      w->line = dst - in;
      w->start = w->next = in;
#if defined(__AVX512F__)
      w->held = _mm512_setzero_si512();
#endif
    }
  }
  long long q = 0;
  if (w->line) {  // continue the line being assembled
    const long long at = w->next, take = L - at < n ? L - at : n;
#if defined(__AVX512F__)
    w->held = _mm512_mask_expandloadu_epi32(w->held, waco_stream_lanes(at, at + take), (const void*)src);
#else
    for (long long t = 0; t < L; ++t)
      if (t >= at && t < at + take) w->held[t] = src[t - at];
#endif
    w->next = at + take;
    if (w->next < L) return;
    q = take;
    if (w->start > 0) {
      waco_stream_drop(w);
    } else {
#if defined(__AVX512F__)
      waco_stream_probe_count();
      _mm512_stream_si512((__m512i*)w->line, w->held);
#else
      waco_stream_put(w->line, w->held);
#endif
      w->line = 0;
    }
  }
  for (; q + L <= n; q += L) waco_stream_put(dst + q, src + q);
  if (q < n) {  // the rest starts the next line
    const long long rest = n - q;
    w->line = dst + q;
    w->start = 0;
    w->next = rest;
#if defined(__AVX512F__)
    w->held = _mm512_maskz_loadu_epi32(waco_stream_lanes(0, rest), (const void*)(src + q));
#else
    for (long long t = 0; t < L; ++t)
      if (t < rest) w->held[t] = src[q + t];
#endif
  }
}
// Ends a thread's writing: the line being assembled, then a fence that orders the non-temporal
// stores before the kernel returns.
WACO_STORAGE void waco_stream_finish(waco_stream_line* w) {
  if (w->line) waco_stream_drop(w);
#if defined(__SSE2__)
  _mm_sfence();
#endif
}
)WACO";

}  // namespace

std::string stream_writer_source(SourceForm form) {
  const bool so = form == SourceForm::SharedObject;
  // A header includes <immintrin.h> up front.
  std::string text = so ? std::string("#if defined(__SSE2__)\n#include <immintrin.h>\n#endif\n\n") : std::string();
  text += kStreamWriter;
  // A shared object keeps its helpers to itself and exports the probe's counter (dlsym); a header
  // defines both once however many files include it.
  const std::vector<std::pair<std::string, std::string>> storage = {
      {"WACO_PROBE_STORAGE long long waco_stream_probe_lines = 0;",
       so ? "extern \"C\" { long long waco_stream_probe_lines = 0; }" : "inline long long waco_stream_probe_lines = 0;"},
      {"WACO_STORAGE", so ? "static inline" : "inline"}};
  for (const auto& [name, with] : storage)
    for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + with.size()))
      text.replace(at, name.size(), with);
  return text;
}

}  // namespace waco::codegen
