// waco-hybrid emit: the generated C++ source of a SuperSchedule, to read or to take into one's
// own code (the function waco_kernel and its argument block WacoArgs are self-contained).
#include <cctype>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/error.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

struct Options {
  std::string kernel;
  std::string schedule;
  std::string output;
  std::string race = "atomic";
  bool standalone = false;
  std::string name_space = "waco_tuned";
  bool json = false;
  Dtype dtype = Dtype::F32;
};

int emit(const Options& o) {
  const KernelKind kind = kernel_from_option(o.kernel);
  const codegen::SuperSchedule s = codegen::schedule_from_string(kind, o.schedule);
  const codegen::RaceStrategy race = *codegen::parse_race_strategy(o.race);
  const std::string source =
      o.standalone
          ? codegen::emit_standalone_header(s, race, o.name_space, {},
                                           codegen::StorageOptions().max_padding, o.dtype)
          : codegen::emit_kernel_source(s, race, codegen::SourceForm::SharedObject, o.dtype);
  if (o.json) {
    const std::optional<codegen::RegisterBlock> block = codegen::register_block(s);
    nlohmann::json constants = nlohmann::json::object();
    const codegen::KernelSpec& spec = codegen::kernel_spec(kind);
    for (std::size_t v = 0; v < spec.vars.size(); ++v)
      if (codegen::split_is_constant(s, spec.vars[v]))
        constants[std::string(1, spec.vars[v])] = s.split[v];
    print_json({{"kernel", o.kernel},
                {"schedule", codegen::to_text(s)},
                {"schedule_json", codegen::to_json(s)},
                {"race_free_parallel_loop", codegen::parallel_loop_is_race_free(s)},
                {"race", o.race},
                {"dtype", std::string(dtype_name(o.dtype))},
                {"register_block", block ? nlohmann::json{{"var", std::string(1, block->var)},
                                                          {"size", block->size}}
                                         : nlohmann::json()},
                {"constant_splits", constants},
                {"source", source}});
  } else if (o.output.empty()) {
    std::cout << source;
  }
  if (!o.output.empty()) {
    write_text_file(o.output, source);
    std::cerr << "wrote " << o.output << "\n";
  }
  return kExitOk;
}

}  // namespace

Command make_emit_command() {
  return {"emit", "Print the generated C++ source of a SuperSchedule",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("--schedule", o->schedule, "SuperSchedule text form or shortcut")->required();
            sub.add_option("--output,-o", o->output, "Write the source to FILE instead of stdout");
            sub.add_option("--race", o->race,
                           "When the parallel loop does not index the output: atomic updates, or "
                           "private per-thread copies of the output summed after the loop (run, "
                           "bench and tune also accept auto, which needs the matrix)")
                ->check(CLI::IsMember({"atomic", "private"}))
                ->capture_default_str();
            sub.add_flag("--standalone", o->standalone,
                         "A drop-in header instead: the kernel, a builder of its format from CSR "
                         "arrays (coordinates for mttkrp) and the call that runs it, in one "
                         "self-contained file (two calls: build, then spmv/spmm/sddmm/mttkrp)");
            sub.add_option("--namespace", o->name_space,
                           "Namespace of --standalone's code (several tuned headers in one program "
                           "need distinct ones)")
                ->capture_default_str()
                ->check([](const std::string& n) -> std::string {
                  return codegen::is_cpp_identifier(n) ? "" : "not a C++ identifier";
                });
            sub.add_flag("--json", o->json, "Print JSON with the canonical schedule and the source");
            add_dtype_option(sub, o->dtype);
            sub.footer(
                schedule_help() +
                "\nThe source defines struct WacoArgs and extern \"C\" int waco_kernel(const WacoArgs*)\n"
                "(0 = done; 1 = the private output copies could not be allocated); compile it with\n"
                "-O3 -fopenmp. Level l of the sparse operand is pos[l]/crd[l] (C) or level_dim[l] (U);\n"
                "vals its values; in[] the dense inputs; out the output. Split sizes are run-time\n"
                "arguments (split[]) except small inner U blocks at the innermost point, which are\n"
                "compile-time constants (listed in the header comment and in waco_constant_split).\n\n"
                "Examples:\n"
                "  waco-hybrid emit --kernel spmv --schedule csr\n"
                "  waco-hybrid emit --kernel spmm --schedule bcsr4x4 -o spmm_bcsr4x4.cpp\n"
                "  waco-hybrid emit --kernel spmv --schedule bcsr4x4 --standalone -o spmv_bcsr.hpp\n"
                "--standalone's header needs nothing of waco-hybrid: #include it, call\n"
                "waco_tuned::build(rows, cols, rowptr, colind, values) once and\n"
                "waco_tuned::spmv(format, x, y) (or spmm, sddmm, mttkrp) every time; compile\n"
                "with -O3 -march=native -fopenmp -std=c++17.\n");
            return [o] { return emit(*o); };
          }};
}

}  // namespace waco::cli
