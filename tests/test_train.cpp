// Unit "train": `waco-hybrid train`, `evaluate` and `predict` end to end on the committed
// dataset: a model written with its history, evaluated on the test split (JSON with
// spearman_median and rows), the shipped-model default, predictions over the admissible set and
// a list, and clear errors for a model of another kernel, a corrupt model file and missing data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/learned/cost_model.hpp"

using namespace waco;
namespace fs = std::filesystem;

namespace {
std::string example() { return test::examples_dir() + "/bcsstk13.mtx.gz"; }
}  // namespace

TEST_CASE("train: a model from the committed dataset, evaluated on the test split, predicting") {
  const std::string dir = test::scratch_dir("train-cli");
  const std::string model = dir + "/spmv.model";
  const auto t = test::run_cli("train --kernel spmv --encoder stats --epochs 3 --threads 2 --json -o " + model);
  INFO(t.err);
  REQUIRE(t.status == 0);
  const auto j = nlohmann::json::parse(t.out);
  CHECK(j.at("history").size() == 3);
  CHECK(j.at("data").at("matrices").at("train").get<int>() > 100);
  CHECK(j.at("data").at("hash").get<std::string>().size() == 16);
  CHECK(fs::exists(model));
  CHECK(fs::exists(model + ".checkpoint"));
  CHECK(t.err.find("epoch   3/3") != std::string::npos);  // progress lines with ETA
  CHECK(t.err.find("ETA") != std::string::npos);

  const auto e = test::run_cli("evaluate --model " + model + " --split test --json -q");
  INFO(e.err);
  REQUIRE(e.status == 0);
  const auto k = nlohmann::json::parse(e.out);
  CHECK(k.at("spearman_median").is_number());
  CHECK(k.at("spearman_median").get<double>() > 0.0);  // better than chance after 3 epochs
  REQUIRE(!k.at("rows").empty());
  for (const auto& r : k.at("rows")) CHECK(r.at("split") == "test");
  CHECK(k.at("summary").contains("top10_regret_median"));

  const auto p = test::run_cli("predict --kernel spmv --model " + model + " --top 3 --json " + example());
  INFO(p.err);
  REQUIRE(p.status == 0);
  const auto q = nlohmann::json::parse(p.out);
  CHECK(q.at("ranked").size() == 3);
  CHECK(q.at("candidates").get<int>() > 3);
  CHECK(q.at("ranked")[0].at("score").get<double>() <= q.at("ranked")[1].at("score").get<double>());
  std::ofstream(dir + "/list.txt") << "csr\n# a comment\ncsc\n";
  const auto l = test::run_cli("predict --kernel spmv --model " + model + " --schedules " + dir +
                               "/list.txt --top 0 --json " + example());
  REQUIRE(l.status == 0);
  CHECK(nlohmann::json::parse(l.out).at("ranked").size() == 2);

  // Refusals: a model of another kernel, a corrupt file, missing data, an unknown encoder.
  const auto w = test::run_cli("predict --kernel spmm --model " + model + " " + example());
  CHECK(w.status == 1);
  CHECK(w.err.find("for spmv, not spmm") != std::string::npos);
  std::ofstream(dir + "/junk.model") << "junk";
  const auto c = test::run_cli("evaluate --model " + dir + "/junk.model");
  CHECK(c.status == 1);
  CHECK(c.err.find("magic") != std::string::npos);
  const auto m = test::run_cli("train --kernel spmv -o " + dir + "/x.model " + dir + "/missing.jsonl.gz");
  CHECK(m.status == 1);
  CHECK(m.err.find("missing.jsonl.gz") != std::string::npos);
  CHECK(test::run_cli("train --kernel spmv --encoder cnn -o " + dir + "/x.model").status == 2);
}

TEST_CASE("train: the shipped default models load and rank, a kernel without one says so") {
  const auto p = test::run_cli("predict --kernel spmv --top 1 --json " + example());
  INFO(p.err);
  REQUIRE(p.status == 0);
  CHECK(nlohmann::json::parse(p.out).at("ranked").size() == 1);
  const auto e = test::run_cli("evaluate --kernel spmv --json -q");
  INFO(e.err);
  REQUIRE(e.status == 0);
  CHECK(nlohmann::json::parse(e.out).at("spearman_median").get<double>() > 0.5);
  // A kernel without a shipped model: a clear error naming how to get one (a models folder
  // without any, $WACO_MODELS_DIR).
  const std::string empty = test::scratch_dir("train-no-models");
  const auto n = test::run_cli("predict --kernel sddmm " + example(), "WACO_MODELS_DIR=" + empty);
  CHECK(n.status == 1);
  CHECK(n.err.find("no shipped cost model") != std::string::npos);
}

