// The problem in binary (problem_wire.hpp).
#include "problem_wire.hpp"

#include <cstring>
#include <type_traits>

#include "framing.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics::detail {

namespace {

constexpr std::uint32_t kMagic = 0x4c4f4157;  // "WAOL" in the bytes of a little-endian machine
constexpr std::uint32_t kVersion = 8;  // 2: values in double, dense operands typed; 3: the
                                       // reference typed; 4: settle_s; 5: min_run_s; 6: the
                                       // reference optional (else the worker computes it); 7:
                                       // its scales in 16 bits (kernels::Scale); 8: layouts

// ---- encoding: one template over where the bytes go (counted, sent, kept) --------------------

struct CountSink {
  std::uint64_t n = 0;
  bool put(const void*, std::size_t k) {
    n += k;
    return true;
  }
};
struct SocketSink {
  int fd;
  bool put(const void* p, std::size_t k) { return k == 0 || write_bytes(fd, p, k); }
};
struct StringSink {
  std::string s;
  bool put(const void* p, std::size_t k) {
    s.append(static_cast<const char*>(p), k);
    return true;
  }
};

template <class Sink>
class Writer {
 public:
  explicit Writer(Sink& s) : s_(s) {}
  template <class T>
  void value(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    raw(&v, sizeof v);
  }
  template <class T>
  void array(const T* data, std::size_t count) {
    value<std::uint64_t>(count);
    raw(data, count * sizeof(T));
  }
  template <class V>
  void array(const V& v) {
    array(v.data(), v.size());
  }
  void dense(const kernels::DenseMatrix* m) {
    value<std::uint8_t>(m != nullptr);
    if (m == nullptr) return;
    value<std::int32_t>(m->rows);
    value<std::int32_t>(m->cols);
    value<std::uint8_t>(static_cast<std::uint8_t>(m->layout));
    values(m->data);
  }
  /// Typed values: their type, count and bytes.
  void values(const kernels::Values& v) {
    value<std::uint8_t>(static_cast<std::uint8_t>(v.dtype()));
    value<std::uint64_t>(v.size());
    raw(v.raw(), v.size() * kernels::dtype_size(v.dtype()));
  }
  bool ok() const { return ok_; }

 private:
  void raw(const void* p, std::size_t n) {
    if (ok_) ok_ = s_.put(p, n);
  }
  Sink& s_;
  bool ok_ = true;
};

template <class Sink>
bool encode(Sink& sink, const kernels::Problem& p, const kernels::Reference* ref,
            const MeasureOptions& o, int run_threads) {
  Writer<Sink> w(sink);
  w.template value<std::uint32_t>(kMagic);
  w.template value<std::uint32_t>(kVersion);
  for (const int v : {o.warmup, o.repeats, o.threads, o.race_min_runs, o.retake_disturbed,
                      o.settle, o.hardware_counter_runs, o.layouts, run_threads})
    w.template value<std::int32_t>(v);
  for (const double v : {o.tolerance, o.prepare_timeout_s, o.run_timeout_s,
                         o.compare_race_factor, o.compare_screen_margin, o.compare_screen_min_s,
                         o.generated.storage.max_padding, o.generated.compiler.timeout_seconds,
                         o.settle_s, o.min_run_s})
    w.template value<double>(v);
  const codegen::CompilerOptions& c = o.generated.compiler;
  w.array(c.compiler);
  w.template value<std::uint64_t>(c.flags.size());
  for (const std::string& f : c.flags) w.array(f);
  w.array(c.cache_dir);
  w.template value<std::uint8_t>(static_cast<std::uint8_t>(o.generated.race));

  w.template value<std::uint8_t>(static_cast<std::uint8_t>(p.kind));
  w.template value<std::uint8_t>(static_cast<std::uint8_t>(p.value_type));
  if (kernels::needs_tensor(p.kind)) {
    w.array(p.T->dims);
    for (const auto& mode : p.T->idx) w.array(mode);
    w.array(p.T->val);
  } else {
    w.template value<std::int32_t>(p.A->rows);
    w.template value<std::int32_t>(p.A->cols);
    w.array(p.A->row);
    w.array(p.A->col);
    w.array(p.A->val);
  }
  w.dense(p.B);
  w.dense(p.C);
  w.template value<std::uint8_t>(ref != nullptr ? 1 : 0);
  if (ref != nullptr) {
    w.values(ref->value);
    w.array(ref->scale);
  }
  return w.ok();
}

// ---- decoding --------------------------------------------------------------------------------

template <class T>
T get(FrameSource& in) {
  static_assert(std::is_trivially_copyable_v<T>);
  T v;
  in.read(&v, sizeof v);
  return v;
}

template <class V>
void get_array(FrameSource& in, V& v, const char* what) {
  using T = typename V::value_type;
  const auto n = get<std::uint64_t>(in);
  if (n > in.left() / sizeof(T))
    throw WireError(std::string(what) + ": " + std::to_string(n) + " elements announced, " +
                    std::to_string(in.left()) + " bytes left in the frame");
  v.resize(static_cast<std::size_t>(n));
  in.read(v.data(), n * sizeof(T));
}

void check(bool ok, const std::string& what) {
  if (!ok) throw WireError(what);
}

/// Reads Writer::values into v; `expected` the count the caller knows (checked before the
/// values are allocated).
void get_values(FrameSource& in, kernels::Values& v, std::uint64_t expected, const char* what) {
  const auto dtype = get<std::uint8_t>(in);
  check(dtype <= static_cast<std::uint8_t>(kernels::Dtype::F64),
        std::string(what) + ": unknown value type");
  const auto d = static_cast<kernels::Dtype>(dtype);
  const auto n = get<std::uint64_t>(in);
  check(n == expected, std::string(what) + ": " + std::to_string(n) + " values, " +
                           std::to_string(expected) + " expected");
  check(n <= in.left() / kernels::dtype_size(d),
        std::string(what) + ": " + std::to_string(n) + " values announced, " +
            std::to_string(in.left()) + " bytes left in the frame");
  v.assign(d, static_cast<std::size_t>(n));
  in.read(v.raw(), n * kernels::dtype_size(d));
}

bool get_dense(FrameSource& in, kernels::DenseMatrix& m, const char* what) {
  const auto present = get<std::uint8_t>(in);
  check(present <= 1, std::string(what) + ": bad presence flag");
  if (present == 0) return false;
  m.rows = get<std::int32_t>(in);
  m.cols = get<std::int32_t>(in);
  const auto layout = get<std::uint8_t>(in);
  check(m.rows >= 0 && m.cols >= 0, std::string(what) + ": negative extent");
  check(layout <= static_cast<std::uint8_t>(kernels::Layout::ColMajor),
        std::string(what) + ": unknown layout");
  m.layout = static_cast<kernels::Layout>(layout);
  get_values(in, m.data, static_cast<std::uint64_t>(m.rows) * static_cast<std::uint64_t>(m.cols),
             what);
  return true;
}

}  // namespace

