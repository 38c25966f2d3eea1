#include "waco/codegen/generated_kernel.hpp"

#include "text_util.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "waco/codegen/emitter.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/openmp_team.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/grown_block.hpp"
#include "waco/kernels/serial_bound.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::codegen {

RaceStrategy resolve_race(RaceStrategy requested, const SuperSchedule& s, std::int64_t output_size,
                          double updates, int threads, kernels::Dtype dtype) {
  if (requested != RaceStrategy::Auto) return requested;
  if (parallel_loop_is_race_free(s)) return RaceStrategy::Atomic;  // same source either way
  // Measured (issue 4, SpMV and SpMM csc on 2 threads): private took 0.07-0.23x the time of
  // atomic with several updates per output entry (bcsstk16, email-Enron, delaunay_n16,
  // loc-Gowalla), about the same at one update per entry, and 1.1-1.4x at 1/4-1/16 update per
  // entry (uniform 1M x 1M): an extra copy costs about one update per entry. One thread needs no
  // copy, so private always wins there.
  const double copies = static_cast<double>(threads - 1) * static_cast<double>(output_size);
  if (copies * static_cast<double>(kernels::dtype_size(dtype)) > kMaxPrivateCopyBytes)
    return RaceStrategy::Atomic;
  return copies <= updates ? RaceStrategy::Private : RaceStrategy::Atomic;
}

std::string StorageCache::key(const SuperSchedule& s) {
  std::string k(kernels::kernel_name(s.kind));
  for (const int x : s.split) k += "," + std::to_string(x);
  k += ";";
  for (const Loop& l : s.levels()) k += l.name() + ",";
  k += ";";
  for (const LevelFormat f : s.formats) k += static_cast<char>('0' + static_cast<int>(f));
  return k;
}

std::shared_ptr<const Storage> StorageCache::find(const SuperSchedule& s) const {
  const auto it = formats_.find(key(s));
  return it == formats_.end() ? nullptr : it->second.lock();
}

void StorageCache::keep(const SuperSchedule& s, const std::shared_ptr<const Storage>& storage) {
  formats_[key(s)] = storage;
}

GeneratedKernel::GeneratedKernel(SuperSchedule schedule, GeneratedOptions opts)
    : schedule_(canonicalize(schedule)), opts_(std::move(opts)) {}

std::unique_ptr<GeneratedKernel> GeneratedKernel::baseline(const std::string& name,
                                                           kernels::KernelKind k,
                                                           GeneratedOptions opts) {
  if (!baseline_on_schedule_format(name, k))
    throw kernels::Error("the baseline \"" + name + "\" does not run on a schedule's format for " +
                         std::string(kernels::kernel_name(k)) +
                         " (csr for spmv, spmm and sddmm; csf for mttkrp)");
  auto g = std::make_unique<GeneratedKernel>(*schedule_shortcut(k, name), std::move(opts));
  g->baseline_ = name;
  return g;
}

namespace {

/// chunk=auto's serial rule (the csr SpMV baseline's): on CSR's storage (i dense, k compressed:
/// the csr schedule, which the csr baseline a plan serves binds too) decided on the matrix,
/// the baseline's loops timed on these arrays (kernels::csr_spmv_serial_for); on another (dcsr,
/// csc) by the machine's bound on the stored entries (kernels::csr_spmv_serial).
bool auto_chunk_serial(const Storage& st, const kernels::Problem& p, int threads) {
  const bool csr = p.kind == kernels::KernelKind::SpMV && st.levels.size() == 2 &&
                   st.levels[0].format == LevelFormat::U && st.levels[0].loop == Loop{'i'} &&
                   st.levels[1].format == LevelFormat::C && st.levels[1].loop == Loop{'k'};
  if (!csr || p.B == nullptr || p.B->data.size() < static_cast<std::size_t>(p.A->cols))
    return kernels::csr_spmv_serial(st.stored_values(), threads, p.dtype());
  return kernels::with_value_type(p.dtype(), [&](auto v) {
    using V = decltype(v);
    const kernels::CsrView<V> a{static_cast<kernels::index_t>(p.A->rows), st.levels[1].pos.data(),
                                st.levels[1].crd.data(), st.vals.template data<V>()};
    std::vector<V> y(static_cast<std::size_t>(p.A->rows));
    return kernels::csr_spmv_serial_for(a, p.B->data.template data<V>(), y.data(), threads);
  });
}

}  // namespace