TEST_CASE("train: double precision ranks with the kernel's f64 model where one is shipped") {
  // SpMV and SpMM ship one (trained on f64 timings: data/dtype/README.md); SDDMM does not: its
  // f32 model.
  const std::string dir = test::scratch_dir("train-f64-model");
  for (const char* k : {"spmv", "spmm", "sddmm"}) {
    const auto t = test::run_cli(std::string("tune --kernel ") + k + " --dtype f64 --budget 2 "
                                 "--no-plan-cache --json --db " + dir + "/r.sqlite --dense 8 " +
                                 example());
    INFO(t.err);
    REQUIRE(t.status == 0);
    const std::string model = nlohmann::json::parse(t.out).at("search_info").at("model");
    CHECK(model.find(std::string(k) + (std::string(k) == "sddmm" ? ".model" : "-f64.model")) !=
          std::string::npos);
    const auto f = test::run_cli(std::string("tune --kernel ") + k + " --budget 2 --no-plan-cache "
                                 "--json --db " + dir + "/r.sqlite --dense 8 " + example());
    REQUIRE(f.status == 0);
    CHECK(nlohmann::json::parse(f.out).at("search_info").at("model").get<std::string>().find(
              std::string(k) + ".model") != std::string::npos);
  }
  // evaluate --dtype f64 takes the f64 model too (and the groups of that type).
  const auto e = test::run_cli("evaluate --kernel spmv --dtype f64 --split test --json -q " +
                               std::string(WACO_SOURCE_DIR) + "/data/dtype/spmv-zen5.jsonl.gz");
  INFO(e.err);
  REQUIRE(e.status == 0);
  const nlohmann::json ej = nlohmann::json::parse(e.out);
  CHECK(ej.at("model").get<std::string>().find("spmv-f64.model") != std::string::npos);
  // The test split's generated matrices, and its real files where ../shared/data is beside the
  // source tree (a clone elsewhere has the generated ones alone: 44 of 66).
  const bool real_files = fs::exists(std::string(WACO_SOURCE_DIR) + "/../shared/data/matrices");
  CHECK(ej.at("summary").at("matrices").get<int>() > (real_files ? 50 : 40));
}

TEST_CASE("train: --dtype-input learns from the groups of both value types and reads the type") {
  const std::string dir = test::scratch_dir("train-dtype-input");
  const std::string data = std::string(WACO_SOURCE_DIR) + "/data/dtype/spmv-zen5.jsonl.gz";
  const auto one = test::run_cli("train --kernel spmv --dtype f64 --epochs 1 --threads 2 --json -q -o " +
                                 dir + "/f64.model " + data);
  INFO(one.err);
  REQUIRE(one.status == 0);
  const auto both = test::run_cli("train --kernel spmv --dtype-input --epochs 1 --threads 2 --json -q -o " +
                                  dir + "/both.model " + data);
  INFO(both.err);
  REQUIRE(both.status == 0);
  const auto n = [](const std::string& out) {
    return nlohmann::json::parse(out).at("data").at("matrices").at("train").get<int>();
  };
  CHECK(n(both.out) > n(one.out));  // the f32 groups too
  const waco::learned::CostModel m = waco::learned::CostModel::load(dir + "/both.model");
  CHECK(m.config().dtype_input);
  CHECK(m.record().at("command").get<std::string>().find("--dtype-input") != std::string::npos);
  CHECK(waco::learned::CostModel::load(dir + "/f64.model").record().at("command").get<std::string>().find(
            "--dtype f64") != std::string::npos);
  // It ranks either type's groups and a tune in either type.
  for (const char* d : {"f32", "f64"}) {
    const auto e = test::run_cli(std::string("evaluate --kernel spmv --split test --json -q --dtype ") +
                                 d + " --model " + dir + "/both.model " + data);
    INFO(e.err);
    REQUIRE(e.status == 0);
    CHECK(nlohmann::json::parse(e.out).at("summary").at("matrices").get<int>() > 10);
  }
  const auto t = test::run_cli("tune --kernel spmv --dtype f64 --budget 2 --no-plan-cache --json --db " +
                               dir + "/r.sqlite --model " + dir + "/both.model " + example());
  INFO(t.err);
  CHECK(t.status == 0);
  // One value type or both: not both flags.
  const auto c = test::run_cli("train --kernel spmv --dtype-input --dtype f64 -o " + dir + "/x.model " + data);
  CHECK(c.status == 1);
  CHECK(c.err.find("--dtype-input trains on the groups of both value types") != std::string::npos);
}

