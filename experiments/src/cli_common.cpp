#include "cli_common.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"
#include "waco/signature/jstream.hpp"

namespace waco::cli {
using namespace waco::kernels;

Operand load_operand(const std::string& path, const ReadOptions& opts,
                     std::optional<KernelKind> kernel) {
  Operand op;
  const bool tensor = is_tensor_path(path);
  if (kernel) {
    if (needs_tensor(*kernel) && !tensor)
      throw Error(path + ": mttkrp needs a 3-D sparse tensor",
                  "give a FROSTT .tns or .tns.gz file");
    if (!needs_tensor(*kernel) && tensor)
      throw Error(path + ": " + std::string(kernel_name(*kernel)) + " needs a sparse matrix",
                  "give a Matrix Market .mtx or .mtx.gz file, or use --kernel mttkrp");
  }
  if (tensor)
    op.tensor = read_frostt(path, opts);
  else
    op.matrix = read_matrix_market(path, opts);
  return op;
}

void add_read_options(CLI::App& app, ReadOptions& opts) {
  app.add_flag("--drop-zeros", opts.drop_explicit_zeros,
               "Drop explicitly stored zero entries (default: keep them as entries)");
  app.add_flag("--allow-nonfinite", opts.allow_nonfinite,
               "Accept NaN and Inf values in input files (default: refuse them)");
}

std::vector<std::string> read_option_args(const ReadOptions& opts) {
  std::vector<std::string> args;
  if (opts.drop_explicit_zeros) args.push_back("--drop-zeros");
  if (opts.allow_nonfinite) args.push_back("--allow-nonfinite");
  if (opts.dtype != Dtype::F32) args.insert(args.end(), {"--dtype", std::string(dtype_name(opts.dtype))});
  return args;
}

void add_dtype_option(CLI::App& app, Dtype& dtype) {
  app.add_option_function<std::string>(
         "--dtype",
         [&dtype](const std::string& name) {
           std::string lower = name;
           for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
           dtype = *parse_dtype(lower);  // checked below
         },
         "Value type: f32 (single precision) or f64 (double: the file's values, the dense "
         "operands, the stored values and the output in double); also float32/float64")
      ->check(CLI::IsMember({"f32", "f64", "float32", "float64", "float", "double"},
                            CLI::ignore_case))
      ->default_str("f32");
}

void add_threads_option(CLI::App& app, int& threads) {
  app.add_option("--threads", threads, "Threads to use (0 = all available cores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
}

int resolve_threads(int requested) { return requested > 0 ? requested : available_cpus(); }

void add_kernel_option(CLI::App& app, std::string& kernel) {
  app.add_option("--kernel", kernel, "Kernel: spmv, spmm, sddmm or mttkrp")
      ->required()
      ->check(CLI::IsMember({"spmv", "spmm", "sddmm", "mttkrp"}));
}

KernelKind kernel_from_option(const std::string& name) {
  auto k = parse_kernel(name);
  if (!k) throw Error("unknown kernel '" + name + "'", "use spmv, spmm, sddmm or mttkrp");
  return *k;
}

const std::vector<ImplementationInfo>& all_implementations() {
  static const std::vector<ImplementationInfo> all = [] {
    std::vector<ImplementationInfo> v = implementations();
    for (const ImplementationInfo& info : signature::implementations()) v.push_back(info);
    return v;
  }();
  return all;
}

void add_cache_options(CLI::App& app, std::string& level, std::int64_t& bytes, double& fraction) {
  app.add_option("--cache-level", level,
                 "Cache bounding the tile model's tiles: llc-core (the per-core share of the "
                 "last-level cache, the calibrated default), l1, l2 (private) or l3 (divided "
                 "among the threads); sizes from sysfs, else CPUID, else a measured probe")
      ->check(CLI::IsMember({"llc-core", "l1", "l2", "l3"}))
      ->capture_default_str();
  app.add_option("--cache-bytes", bytes,
                 "Usable cache bytes per thread for the tile model, K/M/G suffixes binary "
                 "(overrides --cache-level and --cache-fraction)")
      ->transform(CLI::AsSizeValue(false))
      ->check(setting_range(tuning::settings::kCacheBytes));
  app.add_option("--cache-fraction", fraction,
                 "Share of the cache level the tile model's footprint may use")
      ->check(setting_range(tuning::settings::kCacheFraction))
      ->capture_default_str();
}

void add_cache_options(CLI::App& app, CacheOptions& opts) {
  add_cache_options(app, opts.level, opts.bytes, opts.fraction);
}

void apply_cache_options(Implementation& impl, const CacheOptions& opts) {
  if (auto* js = dynamic_cast<signature::JStream*>(&impl))
    js->set_cache(opts.level, opts.bytes, opts.fraction);
}

void add_pass_options(CLI::App& app, heuristics::PassParams& params) {
  app.add_option("--tile-window", params.tile_window,
                 "tile-window pass: log2 distance kept around the model's tiles")
      ->check(setting_range(tuning::settings::kTileWindow))
      ->capture_default_str();
  app.add_option("--max-block-padding", params.max_block_padding,
                 "block-fill pass: stored values per nonzero kept (1 / minimum fill)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--min-chunks-per-thread", params.min_chunks_per_thread,
                 "chunk-rows pass: chunks every thread should get")
      ->check(setting_range(tuning::settings::kMinChunksPerThread))
      ->capture_default_str();
  app.add_option("--chunk-window", params.chunk_window,
                 "chunk-rows pass: smaller powers of two kept below the largest chunk")
      ->check(setting_range(tuning::settings::kChunkWindow))
      ->capture_default_str();
  app.add_option("--max-serial-work", params.max_serial_work,
                 "parallelize-one pass: kernels of at most this many multiply-adds (nonzeros x "
                 "dense size) also keep threads=1, serial, no OpenMP region")
      ->check(setting_range(tuning::settings::kMaxSerialWork))
      ->capture_default_str();
  add_cache_options(app, params.cache_level, params.cache_bytes, params.cache_fraction);
}

void add_limit_options(CLI::App& app, double& timeout, double& compile_timeout) {
  app.add_option("--timeout", timeout,
                 "Seconds a candidate may take to verify and time before it is killed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--compile-timeout", compile_timeout,
                 "Seconds a candidate may take to build its format and compile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void add_cpu_lock_option(CLI::App& app, std::string& path, const std::string& while_what) {
  app.add_option("--cpu-lock", path,
                 "Hold an exclusive flock on FILE " + while_what +
                     ", so that builds and benchmarks that take the same lock never run beside a "
                     "measurement (e.g. flock -s FILE make)");
}

void hold_cpu_lock(const std::string& path, bool quiet) {
  if (path.empty()) return;
  kernels::FileLock lock(path);
  if (!lock.try_lock()) {
    if (!quiet) std::fprintf(stderr, "waiting for the CPU lock %s (another process holds it)\n", path.c_str());
    lock.lock();
  }
  lock.hold_until_exit();
}

void add_codegen_options(CLI::App& app, codegen::GeneratedOptions& opts) {
  app.add_option("--cache-dir", opts.compiler.cache_dir,
                 "Where compiled kernels are cached (default: " + codegen::default_cache_dir() + ")");
  app.add_option("--compiler", opts.compiler.compiler, "C++ compiler for generated kernels")
      ->capture_default_str();
  app.add_option("--max-padding", opts.storage.max_padding,
                 "Refuse formats storing more than this many values per nonzero")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  const std::string copy_limit =
      std::to_string(static_cast<int>(codegen::kMaxPrivateCopyBytes / (1 << 30))) + " GiB";
  app.add_option_function<std::string>(
         "--race",
         [&opts](const std::string& name) { opts.race = *codegen::parse_race_strategy(name); },
         "When the parallel loop does not index the output (e.g. csc): atomic (omp atomic "
         "updates), private (every thread but one accumulates into its own copy of the output, "
         "summed after the loop), or auto (default): private when (threads - 1) x output size "
         "<= updates (stored values x dense size) and the copies take at most " + copy_limit +
             ", else atomic. Measured on 2 threads, private took 0.07-0.23x the time of atomic "
             "with several updates per output entry and 1.1-1.4x with 1/4 or fewer")
      ->check(CLI::IsMember({"atomic", "private", "auto"}));
}

std::unique_ptr<codegen::GeneratedKernel> make_generated(KernelKind k, const std::string& schedule,
                                                          const codegen::GeneratedOptions& opts) {
  return std::make_unique<codegen::GeneratedKernel>(codegen::schedule_from_string(k, schedule),
                                                    opts);
}

std::string schedule_help() {
  return "Schedules (--schedule): a SuperSchedule in its text form, e.g.\n"
         "  \"split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=2 chunk=32\"\n"
         "  split: split sizes s_x > 1 (powers of two); a split variable x has loops x1 (outer) and\n"
         "    x0 (inner), an unsplit one the loop x; order: every loop once, x1 before x0;\n"
         "  format: U (dense interval), C (compressed) or N (compressed, 16-bit coordinates: a level\n"
         "    of at most 65536 coordinates) per level of the sparse operand, whose levels are the\n"
         "    loops over its variables in loop order (spmv/spmm A(i,k), sddmm A(i,j), mttkrp\n"
         "    A(i,k,l)); parallel: the OpenMP loop (default: the first); threads: 0 = all cores;\n"
         "    chunk: OpenMP dynamic chunk, 1..256, or static.\n"
         "  or a shortcut: csr, dcsr, csc, bcsrRxC (e.g. bcsr4x4), ncsr (csr in blocks with 16-bit\n"
         "    column offsets), csf (mttkrp).\n";
}

std::string implementations_help() {
  std::ostringstream s;
  for (const ImplementationInfo& info : all_implementations()) {
    s << "  " << info.name << " (";
    for (std::size_t i = 0; i < info.kernels.size(); ++i)
      s << (i ? ", " : "") << kernel_name(info.kernels[i]);
    s << "): " << info.description << "\n";
  }
  return s.str();
}

namespace {

DenseMatrix read_operand(const std::string& dir, const std::string& name, index_t rows,
                         index_t cols, Layout layout, const std::string& what, Dtype dtype) {
  const std::string path = (std::filesystem::path(dir) / (name + ".mtx")).string();
  if (!std::filesystem::exists(path))
    throw Error(path + ": missing dense operand " + name + " (" + what + ")",
                "--inputs DIR must hold " + name + ".mtx as a Matrix Market array file");
  ReadOptions ro;
  ro.dtype = dtype;
  DenseMatrix m = read_matrix_market_dense(path, layout, ro);
  if (m.rows != rows || m.cols != cols)
    throw Error(path + ": " + name + " is " + std::to_string(m.rows) + " x " +
                    std::to_string(m.cols) + ", expected " + std::to_string(rows) + " x " +
                    std::to_string(cols) + " (" + what + ")");
  return m;
}

}  // namespace

DenseOperands dense_operands(KernelKind k, const Operand& op, int dense, std::uint64_t seed,
                             const std::string& inputs_dir, Dtype dtype) {
  const CooMatrix* A = op.matrix ? &op.matrix->matrix : nullptr;
  const CooTensor* T = op.tensor ? &op.tensor->tensor : nullptr;
  if (inputs_dir.empty()) return make_dense_operands(k, A, T, dense, seed, dtype);
  if (!std::filesystem::is_directory(inputs_dir))
    throw Error(inputs_dir + ": --inputs is not a directory");
  DenseOperands d;
  switch (k) {
    case KernelKind::SpMV:
      d.B = read_operand(inputs_dir, "x", A->cols, 1, Layout::RowMajor, "cols x 1", dtype);
      break;
    case KernelKind::SpMM:
      d.B = read_operand(inputs_dir, "B", A->cols, dense, Layout::RowMajor, "cols x J", dtype);
      break;
    case KernelKind::SDDMM:
      d.B = read_operand(inputs_dir, "B", A->rows, dense, Layout::RowMajor, "rows x K", dtype);
      d.C = read_operand(inputs_dir, "C", dense, A->cols, Layout::ColMajor, "K x cols", dtype);
      break;
    case KernelKind::MTTKRP:
      if (T->order() != 3) throw Error("mttkrp needs a 3-D tensor");
      d.B = read_operand(inputs_dir, "B", T->dims[1], dense, Layout::RowMajor, "dims[1] x J",
                         dtype);
      d.C = read_operand(inputs_dir, "C", T->dims[2], dense, Layout::RowMajor, "dims[2] x J",
                         dtype);
      break;
  }
  return d;
}

void write_output(const std::string& path, const Problem& p, const kernels::Values& out) {
  const std::string comment = "result of waco-hybrid run --kernel " +
                              std::string(kernel_name(p.kind)) + " (" + git_revision() + ")";
  if (p.kind == KernelKind::SDDMM) {
    CooMatrix d = *p.A;
    for (std::size_t i = 0; i < out.size(); ++i) d.val[i] = out.get(i);
    write_matrix_market(path, d, comment);
    return;
  }
  const index_t rows = p.kind == KernelKind::MTTKRP ? p.T->dims[0] : p.A->rows;
  const index_t cols = p.kind == KernelKind::SpMV ? 1 : p.dense_size();
  DenseMatrix m(rows, cols, Layout::RowMajor, out.dtype());
  m.data = out;
  write_matrix_market_dense(path, m, comment);
}

double min_traffic_bytes(const Problem& p) {
  const double nnz = static_cast<double>(p.nnz());
  const double n = p.dense_size();
  const double v = static_cast<double>(dtype_size(p.dtype()));  // bytes of a value
  switch (p.kind) {
    case KernelKind::SpMV:
      return nnz * (4 + v) + (p.A->rows + 1.0) * 4 + (p.A->cols + double(p.A->rows)) * v;
    case KernelKind::SpMM:
      return nnz * (4 + v) + (p.A->rows + 1.0) * 4 + (p.A->cols + double(p.A->rows)) * n * v;
    case KernelKind::SDDMM:
      return nnz * (4 + 2 * v) + (p.A->rows + 1.0) * 4 + (p.A->cols + double(p.A->rows)) * n * v;
    case KernelKind::MTTKRP:
      return nnz * (12 + v) + (double(p.T->dims[0]) + p.T->dims[1] + p.T->dims[2]) * n * v;
  }
  return 0.0;
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << "\n"; }


namespace {
volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) {
  g_interrupted = 1;
  ::signal(SIGINT, SIG_DFL);  // a second Ctrl-C stops at once
  ::signal(SIGTERM, SIG_DFL);
}
}  // namespace

volatile std::sig_atomic_t& interrupt_flag() { return g_interrupted; }

InterruptGuard::InterruptGuard() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

}  // namespace waco::cli