BoundKernel prepare_binding(const SuperSchedule& schedule, const kernels::Problem& p,
                            std::int64_t dense, int threads, const GeneratedOptions& opts) {
  const SuperSchedule s = canonicalize(schedule);
  if (s.kind != p.kind)
    throw kernels::Error("the schedule is for " + std::string(kernels::kernel_name(s.kind)) +
                         ", the problem is " + std::string(kernels::kernel_name(p.kind)));
  const std::vector<std::string> problems = validate(s);
  if (!problems.empty()) throw kernels::Error("invalid schedule: " + problems.front());
  const KernelSpec& spec = kernel_spec(p.kind);

  BoundKernel b;
  b.schedule = s;
  if (opts.storages) b.storage = opts.storages->find(s);
  if (!b.storage) {
    StorageOptions so = opts.storage;
    so.entry_positions = spec.sparse_output();
    StorageResult built = build_storage(s, p, so);
    if (!built.storage)
      throw kernels::Error(built.refused, built.hint);
    // Only a sparse output is gathered back through the entry positions (SDDMM): 4 bytes a
    // nonzero that no other kernel reads.
    if (!spec.sparse_output()) std::vector<kernels::index_t>().swap(built.storage->entry_position);
    b.storage = std::make_shared<const Storage>(std::move(*built.storage));
    if (opts.storages) opts.storages->keep(s, b.storage);
  }
  const Storage& st = *b.storage;
  WACO_ASSERT(st.levels.size() <= static_cast<std::size_t>(kMaxLevels), "too many levels");

  const std::vector<std::int64_t> ext = extents(spec, p.A, p.T, dense);
  std::int64_t output_size = 1;
  for (char v : spec.output.vars) output_size *= ext[static_cast<std::size_t>(spec.var_index(v))];
  b.out_size = spec.sparse_output() ? st.stored_values() : output_size;
  // Updates of the output: one per stored value and iteration of the dense-only loops.
  double updates = static_cast<double>(st.stored_values());
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    if (!spec.is_sparse_var(spec.vars[v])) updates *= static_cast<double>(ext[v]);

  b.args = WacoArgs{};
  b.args.threads = s.threads > 0 ? s.threads : std::max(1, threads);
  // chunk=auto, the csr SpMV baseline's rule (kernels/baseline_loops.hpp): a small product runs
  // the schedule's serial kernel, without an OpenMP region (west0479, 1,910 nonzeros, AMD EPYC
  // VM: 2.6 us, as the baseline, against 4.0 us for one thread in the region); otherwise about
  // four dynamic chunks a thread of the parallel loop's iterations (below).
  SuperSchedule emitted = s;
  if (s.chunk == kAutoChunk && auto_chunk_serial(st, p, b.args.threads))
    emitted.threads = b.args.threads = 1;
  b.dtype = p.dtype();
  b.race = resolve_race(opts.race, emitted, b.out_size, updates, b.args.threads, b.dtype);
  b.source = emit_kernel_source(emitted, b.race, SourceForm::SharedObject, b.dtype);
  if (streams_output(s)) b.stream_min_bytes = stream_output_min_bytes();
  b.stage_unaligned_output = updates_output_rows(emitted);
  for (std::size_t l = 0; l < st.levels.size(); ++l) {
    const Level& lv = st.levels[l];
    b.args.pos[l] = lv.pos.empty() ? nullptr : lv.pos.data();
    // An N level's 16-bit coordinates travel in the ABI's crd slot (emitter: read back as
    // unsigned short; vector storage is aligned for any type).
    b.args.crd[l] = !lv.crd16.empty() ? static_cast<const int*>(static_cast<const void*>(lv.crd16.data()))
                    : lv.crd.empty()  ? nullptr
                                      : lv.crd.data();
    b.args.level_dim[l] = lv.dim;
  }
  WACO_ASSERT(st.vals.dtype() == b.dtype, "the format's values are not of the problem's type");
  b.args.vals = st.vals.raw();
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    b.args.extent[v] = ext[v];
    b.args.split[v] = s.split[v];
  }
  b.args.chunk = s.chunk;
  if (s.chunk == kAutoChunk) {
    // The parallel loop's iterations: its extent, or, over a compressed outermost level (dcsr),
    // the level's stored coordinates (a hypersparse matrix's rows would otherwise make chunks so
    // large that a few cover every nonempty row).
    const bool stored = st.levels.front().loop == s.parallel && st.levels.front().format != LevelFormat::U;
    const std::int64_t iterations = stored ? st.levels.front().size : ext[spec.var_index(s.parallel.var)];
    b.args.chunk = static_cast<int>(kernels::csr_spmv_chunk(static_cast<kernels::index_t>(iterations), b.args.threads));
  }
  return b;
}