TEST_CASE("train: --dense-input fine-tunes a one-size model on groups of three sizes, and it reads the size") {
  const std::string dir = test::scratch_dir("train-dense-input");
  const std::string data = std::string(WACO_SOURCE_DIR) + "/data/dense/spmm-epyc.jsonl.gz";
  const std::string shipped = std::string(WACO_SOURCE_DIR) + "/data/models/spmm.model";
  const auto r = test::run_cli("train --kernel spmm --init " + shipped +
                               " --dense-input --epochs 1 --threads 2 --json -q -o " + dir + "/sized.model " + data);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("data").at("matrices").at("train").get<int>() > 400);  // every size
  const waco::learned::CostModel m = waco::learned::CostModel::load(dir + "/sized.model");
  CHECK(m.config().dense_input);
  CHECK(m.record().at("command").get<std::string>().find("--dense-input") != std::string::npos);
  // predict reads the size (the lite build as the LibTorch one), and so does a tune.
  const auto scores = [&](const std::string& bin, int dense) {
    const auto p = test::run_command(bin + " predict --kernel spmm --dense " + std::to_string(dense) +
                                     " --top 0 --json --model " + dir + "/sized.model " + example() +
                                     " 2>/dev/null");
    REQUIRE(p.status == 0);
    std::map<std::string, double> s;
    const nlohmann::json j = nlohmann::json::parse(p.out);
    for (const auto& row : j.at("ranked"))
      s[row.at("schedule").get<std::string>()] = row.at("score").get<double>();
    return s;
  };
  const auto lite16 = scores(test::cli_binary(), 16);
  CHECK(lite16 != scores(test::cli_binary(), 256));
  const auto torch16 = scores(test::cli_binary() + "-torch", 16);
  REQUIRE(torch16.size() == lite16.size());
  for (const auto& [s, v] : lite16) CHECK(torch16.at(s) == Approx(v).epsilon(1e-4));
  const auto t = test::run_cli("tune --kernel spmm --dense 16 --budget 2 --no-plan-cache --json --db " +
                               dir + "/r.sqlite --model " + dir + "/sized.model " + example());
  INFO(t.err);
  CHECK(t.status == 0);
  // SpMV has no dense size.
  const auto v = test::run_cli("train --kernel spmv --dense-input -o " + dir + "/x.model " + data);
  CHECK(v.status == 1);
  CHECK(v.err.find("not spmv") != std::string::npos);
}

TEST_CASE("train: data without a validation split gets a held-out share of its families with --holdout") {
  const std::string dir = test::scratch_dir("train-holdout");
  // The first twelve calibration groups of data/dense/ (all of the training split, as
  // calibrate's are).
  const std::string data = dir + "/small.jsonl";
  REQUIRE(test::run_command("zcat " + std::string(WACO_SOURCE_DIR) +
                            "/data/dense/spmm-epyc.jsonl.gz | head -12 > " + data)
              .status == 0);
  const std::string shipped = std::string(WACO_SOURCE_DIR) + "/data/models/spmm.model";
  const std::string common = "train --kernel spmm --init " + shipped + " --epochs 2 --threads 2 ";
  const auto plain = test::run_cli(common + "--json -o " + dir + "/plain.model " + data);
  INFO(plain.err);
  REQUIRE(plain.status == 0);
  CHECK(plain.err.find("no validation split: no early stopping") != std::string::npos);
  // The groups whose operands could be made (a real file's needs ../shared/data beside the
  // project), all of them training groups without --holdout.
  const auto all = nlohmann::json::parse(plain.out).at("data").at("matrices");
  CHECK(all.at("validation") == 0);
  const int groups = all.at("train");
  REQUIRE(groups >= 8);
  const auto held = test::run_cli(common + "--holdout 0.25 --json -o " + dir + "/held.model " + data);
  INFO(held.err);
  REQUIRE(held.status == 0);
  CHECK(held.err.find("--holdout 0.25 holds out") != std::string::npos);
  const auto j = nlohmann::json::parse(held.out);
  const int train = j.at("data").at("matrices").at("train"), validation = j.at("data").at("matrices").at("validation");
  CHECK(train + validation == groups);
  CHECK(validation > 0);
  CHECK(train > validation);
  const waco::learned::CostModel m = waco::learned::CostModel::load(dir + "/held.model");
  CHECK(m.record().at("data").at("holdout").at("families").get<int>() >= 1);
  CHECK(m.record().at("command").get<std::string>().find("--holdout") != std::string::npos);
  // The same seed holds out the same families.
  const auto again = test::run_cli(common + "--holdout 0.25 --json -q -o " + dir + "/again.model " + data);
  REQUIRE(again.status == 0);
  CHECK(nlohmann::json::parse(again.out).at("data").at("matrices") == j.at("data").at("matrices"));
  const auto bad = test::run_cli(common + "--holdout 0.9 -o " + dir + "/x.model " + data);
  CHECK(bad.status != 0);
}