void FrameSource::read(void* dst, std::uint64_t n) {
  if (n > left_)
    throw WireError("truncated: " + std::to_string(n) + " more bytes needed, " +
                    std::to_string(left_) + " left in the frame");
  left_ -= n;
  if (mem_ != nullptr) {
    std::memcpy(dst, mem_, static_cast<std::size_t>(n));
    mem_ += n;
    return;
  }
  if (n > 0 && read_bytes(fd_, dst, static_cast<std::size_t>(n), -1.0) != ReadStatus::Ok)
    throw WireTruncated("the frame ended early: the sender closed the socket");
}

void FrameSource::drain() {
  char buf[65536];
  while (left_ > 0) read(buf, std::min<std::uint64_t>(left_, sizeof buf));
}

std::uint64_t load_payload_size(const kernels::Problem& p, const kernels::Reference* ref,
                                const MeasureOptions& opts, int run_threads) {
  CountSink c;
  encode(c, p, ref, opts, run_threads);
  return c.n;
}

bool write_load_frame(int fd, const kernels::Problem& p, const kernels::Reference* ref,
                      const MeasureOptions& opts, int run_threads) {
  if (!write_header(fd, 'L', load_payload_size(p, ref, opts, run_threads))) return false;
  SocketSink s{fd};
  return encode(s, p, ref, opts, run_threads);
}

std::string encode_load(const kernels::Problem& p, const kernels::Reference* ref,
                        const MeasureOptions& opts, int run_threads) {
  StringSink s;
  encode(s, p, ref, opts, run_threads);
  return std::move(s.s);
}

