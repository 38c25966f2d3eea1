// waco-hybrid space: the SuperSchedule space of a kernel on a matrix (issue 5): its size, the size
// after each trimming pass with the removed candidates per reason, and the admissible set; a
// uniform sample of admissible schedules in the text form; the list of passes. Without FILE only
// the structural space is shown (sparse extents unknown: split sizes up to 2^16, no padding or
// signature-driven passes).
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
using namespace waco::kernels;
using namespace waco::heuristics;

namespace {

struct Options {
  std::string kernel;
  std::string file;
  std::string passes = "all";
  bool json = false;
  bool list = false;
  std::uint64_t sample = 0;
  std::uint64_t seed = 1;
  int dense = 0;
  int cores = 0;
  double max_padding = 20.0;
  PassParams params;
  ReadOptions read;
};

int list_passes_command(const Options& o) {
  const auto passes = list_passes();
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const PassInfo& p : passes)
      j.push_back({{"name", p.name}, {"sound", p.sound}, {"restriction", p.restriction},
                   {"description", p.description}});
    print_json({{"passes", j}});
    return kExitOk;
  }
  for (const PassInfo& p : passes)
    std::printf("%-22s %-11s %s\n", p.name.c_str(),
                p.restriction ? "restriction" : p.sound ? "sound" : "heuristic",
                p.description.c_str());
  std::printf("\nDefault pipeline (--passes all): %s\n", print_pipeline(default_pipeline()).c_str());
  return kExitOk;
}

int run_space(const Options& o) {
  if (o.list) return list_passes_command(o);
  if (o.kernel.empty())
    throw Error("--kernel is required", "give --kernel spmv|spmm|sddmm|mttkrp (or --list-passes)");
  const KernelKind kind = kernel_from_option(o.kernel);
  const Pipeline pipeline = parse_pipeline(o.passes);
  SpaceOptions so;
  so.cores = o.cores;
  so.max_padding = o.max_padding;
  const std::int64_t dense = o.dense > 0 ? o.dense : default_dense_size(kind);

  const double t0 = now_seconds();
  std::optional<Operand> op;
  std::optional<Space> space;
  if (o.file.empty()) {
    const codegen::KernelSpec& spec = codegen::kernel_spec(kind);
    std::vector<std::int64_t> ext;
    for (char v : spec.vars) ext.push_back(spec.is_sparse_var(v) ? codegen::kMaxSplit : dense);
    space = Space::structural(kind, ext, so);
  } else {
    op = load_operand(o.file, o.read, kind);
    space = Space::for_operand(kind, op->matrix ? &op->matrix->matrix : nullptr,
                               op->tensor ? &op->tensor->tensor : nullptr, dense, so);
  }
  const double stats_seconds = now_seconds() - t0;
  const std::uint64_t full = space->count();
  // The legal space: the legality pass's output when the pipeline starts with it (it is not
  // counted twice), else the space restricted by legality alone.
  const bool legality_first = !pipeline.empty() && pipeline.front() == "legality";
  PassParams params = o.params;
  params.dtype = o.read.dtype;  // the tile model's value size
  const std::uint64_t legal_alone = legality_first ? 0 : legal_count(*space, params);
  const PipelineResult r = run_pipeline(*space, pipeline, params);
  const std::uint64_t legal = legality_first ? r.passes.front().out : legal_alone;
  const double total_seconds = now_seconds() - t0;

  if (o.sample > 0) {
    for (const codegen::SuperSchedule& s : space->sample(o.sample, o.seed))
      std::printf("%s\n", codegen::to_text(s).c_str());
    return kExitOk;
  }
  const codegen::KernelSpec& spec = space->spec();
  if (o.json) {
    nlohmann::json ext = nlohmann::json::object();
    for (std::size_t v = 0; v < spec.vars.size(); ++v)
      ext[std::string(1, spec.vars[v])] = space->extents()[v];
    nlohmann::json passes = nlohmann::json::array();
    for (const PassStats& p : r.passes) passes.push_back(p.to_json());
    nlohmann::json j = {{"kernel", std::string(kernel_name(kind))},
                        {"file", o.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.file)},
                        {"structural_only", o.file.empty()},
                        {"extents", ext},
                        {"cores", space->cores()},
                        {"max_padding", o.max_padding},
                        {"full_count", full},
                        {"legal_count", legal},
                        {"pipeline", print_pipeline(pipeline)},
                        {"pass_params", params.to_json()},
                        {"passes", passes},
                        {"admissible_count", r.final_count},
                        {"reduction", r.final_count ? static_cast<double>(legal) /
                                                          static_cast<double>(r.final_count)
                                                    : 0.0},
                        {"statistics_seconds", stats_seconds},
                        {"seconds", total_seconds},
                        {"context", context_json(space->cores(), "none")}};
    if (op) j["nnz"] = op->matrix ? op->matrix->matrix.nnz() : op->tensor->tensor.nnz();
    print_json(j);
    return kExitOk;
  }
  std::printf("kernel %s, %s\n", std::string(kernel_name(kind)).c_str(),
              o.file.empty() ? "no matrix: structural space only (sparse extents taken as 2^16, "
                               "padding and signature-driven passes do not apply)"
                             : o.file.c_str());
  std::printf("extents:");
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    std::printf(" %c=%lld", spec.vars[v], static_cast<long long>(space->extents()[v]));
  std::printf(", threads 1..%d, chunks static and 1..%d\n", space->cores(), codegen::kMaxChunk);
  std::printf("full space:  %llu\nlegal space: %llu\n", static_cast<unsigned long long>(full),
              static_cast<unsigned long long>(legal));
  std::printf("%-22s %-9s %16s %16s %9s  %s\n", "pass", "", "in", "out", "seconds", "removed");
  for (const PassStats& p : r.passes) {
    std::string removed;
    for (const auto& [why, n] : p.removed)
      removed += (removed.empty() ? "" : ", ") + why + " " + std::to_string(n);
    if (!p.note.empty()) removed += (removed.empty() ? "" : "; ") + p.note;
    std::printf("%-22s %-9s %16llu %16llu %9.3f  %s\n", p.name.c_str(),
                p.sound ? "sound" : "heuristic", static_cast<unsigned long long>(p.in),
                static_cast<unsigned long long>(p.out), p.seconds, removed.c_str());
  }
  std::printf("admissible:  %llu (%.0fx smaller than the legal space)\n",
              static_cast<unsigned long long>(r.final_count),
              r.final_count ? static_cast<double>(legal) / static_cast<double>(r.final_count) : 0.0);
  return kExitOk;
}

}  // namespace