TEST_CASE("train: waco-hybrid ranks without LibTorch as waco-hybrid-torch does, and hands it training") {
  const std::string lite = test::cli_binary();
  const std::string torch = lite + "-torch";
  // The lite driver does not link LibTorch (its loading costs 0.4 s and 180 MB a process).
  const auto libs = test::run_command("ldd " + lite);
  REQUIRE(libs.status == 0);
  CHECK(libs.out.find("libtorch") == std::string::npos);
  CHECK(libs.out.find("libc10") == std::string::npos);
  CHECK(test::run_command("ldd " + torch).out.find("libtorch") != std::string::npos);

  // The shipped models (signature encoder) rank the same in both: plain C++ against LibTorch.
  for (const std::string kernel : {"spmv", "spmm"}) {
    INFO(kernel);
    const std::string args = " predict --kernel " + kernel + " --top 0 --json " + example();
    const auto ra = test::run_command(lite + args);
    REQUIRE(ra.status == 0);
    const auto rb = test::run_command(torch + args);
    REQUIRE(rb.status == 0);
    const auto a = nlohmann::json::parse(ra.out).at("ranked");
    const auto b = nlohmann::json::parse(rb.out).at("ranked");
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() > 100);
    std::size_t same_place = 0;
    double worst = 0.0;
    std::map<std::string, double> by_schedule;
    for (const auto& r : b) by_schedule[r.at("schedule").get<std::string>()] = r.at("score");
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string s = a[i].at("schedule");
      REQUIRE(by_schedule.count(s) == 1);
      worst = std::max(worst, std::abs(a[i].at("score").get<double>() - by_schedule[s]));
      same_place += (s == b[i].at("schedule").get<std::string>());
    }
    CHECK(worst < 1e-4);
    // Ties (a static schedule scores as its chunk twin) may order either way; nothing else moves.
    CHECK(same_place >= a.size() * 9 / 10);
  }

  // Training needs LibTorch: the lite driver runs the same command as waco-hybrid-torch ...
  const std::string dir = test::scratch_dir("train-lite");
  const auto t = test::run_cli("train --kernel spmv --encoder stats --epochs 1 --threads 2 --json -o " +
                               dir + "/m.model");
  INFO(t.err);
  CHECK(t.status == 0);
  CHECK(fs::exists(dir + "/m.model"));
  // ... and says what is missing when it is not installed beside it.
  fs::copy_file(lite, dir + "/waco-hybrid", fs::copy_options::overwrite_existing);
  const auto alone = test::run_command(dir + "/waco-hybrid train --kernel spmv -o " + dir + "/n.model");
  CHECK(alone.status == 1);
  CHECK(alone.err.find("training needs LibTorch") != std::string::npos);
  CHECK(alone.err.find("waco-hybrid-torch") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/n.model"));
}

