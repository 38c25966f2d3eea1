#include "model_data.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli_common.hpp"
#include "dataset_files.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/feature_extractor.hpp"
#include "waco/learned/shipped.hpp"


namespace waco::cli {

using kernels::Error;
namespace fs = std::filesystem;

void add_model_data_options(CLI::App& app, ModelDataOptions& o) {
  app.add_option("--db", o.db, "Measurements from this results database (collect --db)");
  app.add_option("FILES", o.files,
                 "Measurements from these export files (default without --db: the committed "
                 "dataset, " + learned::committed_dataset_dir() + ")");
  app.add_option("--data-dir", o.data_dirs,
                 "Folders where recipes' source files (.mtx) are looked up by name when their "
                 "stored path does not exist (default: $WACO_DATA_DIR, ../shared/data)");
  add_threads_option(app, o.threads);
  add_dtype_option(app, o.dtype);
  app.add_flag("-q,--quiet", o.quiet, "No progress on stderr");
}

std::vector<std::string> recipe_data_dirs(const ModelDataOptions& o) {
  std::vector<std::string> d = o.data_dirs;
  if (const char* env = std::getenv("WACO_DATA_DIR"); env && *env) d.emplace_back(env);
  d.push_back((fs::path(learned::committed_dataset_dir()) / ".." / ".." / ".." / "shared" / "data").string());
  return d;
}

LoadedExamples load_examples(const learned::CostModel& model, const ModelDataOptions& o,
                             const std::function<bool(const learned::DatasetGroup&)>& keep) {
  const double t0 = kernels::now_seconds();
  learned::set_threads(resolve_threads(o.threads));
  LoadedExamples out;
  const std::string kernel(kernels::kernel_name(model.config().kind));
  const std::vector<nlohmann::json> raw =
      load_groups(kernel, o.db, o.files, &out.described,
                  o.every_dtype ? std::nullopt : std::optional<kernels::Dtype>(o.dtype));
  std::vector<std::pair<learned::DatasetGroup, const nlohmann::json*>> chosen;
  for (const auto& j : raw) {
    learned::DatasetGroup g = learned::group_from_json(j);
    if (g.candidates.size() < 2 || !keep(g)) continue;
    chosen.emplace_back(std::move(g), &j);
  }
  // The hash of the data: the kept groups' JSON in fingerprint order.
  std::sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) {
    return a.first.fingerprint < b.first.fingerprint;
  });
  std::uint64_t h = 0x9E3779B97F4A7C15ull;
  const std::vector<std::string> dirs = recipe_data_dirs(o);
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    auto& [g, j] = chosen[i];
    try {
      out.examples.push_back(learned::make_example(model, g, dirs));
      h = kernels::splitmix64(h ^ kernels::fnv1a(j->dump()));
      out.groups.push_back(std::move(g));
    } catch (const Error& e) {
      out.skipped.push_back(g.label() + ": " + e.what());
    }
    if (!o.quiet && (i + 1 == chosen.size() || (i + 1) % 25 == 0)) {
      const double el = kernels::now_seconds() - t0;
      std::fprintf(stderr, "\rpreparing matrices %zu/%zu (%s, ETA %s)   ", i + 1, chosen.size(),
                   duration_text(el).c_str(),
                   duration_text(el / static_cast<double>(i + 1) *
                                 static_cast<double>(chosen.size() - i - 1)).c_str());
      if (i + 1 == chosen.size()) std::fprintf(stderr, "\n");
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  out.data_hash = hex;
  if (!o.quiet && !out.skipped.empty()) {
    std::fprintf(stderr, "skipped %zu group(s) whose operand could not be made, e.g. %s\n",
                 out.skipped.size(), out.skipped.front().c_str());
  }
  out.seconds = kernels::now_seconds() - t0;
  return out;
}

}  // namespace waco::cli
