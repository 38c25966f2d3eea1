// waco-hybrid run: one kernel, one implementation, one file; verified, then timed.
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/counters.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/codegen/super_schedule.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

struct Options {
  std::string kernel;
  std::string impl;
  std::string schedule;
  codegen::GeneratedOptions generated;
  CacheOptions cache;  ///< the tile model's cache (jstream)
  std::string file;
  int dense = 0;
  int threads = 0;
  int repeat = 10;
  int warmup = 2;
  std::uint64_t seed = 1;
  std::string inputs;
  std::string output;
  bool check = false;
  bool no_verify = false;
  double tolerance = kDefaultTolerance;
  std::string counters = "auto";
  bool json = false;
  ReadOptions read;
};

int run(const Options& o) {
  const KernelKind kind = kernel_from_option(o.kernel);
  std::string impl_name = o.impl.empty() ? (needs_tensor(kind) ? "csf" : "csr") : o.impl;
  std::unique_ptr<Implementation> impl;
  codegen::GeneratedKernel* generated = nullptr;
  if (!o.schedule.empty()) {
    auto g = make_generated(kind, o.schedule, o.generated);
    generated = g.get();
    impl_name = "generated";
    impl = std::move(g);
  } else {
    impl = make_implementation(all_implementations(), impl_name, kind);
    apply_cache_options(*impl, o.cache);
  }
  const auto backend = parse_counter_backend(o.counters);
  if (!backend) throw Error("unknown counter backend '" + o.counters + "'", "use auto, likwid, perf or none");
  if (!o.output.empty()) check_writable(o.output);
  const int threads = resolve_threads(o.threads);
  const int dense = o.dense > 0 ? o.dense : default_dense_size(kind);

  const Operand op = load_operand(o.file, o.read, kind);
  const DenseOperands operands = dense_operands(kind, op, dense, o.seed, o.inputs, o.read.dtype);
  const Problem p = make_problem(kind, op.matrix ? &op.matrix->matrix : nullptr,
                                 op.tensor ? &op.tensor->tensor : nullptr, operands);

  impl->prepare(p, threads);
  impl->run();
  Verification v;
  std::optional<Reference> ref;
  if (!o.no_verify) {
    ref = compute_reference(p);
    v = verify(impl->output(), *ref,
               o.tolerance);
    if (!v.ok)
      throw Error(impl_name + " " + o.kernel + " on " + o.file + ": result differs from the reference: " + v.message,
                  "this implementation is wrong on this input; nothing was timed");
  }

  std::unique_ptr<Counters> counters = open_counters(*backend, {}, &std::cerr);
  TimingOptions topts{o.warmup, o.repeat};
  topts.threads = threads;
  for (int i = 0; i < topts.warmup; ++i) impl->run();
  topts.warmup = 0;
  counters->start();
  const TimingStats t = time_repeated([&] { impl->run(); }, topts);
  const CounterValues counts = counters->stop();

  if (o.check && ref) {  // the last timed run must still be right (catches races)
    v = verify(impl->output(), *ref,
               o.tolerance);
    if (!v.ok) {
      std::cerr << "error: --check: " << impl_name << " result after timing differs from the reference: "
                << v.message << "\n";
      return kExitFailure;
    }
  }
  if (!o.output.empty()) write_output(o.output, p, impl->output());

  const double gflops = p.flops() / t.median * 1e-9;
  const double gbs = min_traffic_bytes(p) / t.median * 1e-9;
  if (o.json) {
    nlohmann::json counter_json = nlohmann::json::object();
    for (const auto& [name, value] : counts) counter_json[name] = static_cast<double>(value) / o.repeat;
    const SourceInfo& src = op.source();
    nlohmann::json gen_json = nullptr;
    if (generated)
      gen_json = {{"schedule", codegen::to_text(generated->schedule())},
                  {"schedule_json", codegen::to_json(generated->schedule())},
                  {"compile_s", generated->compile_seconds()},
                  {"cache_hit", generated->cache_hit()},
                  {"shipped", generated->shipped()},
                  {"bundled", generated->bundled()},
                  {"kernel_source", generated->source_path()},
                  {"stored_values", generated->storage().stored_values()},
                  {"storage_bytes", generated->storage().bytes()}};
    print_json({{"kernel", o.kernel},
                {"impl", impl_name},
                {"file", o.file},
                {"fingerprint", op.matrix ? fingerprint_hex(op.matrix->matrix) : fingerprint_hex(op.tensor->tensor)},
                {"nnz", p.nnz()},
                {"dense", p.dense_size()},
                {"dtype", std::string(dtype_name(p.dtype()))},
                {"threads", threads},
                {"warmup", o.warmup},
                {"repeats", o.repeat},
                {"median_s", t.median},
                {"min_s", t.min},
                {"max_s", t.max},
                {"times_s", t.seconds},
                {"gflops", gflops},
                {"effective_gbs", gbs},
                {"verified", !o.no_verify},
                {"max_rel_error", o.no_verify ? nlohmann::json(nullptr) : nlohmann::json(v.max_rel_error)},
                {"tolerance", o.tolerance},
                {"read_s", src.seconds},
                {"conversion_s", impl->conversion_seconds()},
                {"tuning_s", impl->tuning_seconds()},
                {"generated", gen_json},
                {"counters", counter_json},
                {"output", o.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.output)},
                {"context", context_json(threads, counters->backend())}});
  } else {
    std::cout << o.kernel << " " << impl_name << " on " << o.file << " (nnz " << p.nnz() << ", dense "
              << p.dense_size() << (p.dtype() == Dtype::F64 ? ", double precision" : "") << ", "
              << threads << " threads)\n"
              << "  median " << format_seconds(t.median) << "  (min " << format_seconds(t.min)
              << ", max " << format_seconds(t.max) << ", " << o.repeat << " runs)\n"
              << "  " << gflops << " GFLOP/s, " << gbs << " GB/s effective\n"
              << "  verified: " << (o.no_verify ? "skipped (--no-verify)" : "yes") ;
    if (!o.no_verify) std::cout << ", max relative error " << v.max_rel_error;
    if (generated)
      std::cout << "\n  schedule: " << codegen::to_text(generated->schedule()) << "\n  kernel: "
                << generated->source_path() << " ("
                << (generated->shipped()     ? "shipped, compiled ahead of time"
                    : generated->cache_hit() ? "cached"
                                             : "compiled in " + format_seconds(generated->compile_seconds()))
                << "), " << generated->storage().stored_values() << " stored values";
    std::cout << "\n  conversion " << format_seconds(impl->conversion_seconds());
    if (impl->tuning_seconds() > 0) std::cout << ", tuning " << format_seconds(impl->tuning_seconds());
    std::cout << "\n";
    for (const auto& [name, value] : counts)
      std::cout << "  " << name << ": " << static_cast<double>(value) / o.repeat << " per run\n";
    if (!o.output.empty()) std::cout << "  result written to " << o.output << "\n";
  }
  return kExitOk;
}

}  // namespace