void load_kernel(BoundKernel& b, const CompilerOptions& opts) {
  WACO_ASSERT(!b.source.empty(), "load_kernel needs prepare_binding's source");
  b.compile = compile_and_load(b.source, opts);
  b.fn = reinterpret_cast<int (*)(const WacoArgs*)>(b.compile.library->symbol("waco_kernel"));
  const auto* constant_split =
      static_cast<const long long*>(b.compile.library->symbol("waco_constant_split"));
  const KernelSpec& spec = kernel_spec(b.schedule.kind);
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    WACO_ASSERT(constant_split[v] == (split_is_constant(b.schedule, spec.vars[v]) ? b.schedule.split[v] : 0),
                std::string("the kernel's constant split size of ") + spec.vars[v] +
                    " is not the schedule's: " + b.compile.library_path);
}

bool reuse_kernel(BoundKernel& b, const BoundKernel& loaded) {
  // (A bound baseline has no source: it shares nothing.)
  if (loaded.fn == nullptr || b.source.empty() || b.source != loaded.source) return false;
  b.compile = loaded.compile;
  b.fn = loaded.fn;
  return true;
}

BoundKernel bind_schedule(const SuperSchedule& schedule, const kernels::Problem& p,
                          std::int64_t dense, int threads, const GeneratedOptions& opts) {
  kernels::place_openmp_team(threads);  // before the format's and the kernel's parallel regions
  BoundKernel b = prepare_binding(schedule, p, dense, threads, opts);
  load_kernel(b, opts.compiler);
  return b;
}

namespace {

/// The hand-written loop of kind K in value type V behind the generated kernels' entry point, on
/// the csr schedule's storage (CSR: level 1's pos/crd, the values in row order) or the csf
/// schedule's (CSF: levels i, k, l compressed).
template <class V, kernels::KernelKind K>
int baseline_entry(const WacoArgs* a) {
  const auto* in0 = static_cast<const V*>(a->in[0]);
  const auto* in1 = static_cast<const V*>(a->in[1]);
  auto* out = static_cast<V*>(a->out);
  const auto rows = static_cast<kernels::index_t>(a->extent[0]);
  if constexpr (K == kernels::KernelKind::MTTKRP) {
    const kernels::CsfView<V> t{rows,      a->pos[0][1], a->crd[0], a->pos[1], a->crd[1],
                                a->pos[2], a->crd[2],    static_cast<const V*>(a->vals)};
    kernels::csf_mttkrp(t, static_cast<kernels::index_t>(a->extent[3]), in0, in1, out, a->threads);
  } else {
    const kernels::CsrView<V> A{rows, a->pos[1], a->crd[1], static_cast<const V*>(a->vals)};
    // The dense-only variable's extent: SpMM's j (i, k, j), SDDMM's k (i, j, k).
    const auto dense = static_cast<kernels::index_t>(a->extent[2]);
    if constexpr (K == kernels::KernelKind::SpMV)  // serial or not as the binding decided
      kernels::csr_spmv_rows(A, in0, out, a->threads);
    else if constexpr (K == kernels::KernelKind::SpMM)
      kernels::csr_spmm(A, dense, in0, out, a->threads);
    else
      kernels::csr_sddmm(A, dense, in0, in1, out, a->threads);
  }
  return 0;
}

/// The dia baseline's loop (kernels/baseline_loops.hpp) on bind_dia's storage: the offsets in
/// level 0's crd, level_dim[0] diagonals, extent[0] x extent[1] the matrix.
template <class V>
int dia_entry(const WacoArgs* a) {
  const kernels::DiaView<V> A{static_cast<kernels::index_t>(a->extent[0]),
                              static_cast<kernels::index_t>(a->extent[1]), a->level_dim[0], a->crd[0],
                              static_cast<const V*>(a->vals)};
  kernels::dia_spmv(A, static_cast<const V*>(a->in[0]), static_cast<V*>(a->out), a->threads);
  return 0;
}

/// The dia baseline's storage of p's matrix as a Storage: one level holding the diagonals'
/// offsets (crd; pos {0, diagonals}), the values diagonal by diagonal (rows each). Throws
/// kernels::Error when dia refuses the matrix.
std::shared_ptr<const Storage> dia_storage(const kernels::Problem& p, int threads) {
  const double t0 = kernels::now_seconds();
  const kernels::CooMatrix& a = *p.A;
  Storage st;
  Level lv;
  lv.format = LevelFormat::C;
  lv.crd = kernels::dia_diagonals(a);
  lv.dim = std::int64_t{a.rows} + a.cols - 1;
  lv.size = static_cast<std::int64_t>(lv.crd.size());
  lv.pos = {0, static_cast<kernels::index_t>(lv.crd.size())};
  st.vals.assign(p.dtype(), lv.crd.size() * static_cast<std::size_t>(a.rows));
  kernels::with_value_type(p.dtype(), [&](auto v) {
    using V = decltype(v);
    kernels::dia_fill(a, lv.crd, st.vals.template data<V>(), threads);
  });
  st.levels.push_back(std::move(lv));
  st.nnz = a.nnz();
  st.build_seconds = kernels::now_seconds() - t0;
  return std::make_shared<const Storage>(std::move(st));
}

/// The dia baseline bound to p's matrix (SpMV): the csr schedule names it, as for the csr
/// baseline (a plan's schedule), the storage and the loop are dia's.
BoundKernel bind_dia(const kernels::Problem& p, int threads) {
  BoundKernel b;
  b.schedule = canonicalize(*schedule_shortcut(p.kind, "csr"));
  b.storage = dia_storage(p, std::max(1, threads));
  b.dtype = p.dtype();
  b.out_size = p.A->rows;
  b.baseline = kDiaBaseline;
  b.args = WacoArgs{};
  b.args.threads = std::max(1, threads);
  const Level& lv = b.storage->levels[0];
  b.args.pos[0] = lv.pos.data();
  b.args.crd[0] = lv.crd.data();
  b.args.level_dim[0] = lv.size;
  b.args.vals = b.storage->vals.raw();
  b.args.extent[0] = p.A->rows;
  b.args.extent[1] = p.A->cols;
  b.fn = p.dtype() == kernels::Dtype::F64 ? &dia_entry<double> : &dia_entry<float>;
  return b;
}

template <class V>
int (*baseline_fn(kernels::KernelKind kind))(const WacoArgs*) {
  switch (kind) {
    case kernels::KernelKind::SpMV: return &baseline_entry<V, kernels::KernelKind::SpMV>;
    case kernels::KernelKind::SpMM: return &baseline_entry<V, kernels::KernelKind::SpMM>;
    case kernels::KernelKind::SDDMM: return &baseline_entry<V, kernels::KernelKind::SDDMM>;
    case kernels::KernelKind::MTTKRP: return &baseline_entry<V, kernels::KernelKind::MTTKRP>;
  }
  return nullptr;
}

}  // namespace