Command make_space_command() {
  return {"space", "The schedule space of a kernel, trimming passes and the admissible set",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.get_option("--kernel")->required(false);
            sub.add_option("FILE", o->file,
                           "Matrix Market file (.mtx/.mtx.gz) or tensor (.tns/.tns.gz); without "
                           "it only the structural space is counted");
            sub.add_option("--passes", o->passes,
                           "Trimming pipeline: pass names separated by commas, 'all' or 'none'")
                ->capture_default_str();
            sub.add_flag("--json", o->json, "Print JSON (legal_count, admissible_count, passes)");
            sub.add_flag("--list-passes", o->list, "Describe every pass and whether it is sound");
            sub.add_option("--sample", o->sample, "Print N admissible schedules (text form), uniform");
            sub.add_option("--seed", o->seed, "Seed of --sample")->capture_default_str();
            sub.add_option("--dense", o->dense,
                           "Dense extent: J (spmm 256, mttkrp 16) or K (sddmm 256)");
            sub.add_option("--cores", o->cores, "Threads range over 1..cores (0 = all available)")
                ->check(CLI::NonNegativeNumber);
            sub.add_option("--max-padding", o->max_padding,
                           "Padding bound of the legality pass (x nnz stored values)")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            add_pass_options(sub, o->params);
            add_read_options(sub, o->read);
            add_dtype_option(sub, o->read.dtype);
            sub.footer(
                "Counts are exact (64-bit). The legal space is the full space after the legality\n"
                "pass; the admissible set is what the pipeline keeps. --dtype f64: the tile model\n"
                "of tile-window counts 8-byte values (a double tile takes twice the cache).\n\n"
                "Examples:\n"
                "  waco-hybrid space --kernel spmm examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid space --kernel spmv FILE --passes legality,parallelize-outer --json\n"
                "  waco-hybrid space --kernel spmm FILE --sample 10 --seed 7\n"
                "  waco-hybrid space --list-passes");
            return [o] { return run_space(*o); };
          }};
}

}  // namespace waco::cli