TEST_CASE("train: tune --search model measures the model's best, scored over the admissible set") {
  const std::string dir = test::scratch_dir("tune-model");
  const auto r = test::run_cli("tune --no-plan-cache --kernel spmv --search model --budget 3 --json --db " + dir +
                               "/r.sqlite --cache-dir " + std::string(WACO_BINARY_DIR) +
                               "/test-kernel-cache --repeat 3 --warmup 1 --confirm-rounds 4 "
                               "--abandon-factor 0 --threads 2 " + example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("search") == "model");
  const auto& info = j.at("search_info");
  CHECK(info.at("scored") == j.at("space").at("admissible_count"));
  CHECK(info.at("measured") == 3);
  CHECK(info.at("encoder") == "signature");
  CHECK(j.at("candidates").get<int>() == 3);
  // The model's nominees went side by side at once: the search's timings are the confirmation's.
  CHECK(j.at("confirmed") == true);
  CHECK(j.at("confirm").at("direct") == true);
  CHECK(j.at("confirm").at("ranking").size() == 3);
  CHECK(j.at("measured").get<int>() == 3);
  CHECK(j.at("reused").get<int>() == 0);
  CHECK(j.at("confirm").at("rounds") == 4);
  // --confirm N caps them; --measure-first measures each first (stored), then confirms. No
  // racing in the side-by-side runs: on a loaded machine (ctest -j2) it may abandon a nominee,
  // which leaves the ranking short of the nominees these counts are about.
  const std::string common = " --json --db " + dir + "/r.sqlite --cache-dir " +
                             std::string(WACO_BINARY_DIR) + "/test-kernel-cache --repeat 3 --warmup 1 "
                             "--confirm-rounds 4 --abandon-factor 0 --threads 2 " + example();
  const auto capped = test::run_cli("tune --no-plan-cache --kernel spmv --search model --budget 3 --confirm 2" + common);
  INFO(capped.err);
  REQUIRE(capped.status == 0);
  CHECK(nlohmann::json::parse(capped.out).at("confirm").at("ranking").size() == 2);
  const auto first = test::run_cli("tune --no-plan-cache --kernel spmv --search model --budget 3 --confirm 2 --measure-first" + common);
  INFO(first.err);
  REQUIRE(first.status == 0);
  const auto fj = nlohmann::json::parse(first.out);
  CHECK(fj.at("confirm").at("direct") == false);
  CHECK(fj.at("measured").get<int>() + fj.at("reused").get<int>() == 3);
  // The search's best 2 of those measured ok (on a busy machine the racing may abandon some)
  // side by side, and the fastest csr-like schedule of the search as one more when it measured
  // third (confirm_best nominates it always).
  const int ok = fj.at("status_counts").value("ok", 0);
  REQUIRE(ok >= 1);
  const auto& fr = fj.at("confirm").at("ranking");
  int within_cap = 0;
  for (const auto& row : fr) within_cap += row.at("search_rank").get<int>() <= 2;
  CHECK(within_cap == std::min(2, ok));
  CHECK(fr.size() <= 3);
  // A model of another kernel is refused before anything is measured.
  const auto w = test::run_cli("tune --no-plan-cache --kernel spmm --search model --model " + std::string(WACO_SOURCE_DIR) +
                               "/data/models/spmv.model --db " + dir + "/r.sqlite " + example());
  CHECK(w.status == 1);
  CHECK(w.err.find("for spmv, not spmm") != std::string::npos);
  CHECK(test::run_cli("tune --no-plan-cache --kernel spmv --search annealing " + example()).status == 2);
}

