// waco-hybrid dataset: what `collect` measured, as statistics, and as a compact export (one JSON
// object per group per line, gzip-compressed) that ships with the repository and can be imported
// into a database again (which also merges shards collected on several machines).
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "waco/learned/shipped.hpp"
#include "cli_common.hpp"
#include "command.hpp"
#include "dataset_files.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"

namespace waco::cli {
namespace {

using heuristics::ResultsDb;
using kernels::Error;
namespace fs = std::filesystem;

struct Options {
  std::string action;
  std::string db;
  std::string kernel;
  std::string output;
  std::vector<std::string> files;
  bool json = false;
};

/// Reads an export file into the database, in one transaction.
std::int64_t import_file(ResultsDb& db, const std::string& path) {
  ResultsDb::Transaction tx(db);
  const std::int64_t n = learned::for_each_export_group(path, [&](const nlohmann::json& g) { db.import_group(g); });
  tx.commit();
  return n;
}

int stats(const Options& o) {
  std::unique_ptr<ResultsDb> db;
  std::string described;
  fs::path tmp;
  if (!o.db.empty()) {
    db = std::make_unique<ResultsDb>(o.db);
    described = o.db;
  } else {
    std::vector<std::string> files = o.files.empty() ? learned::committed_exports() : o.files;
    if (files.empty())
      throw Error("no dataset to describe: no --db, no export files, and no committed dataset in " +
                      learned::committed_dataset_dir(),
                  "give --db FILE or export files");
    tmp = fs::temp_directory_path() / ("waco-dataset-stats-" + std::to_string(::getpid()) + ".sqlite");
    fs::remove(tmp);
    db = std::make_unique<ResultsDb>(tmp.string());
    for (const std::string& f : files) import_file(*db, f);
    described = std::to_string(files.size()) + " export file(s)";
  }
  const nlohmann::json s = db->dataset_stats();
  db.reset();
  if (!tmp.empty()) {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(tmp.string() + suffix, ec);
  }
  if (o.json) {
    print_json({{"dataset", described}, {"kernels", s}});
    return kExitOk;
  }
  std::printf("dataset: %s\n", described.c_str());
  for (const auto& [kernel, k] : s.items()) {
    std::printf("%s: %lld matrices, %lld groups (%lld measured twice", kernel.c_str(),
                static_cast<long long>(k["matrices"].get<std::int64_t>()),
                static_cast<long long>(k["groups"].get<std::int64_t>()),
                static_cast<long long>(k["repeated_groups"].get<std::int64_t>()));
    if (!k["pair_agreement_mean"].is_null())
      std::printf(", pair order agreeing %.3f", k["pair_agreement_mean"].get<double>());
    std::printf(")\n  measurements:");
    for (const auto& [st, n] : k["statuses"].items())
      std::printf(" %s %lld", st.c_str(), static_cast<long long>(n.get<std::int64_t>()));
    std::printf("\n  sources:");
    for (const auto& [src, n] : k["sources"].items())
      std::printf(" %s %lld", src.c_str(), static_cast<long long>(n.get<std::int64_t>()));
    std::printf("\n  splits:");
    for (const auto& [sp, n] : k["splits"].items())
      std::printf(" %s %lld", sp.c_str(), static_cast<long long>(n.get<std::int64_t>()));
    if (!k["csr_spread_median"].is_null())
      std::printf("\n  csr timing spread (median over groups): %.2f%%",
                  100.0 * k["csr_spread_median"].get<double>());
    std::printf("\n");
  }
  return kExitOk;
}

int export_groups(const Options& o) {
  if (o.db.empty()) throw Error("dataset export needs --db", "give the database collect wrote");
  if (o.output.empty()) throw Error("dataset export needs -o FILE.jsonl.gz");
  kernels::check_writable(o.output);
  ResultsDb db(o.db);
  const std::string tmp = o.output + ".tmp";
  gzFile out = gzopen(tmp.c_str(), "wb9");
  if (!out) throw Error("cannot write " + tmp, "check the directory");
  std::int64_t n = 0;
  bool ok = true;
  db.for_each_group(o.kernel, [&](const nlohmann::json& g) {
    const std::string line = g.dump() + "\n";
    ok = ok && gzwrite(out, line.data(), static_cast<unsigned>(line.size())) ==
                   static_cast<int>(line.size());
    ++n;
  });
  ok = gzclose(out) == Z_OK && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error("writing " + o.output + " failed", "check the free space");
  }
  fs::rename(tmp, o.output);
  std::fprintf(stderr, "wrote %lld groups to %s\n", static_cast<long long>(n), o.output.c_str());
  return kExitOk;
}

int import_groups(const Options& o) {
  if (o.db.empty()) throw Error("dataset import needs --db", "give the database to fill");
  if (o.files.empty()) throw Error("dataset import needs export files");
  ResultsDb db(o.db);
  std::int64_t n = 0;
  for (const std::string& f : o.files) n += import_file(db, f);
  std::fprintf(stderr, "imported %lld groups into %s\n", static_cast<long long>(n), o.db.c_str());
  return kExitOk;
}

}  // namespace

Command make_dataset_command() {
  return {"dataset", "Statistics, export and import of collected training data",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            sub.require_subcommand(1);
            CLI::App* st = sub.add_subcommand("stats", "Per kernel: matrices, measurements by "
                                                       "status, sources, splits, noise");
            st->add_option("--db", o->db, "A database written by collect");
            st->add_option("FILES", o->files,
                           "Export files (default without --db: the committed dataset, " +
                               learned::committed_dataset_dir() + ")");
            st->add_flag("--json", o->json, "Print JSON");
            CLI::App* ex = sub.add_subcommand("export", "Write a database's groups as gzip JSON "
                                                        "lines (the committed dataset's format)");
            ex->add_option("--db", o->db, "A database written by collect")->required();
            ex->add_option("--kernel", o->kernel, "Only this kernel")
                ->check(CLI::IsMember({"spmv", "spmm", "sddmm", "mttkrp"}));
            ex->add_option("-o,--output", o->output, "FILE.jsonl.gz")->required();
            CLI::App* im = sub.add_subcommand("import", "Read export files into a database "
                                                        "(merges shards; a group already there is "
                                                        "replaced)");
            im->add_option("--db", o->db, "The database to fill")->required();
            im->add_option("FILES", o->files, "Export files")->required();
            for (CLI::App* a : {st, ex, im})
              a->callback([o, a] { o->action = a->get_name(); });
            sub.footer(
                "Examples:\n"
                "  waco-hybrid dataset stats\n"
                "  waco-hybrid dataset stats --db d.sqlite --json\n"
                "  waco-hybrid dataset export --db d.sqlite --kernel spmv -o data/dataset/spmv.jsonl.gz\n"
                "  waco-hybrid dataset import --db merged.sqlite shard0.jsonl.gz shard1.jsonl.gz\n");
            return [o] {
              if (o->action == "stats") return stats(*o);
              if (o->action == "export") return export_groups(*o);
              return import_groups(*o);
            };
          }};
}

}  // namespace waco::cli