std::unique_ptr<LoadedProblem> read_load(FrameSource& in) {
  check(get<std::uint32_t>(in) == kMagic, "not a problem frame (bad magic number)");
  const auto version = get<std::uint32_t>(in);
  check(version == kVersion, "problem frame version " + std::to_string(version) +
                                 ", this worker reads version " + std::to_string(kVersion));
  auto lp = std::make_unique<LoadedProblem>();
  MeasureOptions& o = lp->options;
  for (int* v : {&o.warmup, &o.repeats, &o.threads, &o.race_min_runs, &o.retake_disturbed,
                 &o.settle, &o.hardware_counter_runs, &o.layouts, &lp->run_threads})
    *v = get<std::int32_t>(in);
  check(o.warmup >= 0 && o.repeats >= 1 && o.threads >= 0 && o.race_min_runs >= 1 &&
            o.retake_disturbed >= 0 && o.settle >= 0 && o.hardware_counter_runs >= 0 &&
            o.layouts >= 1 && o.layouts <= 64 && lp->run_threads >= 1,
        "options out of range (repeats, warmup, threads, race_min_runs, layouts, run threads)");
  for (double* v : {&o.tolerance, &o.prepare_timeout_s, &o.run_timeout_s,
                    &o.compare_race_factor, &o.compare_screen_margin, &o.compare_screen_min_s,
                    &o.generated.storage.max_padding, &o.generated.compiler.timeout_seconds,
                    &o.settle_s, &o.min_run_s})
    *v = get<double>(in);
  check(o.settle_s >= 0 && o.settle_s <= 1, "options out of range (settle_s)");
  check(o.min_run_s >= 0 && o.min_run_s <= 1, "options out of range (min_run_s)");
  codegen::CompilerOptions& c = o.generated.compiler;
  get_array(in, c.compiler, "compiler");
  const auto flags = get<std::uint64_t>(in);
  check(flags <= in.left() / 8, "compiler flags: " + std::to_string(flags) + " announced");
  c.flags.assign(static_cast<std::size_t>(flags), {});
  for (std::string& f : c.flags) get_array(in, f, "compiler flag");
  get_array(in, c.cache_dir, "cache directory");
  const auto race = get<std::uint8_t>(in);
  check(race <= static_cast<std::uint8_t>(codegen::RaceStrategy::Auto), "unknown race strategy");
  o.generated.race = static_cast<codegen::RaceStrategy>(race);

  const auto kind = get<std::uint8_t>(in);
  check(kind <= static_cast<std::uint8_t>(kernels::KernelKind::MTTKRP), "unknown kernel");
  kernels::Problem& p = lp->problem;
  p.kind = static_cast<kernels::KernelKind>(kind);
  const auto value_type = get<std::uint8_t>(in);
  check(value_type <= static_cast<std::uint8_t>(kernels::Dtype::F64), "unknown value type");
  p.value_type = static_cast<kernels::Dtype>(value_type);
  try {
    if (kernels::needs_tensor(p.kind)) {
      kernels::CooTensor& t = lp->tensor;
      get_array(in, t.dims, "tensor dimensions");
      check(t.dims.size() <= 8, "tensor of order " + std::to_string(t.dims.size()));
      t.idx.resize(t.dims.size());
      for (auto& mode : t.idx) get_array(in, mode, "tensor coordinates");
      get_array(in, t.val, "tensor values");
      for (const auto& mode : t.idx)
        check(mode.size() == t.val.size(), "tensor coordinates and values differ in count");
      kernels::check_bounds(t);
      check(kernels::is_canonical(t), "the tensor is not canonical (sorted, unique)");
      p.T = &t;
    } else {
      kernels::CooMatrix& a = lp->matrix;
      a.rows = get<std::int32_t>(in);
      a.cols = get<std::int32_t>(in);
      get_array(in, a.row, "row coordinates");
      get_array(in, a.col, "column coordinates");
      get_array(in, a.val, "values");
      check(a.row.size() == a.val.size() && a.col.size() == a.val.size(),
            "coordinates and values differ in count");
      kernels::check_bounds(a);
      check(kernels::is_canonical(a), "the matrix is not canonical (sorted, unique)");
      p.A = &a;
    }
    if (get_dense(in, lp->dense.B, "dense operand B")) p.B = &lp->dense.B;
    if (get_dense(in, lp->dense.C, "dense operand C")) p.C = &lp->dense.C;
    p.validate();
  } catch (const kernels::InternalError& e) {  // check_bounds, validate
    throw WireError(e.what());
  }
  const auto present = get<std::uint8_t>(in);
  check(present <= 1, "reference: bad presence flag");
  if (present == 1) {
    const auto out = static_cast<std::uint64_t>(p.output_size());
    get_values(in, lp->reference.value, out, "reference values");
    get_array(in, lp->reference.scale, "reference scales");
    check(lp->reference.scale.size() == out,
          "reference scales: " + std::to_string(lp->reference.scale.size()) + " for " +
              std::to_string(out) + " output entries");
  }
  check(in.left() == 0, std::to_string(in.left()) + " bytes after the problem");
  // Not sent: computed here, from the operands just read and checked (O(output + work)).
  if (present == 0) lp->reference = kernels::compute_reference(p);
  return lp;
}

}  // namespace waco::heuristics::detail