Command make_run_command() {
  return {"run", "Run one kernel implementation on a file: verify it, then time it",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            auto* impl = sub.add_option("--impl", o->impl, "Implementation (default: csr, or csf for mttkrp)");
            sub.add_option("--schedule", o->schedule,
                           "Generate, compile and run this SuperSchedule (text form or shortcut)")
                ->excludes(impl);
            add_codegen_options(sub, o->generated);
            add_cache_options(sub, o->cache);
            sub.add_option("FILE", o->file, "Matrix Market (.mtx[.gz]) or, for mttkrp, FROSTT (.tns[.gz])")
                ->required();
            sub.add_option("--dense", o->dense,
                           "Dense size: J for spmm and mttkrp, K for sddmm (defaults: spmm 256, mttkrp 16, sddmm 256)")
                ->check(CLI::Range(1, 1 << 20));
            add_threads_option(sub, o->threads);
            sub.add_option("--repeat", o->repeat, "Timed runs (median, min, max reported)")
                ->check(CLI::Range(1, 1000000))
                ->capture_default_str();
            sub.add_option("--warmup", o->warmup, "Untimed runs first")
                ->check(CLI::Range(0, 1000000))
                ->capture_default_str();
            auto* seed = sub.add_option("--seed", o->seed, "Seed of the generated dense operands")
                             ->capture_default_str();
            sub.add_option("--inputs", o->inputs,
                           "Read dense operands from DIR: x.mtx (spmv), B.mtx (spmm), B.mtx + C.mtx "
                           "(sddmm: rows x K and K x cols; mttkrp: dims[1] x J and dims[2] x J)")
                ->excludes(seed);
            sub.add_option("--output,-o", o->output,
                           "Write the result as Matrix Market (sddmm: coordinate with A's pattern; "
                           "otherwise a dense array)");
            auto* check = sub.add_flag("--check", o->check,
                                       "Also verify the result of the last timed run; exit 1 if "
                                       "it is beyond the tolerance");
            sub.add_flag("--no-verify", o->no_verify,
                         "Skip the reference comparison (large inputs; reported as unverified)")
                ->excludes(check);
            sub.add_option("--tolerance", o->tolerance,
                           "Max |out - ref| / sum|products| per entry")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            sub.add_option("--counters", o->counters, "Counter backend: auto, likwid, perf, none")
                ->capture_default_str();
            sub.add_flag("--json", o->json, "Print JSON (with a context block)");
            add_read_options(sub, o->read);
            add_dtype_option(sub, o->read.dtype);
            sub.footer(
                "Every result is verified against a serial double-precision reference before any\n"
                "time counts. Generated dense operands: entry (i, j) of operand N is\n"
                "splitmix64(seed ^ fnv1a(N) ^ splitmix64(i * cols + j)) mapped to [-1, 1).\n\n"
                "Implementations:\n" + implementations_help() + "\n" + schedule_help() +
                "\nExamples:\n"
                "  waco-hybrid run --kernel spmv --impl csr examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid run --kernel spmm --impl eigen --dense 128 --threads 2 --json examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid run --kernel sddmm --inputs ops/ --output D.mtx --check A.mtx\n"
                "  waco-hybrid run --kernel spmv --impl rsb-tuned --dtype f64 examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid run --kernel spmv --schedule bcsr4x4 --json examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid run --kernel spmm --schedule \"order=i,k,j format=UC parallel=i chunk=16\" A.mtx\n");
            return [o] { return run(*o); };
          }};
}

}  // namespace waco::cli