bool servable_baseline(const std::string& name) {
  return name == "csr" || name == "csf" || name == kDiaBaseline;
}

bool servable_baseline(const std::string& name, kernels::KernelKind k) {
  if (name == kDiaBaseline) return k == kernels::KernelKind::SpMV;
  return servable_baseline(name) && (name == "csf") == kernels::needs_tensor(k);
}

bool baseline_on_schedule_format(const std::string& name, kernels::KernelKind k) {
  return name != kDiaBaseline && servable_baseline(name, k);
}

std::string baseline_named(kernels::KernelKind k, const std::string& text) {
  const std::string name = detail::trim(text);
  return servable_baseline(name, k) ? name : std::string();
}

BoundKernel bind_baseline(const std::string& name, const kernels::Problem& p, std::int64_t dense,
                          int threads, const GeneratedOptions& opts) {
  if (!servable_baseline(name, p.kind))
    throw kernels::Error("the baseline \"" + name + "\" cannot serve " +
                         std::string(kernels::kernel_name(p.kind)) +
                         " (served: csr for spmv, spmm and sddmm; csf for mttkrp; dia for spmv)");
  kernels::place_openmp_team(threads);
  if (name == kDiaBaseline) return bind_dia(p, threads);
  BoundKernel b = prepare_binding(*schedule_shortcut(p.kind, name), p, dense, threads, opts);
  b.source.clear();
  b.baseline = name;
  // The csr baseline stages an unaligned output's rows itself (kernels/baseline_csr.cpp); the
  // csf baseline sums a fibre's products before it adds them into the output.
  b.stage_unaligned_output = false;
  b.fn = p.dtype() == kernels::Dtype::F64 ? baseline_fn<double>(p.kind)
                                          : baseline_fn<float>(p.kind);
  return b;
}