TEST_CASE("train: --search anns walks the HNSW graph, reports recall, and is exact on small sets") {
  const std::string dir = test::scratch_dir("anns");
  const std::string index = dir + "/spmv.hnsw";
  const std::string predict = "predict --kernel spmv --search anns --passes legality "
                              "--check-recall --json --threads 2 --index " + index + " " + example();
  const auto a = test::run_cli(predict);
  INFO(a.err);
  REQUIRE(a.status == 0);
  const auto j = nlohmann::json::parse(a.out);
  const auto& info = j.at("search_info");
  CHECK(info.at("method") == "anns");
  CHECK(info.at("index_built") == true);
  CHECK(info.at("nodes").get<int>() > 10000);
  CHECK(info.at("head_evaluations").get<int>() > 0);
  CHECK(info.at("head_evaluations").get<int>() < info.at("exact_evaluations").get<int>());
  const double recall = info.at("recall_at_10").get<double>();
  CHECK(recall >= 0.0);
  CHECK(recall <= 1.0);
  CHECK(j.at("ranked").size() == 10);
  CHECK(fs::exists(index));
  CHECK(fs::exists(index + ".json"));
  // Loaded the second time, with the same answer.
  const auto b = test::run_cli(predict);
  REQUIRE(b.status == 0);
  const auto k = nlohmann::json::parse(b.out);
  CHECK(k.at("search_info").at("index_built") == false);
  CHECK(k.at("ranked") == j.at("ranked"));
  CHECK(k.at("search_info").at("head_evaluations") == info.at("head_evaluations"));
  // A damaged index is built again, with a message.
  { std::ofstream(index + ".json") << "{ not json"; }
  const auto c = test::run_cli(predict);
  REQUIRE(c.status == 0);
  CHECK(c.err.find("building it again") != std::string::npos);
  CHECK(nlohmann::json::parse(c.out).at("ranked") == j.at("ranked"));
  // tune on the default passes: a small admissible set is scored exactly, and says so.
  const auto t = test::run_cli("tune --no-plan-cache --kernel spmv --search anns --budget 3 --json --db " + dir +
                               "/r.sqlite --cache-dir " + std::string(WACO_BINARY_DIR) +
                               "/test-kernel-cache --repeat 3 --warmup 1 --confirm-rounds 4 "
                               "--threads 2 --index " + index + " " + example());
  INFO(t.err);
  REQUIRE(t.status == 0);
  const auto tj = nlohmann::json::parse(t.out);
  CHECK(tj.at("search") == "anns");
  CHECK(tj.at("search_info").at("method") == "exact");
  CHECK(tj.at("search_info").at("scored") == tj.at("space").at("admissible_count"));
  CHECK(tj.at("candidates").get<int>() == 3);
  // --confirm 0: the model decides alone, its best guarded by one side-by-side run.
  const auto alone = test::run_cli("tune --no-plan-cache --kernel spmv --search anns --confirm 0 --json --db " +
                                   dir + "/r.sqlite --cache-dir " + std::string(WACO_BINARY_DIR) +
                                   "/test-kernel-cache --repeat 3 --warmup 1 --confirm-rounds 4 "
                                   "--threads 2 --index " + index + " " + example());
  INFO(alone.err);
  REQUIRE(alone.status == 0);
  const auto aj = nlohmann::json::parse(alone.out);
  CHECK(aj.at("model_alone") == true);
  CHECK(aj.at("candidates").get<int>() == 1);
  REQUIRE(aj.at("confirm").at("ranking").size() == 1);
  // The guard: a nominee that the side-by-side rounds abandon (slower than --abandon-factor x
  // the references; a model trained for a few epochs may nominate one, and a busy machine
  // decides whether the racing stops it) leaves csr as the result, unconfirmed.
  if (aj.at("confirm").at("ranking")[0].at("status") == "ok") {
    CHECK(aj.at("confirmed") == true);
  } else {
    CHECK(aj.at("confirmed") == false);
    CHECK(aj.at("verdict") == "no-gain");
    // The faster csr reference of that run: the csr schedule or the hand-written csr.
    CHECK(aj.at("best").at("schedule") ==
          aj.at(aj.at("implementation") == "csr" ? "csr_baseline" : "csr").at("schedule"));
  }
  CHECK(aj.at("search_info").at("measured") == 1);
}

TEST_CASE("train: features embeds several files in one batch that equals one at a time") {
  const std::string dir = test::scratch_dir("features-batch");
  REQUIRE(test::run_cli("generate --kind banded --rows 300 --bandwidth 2 --seed 2 -o " + dir + "/b.mtx").status == 0);
  const auto r = test::run_cli("features --arch small --compare --threads 1 --json " + example() + " " +
                               dir + "/b.mtx " + example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("batch") == 3);
  REQUIRE(j.at("files").size() == 3);
  CHECK(j.at("files")[0].at("embedding").size() == 128);
  // The same matrix twice in the batch: the same embedding up to float rounding; another differs.
  double same = 0, other = 0;
  for (std::size_t e = 0; e < 128; ++e) {
    const double x = j.at("files")[0].at("embedding")[e];
    same = std::max(same, std::abs(x - j.at("files")[2].at("embedding")[e].get<double>()));
    other = std::max(other, std::abs(x - j.at("files")[1].at("embedding")[e].get<double>()));
  }
  CHECK(same < 1e-5);
  CHECK(other > 1e-3);
  CHECK(j.at("max_abs_difference").get<double>() < 1e-4);
  CHECK(j.at("times_seconds").at("batched_forward").get<double>() > 0);
  CHECK(j.at("times_seconds").at("separate_forward").get<double>() > 0);
  // One order per batch; --backward takes one file.
  CHECK(test::run_cli("features --arch small " + example() + " " + test::examples_dir() +
                      "/../../shared/data/tensors/umls_sub_rel_obj.tns").status != 0);
  const auto b = test::run_cli("features --arch small --backward " + example() + " " + example());
  CHECK(b.status == 1);
  CHECK(b.err.find("--backward takes one file") != std::string::npos);
}