namespace {

/// An output buffer of the calling thread, 64-byte aligned, at least `bytes` long; it only grows
/// and is kept between calls (BoundKernel::stage_unaligned_output).
void* staging_output(std::size_t bytes) {
  thread_local kernels::HugeBlock block;
  return kernels::grown(block, bytes);
}

/// Copies a staged output to the caller's array, on `threads` threads when it is large enough to
/// gain from them (the kernel's own OpenMP team serves them).
void copy_staged(const void* from, void* to, std::size_t bytes, int threads) {
  constexpr std::size_t kParallelCopyBytes = std::size_t{256} << 10;
  constexpr std::size_t kPiece = std::size_t{64} << 10;
  const auto* f = static_cast<const char*>(from);
  auto* t = static_cast<char*>(to);
  if (threads <= 1 || bytes < kParallelCopyBytes) {
    std::memcpy(t, f, bytes);
    return;
  }
  const auto pieces = static_cast<std::int64_t>((bytes + kPiece - 1) / kPiece);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t q = 0; q < pieces; ++q) {
    const std::size_t at = static_cast<std::size_t>(q) * kPiece;
    std::memcpy(t + at, f + at, std::min(kPiece, bytes - at));
  }
}

}  // namespace

void BoundKernel::run(const void* in0, const void* in1, void* out, std::int64_t dense) const {
  WACO_ASSERT(fn != nullptr, "run() of an unbound kernel");
  WacoArgs a = args;
  std::int64_t size = out_size;  // the output's entries for this dense size
  // SpMV has no dense-only variable: its output size is the binding's (a call costs a few
  // nanoseconds less, which a product of a few hundred nonzeros, ~0.3 us, notices).
  if (schedule.kind != kernels::KernelKind::SpMV) {
    const KernelSpec& spec = kernel_spec(schedule.kind);
    size = 1;
    for (std::size_t v = 0; v < spec.vars.size(); ++v) {
      if (!spec.is_sparse_var(spec.vars[v])) a.extent[v] = dense;
      if (!spec.sparse_output() && spec.is_output_var(spec.vars[v])) size *= a.extent[v];
    }
    if (spec.sparse_output()) size = storage->stored_values();
  }
  a.in[0] = in0;
  a.in[1] = in1;
  const std::int64_t value = static_cast<std::int64_t>(kernels::dtype_size(dtype));
  const std::size_t bytes = static_cast<std::size_t>(size * value);
  const bool staged = stage_unaligned_output && bytes > 0 &&
                      reinterpret_cast<std::uintptr_t>(out) % kStagedOutputAlignment != 0;
  void* target = staged ? staging_output(bytes) : out;
  a.out = target;
  a.out_size = static_cast<long long>(size);
  // (An output not aligned to its values, possible only through a cast, is never streamed: the
  // writer finds its lines by whole values.)
  a.stream_out = stream_min_bytes > 0 && size * value > stream_min_bytes &&
                 reinterpret_cast<std::uintptr_t>(target) % static_cast<std::uintptr_t>(value) == 0;
  if (a.threads > 1) kernels::keep_openmp_team_apart();  // the calling thread moved: confined anew
  if (fn(&a) != 0)
    throw kernels::Error(
        "the generated kernel could not allocate its " + std::to_string(a.threads - 1) +
            " per-thread copies of the output (" + std::to_string(a.out_size) + " values each)",
        "use --race atomic, or fewer threads");
  if (staged) copy_staged(target, out, bytes, a.threads);
}

void GeneratedKernel::prepare(const kernels::Problem& p, int threads) {
  p.validate();
  problem_ = p;
  const std::int64_t dense = p.kind == kernels::KernelKind::SpMV ? 1 : p.dense_size();
  bound_ = baseline_.empty() ? bind_schedule(schedule_, p, dense, threads, opts_)
                             : bind_baseline(baseline_, p, dense, threads, opts_);
  conversion_seconds_ = bound_.storage->build_seconds;
  const bool shared = opts_.output && !kernel_spec(p.kind).sparse_output();
  out_ = shared ? opts_.output : std::make_shared<kernels::Values>();
  out_->assign(p.dtype(), static_cast<std::size_t>(bound_.out_size));
}

void GeneratedKernel::run() {
  WACO_ASSERT(bound_.fn != nullptr, "run() before prepare()");
  const KernelSpec& spec = kernel_spec(schedule_.kind);
  bound_.run(problem_.B->data.raw(), spec.inputs.size() > 1 ? problem_.C->data.raw() : nullptr,
             out_->raw(), schedule_.kind == kernels::KernelKind::SpMV ? 1 : problem_.dense_size());
}

const kernels::Values& GeneratedKernel::output() const {
  if (!kernel_spec(schedule_.kind).sparse_output()) return *out_;
  const Storage& st = *bound_.storage;
  canonical_.assign(out_->dtype(), st.entry_position.size());
  kernels::with_value_type(out_->dtype(), [&](auto v) {
    using V = decltype(v);
    const V* from = out_->data<V>();
    V* to = canonical_.data<V>();
    for (std::size_t e = 0; e < canonical_.size(); ++e) to[e] = from[st.entry_position[e]];
  });
  return canonical_;
}

}  // namespace waco::codegen
