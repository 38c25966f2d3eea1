// Unit "calibrate" (issue 40): `waco-hybrid calibrate` end to end on tiny recipes within a small
// budget (stratified plan, groups measured here, fine-tuned, the model and sidecar kept under
// this machine's identity in $XDG_DATA_HOME), the calibrated model then used by predict and tune
// (and said so) unless --model, --no-calibration or WACO_NO_CALIBRATION; a killed calibrate
// resumes; and tuning::choose_model's rules: another identity's calibration is never used, a
// corrupt model or sidecar or a stale base is a warning and the shipped model serves, keeping
// the files.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/tune.hpp"

using namespace waco;
namespace fs = std::filesystem;

namespace {

std::string example() { return test::examples_dir() + "/bcsstk13.mtx.gz"; }

/// Eight small recipes of four kinds (two strata of generators each twice, and more).
std::string write_recipes(const std::string& dir) {
  const std::string path = dir + "/recipes.jsonl";
  std::ofstream f(path);
  const char* lines[] = {
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"uniform","rows":600,"cols":0,"nnz":2400,"seed":11}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"banded","rows":700,"cols":0,"bandwidth":3,"fill":0.8,"seed":12}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"stencil2d","nx":30,"ny":25,"seed":13}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"smallworld","rows":800,"neighbors":4,"rewire":0.1,"seed":14}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"uniform","rows":500,"cols":0,"nnz":3000,"seed":21}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"banded","rows":900,"cols":0,"bandwidth":2,"fill":0.7,"seed":22}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"stencil2d","nx":20,"ny":40,"seed":23}})",
      R"({"recipe_version":1,"source":"generator","generator":{"kind":"smallworld","rows":600,"neighbors":6,"rewire":0.05,"seed":24}})",
  };
  for (const char* l : lines) f << l << "\n";
  return path;
}

/// The cheap calibrate settings of these tests (few schedules and rounds, no busy waiting).
std::string calibrate_args(const std::string& recipes, double minutes) {
  return "calibrate --kernel spmv --recipes " + recipes + " --minutes " + std::to_string(minutes) +
         " --schedules 5 --rounds 2 --warmup 0 --busy-wait 0 --threads 2 --epochs 4 --patience 4"
         " --cache-dir " + std::string(WACO_BINARY_DIR) + "/test-kernel-cache";
}

/// The tests' data folder, and calibration on (catch_main.cpp turns it off for every other test).
std::string env_for(const std::string& dir) {
  return "XDG_DATA_HOME=" + dir + "/data WACO_NO_CALIBRATION=0";
}

nlohmann::json parse(const test::CliResult& r) {
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

void truncate_file(const std::string& path, std::uintmax_t size) { fs::resize_file(path, size); }

/// A sound sidecar of a calibration that kept its fine-tuned model: the shipped model's copy at
/// `p.model` (copied there first), made on `id` for `kernel`.
nlohmann::json calibrated_sidecar(const tuning::CalibrationPaths& p, const nlohmann::json& id,
                                  const std::string& kernel, const std::string& shipped) {
  fs::copy_file(shipped, p.model, fs::copy_options::overwrite_existing);
  return {{"format", tuning::kCalibrationFormat},
          {"version", tuning::kCalibrationVersion},
          {"identity", id},
          {"kernel", kernel},
          {"decision", "calibrated"},
          {"validation", {{"groups", 3}}},
          {"base_model", {{"hash", tuning::file_hash(shipped)}}},
          {"model", {{"path", p.model}, {"hash", tuning::file_hash(p.model)}}}};
}

}  // namespace

TEST_CASE("calibrate: end to end in under a minute, then predict and tune use the model and say so") {
  const std::string dir = test::scratch_dir("calibrate-e2e");
  fs::remove_all(dir + "/data");
  const std::string recipes = write_recipes(dir);
  const std::string env = env_for(dir);
  const auto t0 = std::chrono::steady_clock::now();
  const test::CliResult r =
      test::run_cli(calibrate_args(recipes, 0.35) + " --keep-fine-tuned --json", env);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json j = parse(r);
  CHECK(seconds < 60.0);
  CHECK(r.err.find("ETA") != std::string::npos);  // progress on stderr
  CHECK(r.err.find("fine-tune epoch") != std::string::npos);
  CHECK(j.at("format") == tuning::kCalibrationFormat);
  CHECK(j.at("kernel") == "spmv");
  CHECK(j.at("identity") == tuning::calibration_identity(codegen::CompilerOptions{}));
  CHECK(j.at("identity").contains("cpu"));
  CHECK_FALSE(j.at("identity").contains("git_revision"));
  // Stratified: the first four groups are four kinds.
  CHECK(j.at("strata").size() == 4);
  const int measured = j.at("groups").at("measured").get<int>();
  CHECK(measured >= 4);
  CHECK(j.at("groups").at("held_out").get<int>() >= 1);
  CHECK(j.at("measuring_seconds").get<double>() <= 0.35 * 60 * 0.9 + 15);  // one group over at most
  // The pair accuracy is over the held-out groups' pairs timed more than 2% apart: a number when
  // there are some, null (not a made-up 0 or 1) when this machine timed one held-out group's five
  // schedules all within 2% of each other.
  const nlohmann::json& v = j.at("validation");
  CHECK(v.at("shipped").at("pairs") == v.at("calibrated").at("pairs"));
  for (const char* m : {"shipped", "calibrated"}) {
    INFO(m << ": " << v.dump());
    CHECK(v.at(m).at("pair_accuracy").is_number() == (v.at(m).at("pairs").get<std::int64_t>() > 0));
  }
  REQUIRE(j.at("decision") == "calibrated");
  const std::string model = j.at("model").at("path").get<std::string>();
  const std::string sidecar = j.at("sidecar").get<std::string>();
  // Kept in the user's data folder under the identity's hash.
  CHECK(model.rfind(dir + "/data/waco-hybrid/calibration/", 0) == 0);
  CHECK(fs::exists(model));
  CHECK(fs::exists(sidecar));
  CHECK(fs::path(model).parent_path() ==
        fs::path(tuning::calibration_paths(kernels::KernelKind::SpMV, j.at("identity"),
                                           dir + "/data/waco-hybrid/calibration")
                     .dir));
  CHECK(nlohmann::json::parse(std::ifstream(sidecar)).at("model").at("hash") ==
        tuning::file_hash(model));

  // predict ranks with it by default, and says so.
  const nlohmann::json p = parse(test::run_cli("predict --kernel spmv --top 3 --json " + example(), env));
  CHECK(p.at("model") == model);
  CHECK(p.at("model_choice").at("source") == "calibrated");
  const test::CliResult pt = test::run_cli("predict --kernel spmv --top 3 " + example(), env);
  CHECK(pt.out.find("model: calibrated model for this machine") != std::string::npos);
  // --no-calibration, WACO_NO_CALIBRATION and --model win.
  const nlohmann::json off =
      parse(test::run_cli("predict --kernel spmv --top 3 --json --no-calibration " + example(), env));
  CHECK(off.at("model_choice").at("source") == "shipped");
  CHECK(off.at("model") == learned::default_model_path(kernels::KernelKind::SpMV));
  const nlohmann::json env_off = parse(test::run_cli(
      "predict --kernel spmv --top 3 --json " + example(), "XDG_DATA_HOME=" + dir + "/data WACO_NO_CALIBRATION=1"));
  CHECK(env_off.at("model_choice").at("source") == "shipped");
  const std::string shipped = learned::default_model_path(kernels::KernelKind::SpMV);
  const nlohmann::json expl =
      parse(test::run_cli("predict --kernel spmv --top 3 --json --model " + shipped + " " + example(), env));
  CHECK(expl.at("model_choice").at("source") == "explicit");

  // tune: a line in the text output, a field in --json.
  const std::string tune = "tune --kernel spmv --budget 2 --confirm 0 --db " + dir +
                           "/t.sqlite --no-plan-cache --repeat 2 --warmup 0 --confirm-rounds 2 "
                           "--decide-rounds 2 --decide-runs 1 --threads 2 --cache-dir " +
                           std::string(WACO_BINARY_DIR) + "/test-kernel-cache " + example();
  const nlohmann::json tj = parse(test::run_cli(tune + " --json", env));
  CHECK(tj.at("model").at("source") == "calibrated");
  CHECK(tj.at("model").at("path") == model);
  const test::CliResult tt = test::run_cli(tune, env);
  INFO(tt.err);
  CHECK(tt.status == 0);
  CHECK(tt.out.find("  model: calibrated model for this machine") != std::string::npos);
  CHECK(parse(test::run_cli(tune + " --json --no-calibration", env)).at("model").at("source") == "shipped");

  // A corrupt calibrated model: a warning, the shipped model, the file left in place.
  const auto size = fs::file_size(model);
  truncate_file(model, size / 2);
  const test::CliResult bad = test::run_cli("predict --kernel spmv --top 3 --json " + example(), env);
  const nlohmann::json bj = parse(bad);
  CHECK(bj.at("model_choice").at("source") == "shipped");
  CHECK(bad.err.find("warning: the calibration") != std::string::npos);
  CHECK(fs::exists(model));
  CHECK(fs::exists(sidecar));
  // A corrupt sidecar: the same.
  std::ofstream(sidecar) << "{ not json";
  const test::CliResult bad2 = test::run_cli("predict --kernel spmv --top 3 --json " + example(), env);
  CHECK(parse(bad2).at("model_choice").at("source") == "shipped");
  CHECK(bad2.err.find("corrupt sidecar") != std::string::npos);
}

TEST_CASE("calibrate: a killed run resumes where it stopped, its minutes counted") {
  const std::string dir = test::scratch_dir("calibrate-resume");
  fs::remove_all(dir + "/data");
  const std::string recipes = write_recipes(dir);
  const std::string env = env_for(dir);
  const std::string args = calibrate_args(recipes, 0.5);
  // Killed (SIGKILL) as soon as the first group is stored.
  const test::CliResult killed = test::run_command(
      "(cd " + dir + "; " + env + " " + test::cli_binary() + " " + args + " 2> killed.err & pid=$!; "
      "for i in $(seq 600); do grep -q '^\\[1\\]' " + dir + "/killed.err && break; sleep 0.1; done; "
      "kill -9 $pid; wait $pid; cat " + dir + "/killed.err >&2; exit 0)");
  INFO(killed.err);
  REQUIRE(killed.err.find("[1]") != std::string::npos);
  CHECK(killed.err.find("fine-tune epoch") == std::string::npos);  // killed before training

  const nlohmann::json j = parse(test::run_cli(args + " --json", env));
  const nlohmann::json& c = j.at("collection");
  CHECK(c.at("groups_before").get<int>() >= 1);  // kept from the killed run
  CHECK(c.at("measuring_seconds_before").get<double>() > 0.0);
  CHECK(c.at("outcomes").value("existing", 0) >= 1);  // not measured again
  CHECK(j.at("groups").at("measured").get<int>() >=
        c.at("groups_before").get<int>() + c.at("measured_now").get<int>());
  // A second run with the budget spent measures nothing more.
  const nlohmann::json again = parse(test::run_cli(args + " --json", env));
  CHECK(again.at("collection").at("measured_now") == 0);
  CHECK(again.at("groups").at("measured") == j.at("groups").at("measured"));
  // Other settings are refused (they would not resume the same plan).
  const test::CliResult other = test::run_cli(calibrate_args(recipes, 0.5) + " --seed 9", env);
  CHECK(other.status == 1);
  CHECK(other.err.find("--restart") != std::string::npos);
  // So is another admissible share (a new calibration's default is 1, kept when resumed).
  CHECK(j.at("admissible_share") == 1.0);
  CHECK(again.at("admissible_share") == 1.0);
  const test::CliResult share =
      test::run_cli(calibrate_args(recipes, 0.5) + " --admissible-share 0.5", env);
  CHECK(share.status == 1);
  CHECK(share.err.find("--restart") != std::string::npos);
}

TEST_CASE("calibrate: one begun at share 0.5 (the default before session 82) resumes at 0.5") {
  const std::string dir = test::scratch_dir("calibrate-share");
  fs::remove_all(dir + "/data");
  const std::string recipes = write_recipes(dir);
  const std::string env = env_for(dir);
  const std::string args = calibrate_args(recipes, 0.02);
  // 0.5 is stored as no setting at all, as every calibration before the new default stored it.
  const nlohmann::json first = parse(test::run_cli(args + " --admissible-share 0.5 --json", env));
  CHECK(first.at("admissible_share") == 0.5);
  const std::string db = first.at("db").get<std::string>();
  const std::optional<std::string> settings =
      heuristics::ResultsDb(db).meta("calibrate_settings.spmv");
  REQUIRE(settings);
  CHECK_FALSE(nlohmann::json::parse(*settings).contains("admissible_share"));
  // Resumed without the option: its own share, not the new default.
  const nlohmann::json resumed =
      parse(test::run_cli(calibrate_args(recipes, 0.04) + " --json", env));
  CHECK(resumed.at("admissible_share") == 0.5);
  // Asked for another share: refused, the groups kept.
  const test::CliResult other = test::run_cli(args + " --admissible-share 1", env);
  CHECK(other.status == 1);
  CHECK(other.err.find("--restart") != std::string::npos);
  CHECK(fs::exists(db));
}

TEST_CASE("calibrate --dense: measured at the size the application uses, never mixed with another") {
  const std::string dir = test::scratch_dir("calibrate-dense");
  fs::remove_all(dir + "/data");
  const std::string recipes = write_recipes(dir);
  const std::string env = env_for(dir);
  std::string args = calibrate_args(recipes, 0.1);
  args.replace(args.find("--kernel spmv"), 13, "--kernel spmm");
  const nlohmann::json j = parse(test::run_cli(args + " --dense 8 --json", env));
  CHECK(j.at("kernel") == "spmm");
  CHECK(j.at("dense") == 8);
  REQUIRE(j.at("groups").at("measured").get<int>() >= 1);
  int groups = 0;
  heuristics::ResultsDb(j.at("db").get<std::string>()).for_each_group("spmm", [&](const nlohmann::json& g) {
    CHECK(g.at("dense") == 8);
    ++groups;
  });
  CHECK(groups == j.at("groups").at("measured").get<int>());
  // Each size is a calibration of its own, in files of its own: another size's groups never mix.
  const std::string db8 = j.at("db").get<std::string>();
  CHECK(fs::path(db8).filename() == "spmm-8.sqlite");
  CHECK(fs::exists(fs::path(db8).parent_path() / "spmm-8.json"));
  const nlohmann::json k = parse(test::run_cli(args + " --dense 16 --json", env));
  CHECK(k.at("dense") == 16);
  CHECK(fs::path(k.at("db").get<std::string>()).filename() == "spmm-16.sqlite");
  heuristics::ResultsDb(k.at("db").get<std::string>()).for_each_group("spmm", [&](const nlohmann::json& g) {
    CHECK(g.at("dense") == 16);
  });
  int still = 0;
  heuristics::ResultsDb(db8).for_each_group("spmm", [&](const nlohmann::json& g) {
    CHECK(g.at("dense") == 8);
    ++still;
  });
  CHECK(still == groups);
  // A database of one size resumed at another (files moved by hand) is refused, not mixed.
  fs::copy_file(db8, fs::path(db8).parent_path() / "spmm-32.sqlite");
  const test::CliResult r = test::run_cli(args + " --dense 32", env);
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("dense 8 then") != std::string::npos);
  CHECK(r.err.find("--restart") != std::string::npos);
  // SpMV has no dense size: a clear error, not a silent default.
  const test::CliResult v = test::run_cli(calibrate_args(recipes, 0.1) + " --dense 8", env);
  CHECK(v.status != 0);
  CHECK(v.err.find("--dense does not apply to spmv") != std::string::npos);
}

TEST_CASE("calibrate: choose_model uses this identity's sound calibration only") {
  const std::string root = test::scratch_dir("calibrate-choice") + "/calibration";
  fs::remove_all(root);
  const auto kind = kernels::KernelKind::SpMV;
  const auto f32 = kernels::Dtype::F32;
  const codegen::CompilerOptions cc;
  const std::string shipped = learned::default_model_path(kind);
  const nlohmann::json id = tuning::calibration_identity(cc);
  const tuning::CalibrationPaths p = tuning::calibration_paths(kind, id, root);
  ::setenv("WACO_NO_CALIBRATION", "0", 1);  // on ("0"; catch_main.cpp turns it off)

  // No calibration: the shipped model, no warning.
  tuning::ModelChoice c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.path == shipped);
  CHECK(c.warning.empty());

  fs::create_directories(p.dir);
  nlohmann::json s = calibrated_sidecar(p, id, "spmv", shipped);
  const auto write_sidecar = [&](const nlohmann::json& j) { std::ofstream(p.sidecar) << j.dump(); };
  write_sidecar(s);
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "calibrated");
  CHECK(c.path == p.model);
  CHECK(c.warning.empty());
  CHECK(c.to_json().at("calibration").at("decision") == "calibrated");
  // Off, explicit, or double precision: not used.
  CHECK(tuning::choose_model("", kind, f32, cc, false, root).source == "shipped");
  CHECK(tuning::choose_model("/x/m.model", kind, f32, cc, true, root).source == "explicit");
  CHECK(tuning::choose_model("", kind, kernels::Dtype::F64, cc, true, root).source == "shipped");
  CHECK(tuning::choose_model("", kernels::KernelKind::SpMM, f32, cc, true, root).source == "shipped");
  ::setenv("WACO_NO_CALIBRATION", "1", 1);
  CHECK(tuning::choose_model("", kind, f32, cc, true, root).source == "shipped");
  ::setenv("WACO_NO_CALIBRATION", "0", 1);

  // Another identity (another kernel compiler): its folder is another one; this one's
  // calibration is not found there, and another identity's sidecar copied here is refused.
  codegen::CompilerOptions other_cc;
  other_cc.compiler = "clang++";
  const tuning::CalibrationPaths q =
      tuning::calibration_paths(kind, tuning::calibration_identity(other_cc), root);
  CHECK(q.dir != p.dir);
  const tuning::ModelChoice o = tuning::choose_model("", kind, f32, other_cc, true, root);
  CHECK(o.source == "shipped");
  CHECK(o.warning.empty());
  nlohmann::json foreign = s;
  foreign["identity"]["cpu"] = "Some Other CPU";
  write_sidecar(foreign);
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.warning.find("another machine identity") != std::string::npos);

  // A stale base (the shipped model changed since), a model not matching its hash, a model that
  // does not load, a sidecar that is not JSON: warnings, the shipped model, files kept.
  nlohmann::json stale = s;
  stale["base_model"]["hash"] = "0000000000000000";
  write_sidecar(stale);
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.warning.find("another shipped model") != std::string::npos);

  write_sidecar(s);
  std::ofstream(p.model, std::ios::app) << "x";
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.warning.find("hash") != std::string::npos);

  std::ofstream(p.model) << "not a model";
  s["model"]["hash"] = tuning::file_hash(p.model);
  write_sidecar(s);
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.warning.find("corrupt model") != std::string::npos);
  CHECK(fs::exists(p.model));

  std::ofstream(p.sidecar) << "[1, 2";
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.warning.find("corrupt sidecar") != std::string::npos);

  // A calibration that kept the shipped model: used as the shipped model, said so.
  nlohmann::json kept = s;
  kept["decision"] = "shipped";
  kept["model"] = nullptr;
  write_sidecar(kept);
  c = tuning::choose_model("", kind, f32, cc, true, root);
  CHECK(c.source == "shipped");
  CHECK(c.warning.empty());
  CHECK(c.note.find("calibration on this machine kept it") != std::string::npos);
}

TEST_CASE("calibrate: choose_model uses a calibration at its own dense size only") {
  const std::string root = test::scratch_dir("calibrate-choice-dense") + "/calibration";
  fs::remove_all(root);
  const auto kind = kernels::KernelKind::SpMM;
  const auto f32 = kernels::Dtype::F32;
  const codegen::CompilerOptions cc;
  const std::string shipped = learned::default_model_path(kind);
  const nlohmann::json id = tuning::calibration_identity(cc);
  const tuning::CalibrationPaths p64 = tuning::calibration_paths(kind, id, root, 64);
  const tuning::CalibrationPaths def = tuning::calibration_paths(kind, id, root);
  CHECK(fs::path(p64.sidecar).filename() == "spmm-64.json");
  CHECK(fs::path(def.sidecar).filename() == "spmm.json");
  CHECK(tuning::calibration_paths(kind, id, root, 256).sidecar == def.sidecar);  // the default
  ::setenv("WACO_NO_CALIBRATION", "0", 1);
  fs::create_directories(p64.dir);
  const auto calibrated = [&](const tuning::CalibrationPaths& p, const nlohmann::json& dense) {
    nlohmann::json s = calibrated_sidecar(p, id, "spmm", shipped);
    if (!dense.is_null()) s["dense"] = dense;
    std::ofstream(p.sidecar) << s.dump();
  };

  // J=64's calibration ranks tunes at J=64, and no other size's (the default's included).
  calibrated(p64, 64);
  tuning::ModelChoice c = tuning::choose_model("", kind, f32, cc, true, root, 64);
  CHECK(c.source == "calibrated");
  CHECK(c.path == p64.model);
  CHECK(c.note.find("at dense size 64") != std::string::npos);
  for (const int other : {16, 0, 256}) {
    c = tuning::choose_model("", kind, f32, cc, true, root, other);
    INFO(other << ": " << c.note);
    CHECK(c.source == "shipped");
    CHECK(c.warning.empty());
    CHECK(c.note.find("no calibration for this machine at dense size") != std::string::npos);
  }
  c = tuning::choose_model("", kind, f32, cc, true, root, 16);
  CHECK(c.note.find("calibrate --kernel spmm --dense 16") != std::string::npos);
  // A sidecar without a dense size is of the default size (made before --dense).
  calibrated(def, nullptr);
  CHECK(tuning::choose_model("", kind, f32, cc, true, root, 0).path == def.model);
  CHECK(tuning::choose_model("", kind, f32, cc, true, root, 64).path == p64.model);
  CHECK(tuning::choose_model("", kind, f32, cc, true, root, 16).source == "shipped");
  // The default files holding another size (calibrate --dense before sizes had files of their
  // own) serve that size when it has no files of its own, and not the default size.
  fs::remove(p64.sidecar);
  fs::remove(p64.model);
  calibrated(def, 64);
  c = tuning::choose_model("", kind, f32, cc, true, root, 64);
  CHECK(c.source == "calibrated");
  CHECK(c.path == def.model);
  c = tuning::choose_model("", kind, f32, cc, true, root, 0);
  CHECK(c.source == "shipped");
  CHECK(c.warning.empty());
  // A size's own files that say another size: corrupt, a warning, the shipped model.
  calibrated(p64, 32);
  c = tuning::choose_model("", kind, f32, cc, true, root, 64);
  CHECK(c.source == "shipped");
  CHECK(c.warning.find("made at dense size 32") != std::string::npos);
  CHECK(c.warning.find("--dense 64") != std::string::npos);
}

TEST_CASE("calibrate: the model search of the library (tuning::nominate) ranks with the calibration") {
  const std::string dir = test::scratch_dir("calibrate-nominate");
  const std::string root = dir + "/data/waco-hybrid/calibration";
  fs::remove_all(dir + "/data");
  const auto kind = kernels::KernelKind::SpMV;
  const codegen::CompilerOptions cc;
  const std::string shipped = learned::default_model_path(kind);
  const nlohmann::json id = tuning::calibration_identity(cc);
  const tuning::CalibrationPaths p = tuning::calibration_paths(kind, id, root);
  fs::create_directories(p.dir);
  std::ofstream(p.sidecar) << calibrated_sidecar(p, id, "spmv", shipped).dump();
  const std::string old = std::getenv("XDG_DATA_HOME") ? std::getenv("XDG_DATA_HOME") : "";
  ::setenv("XDG_DATA_HOME", (dir + "/data").c_str(), 1);
  ::setenv("WACO_NO_CALIBRATION", "0", 1);  // on ("0"; catch_main.cpp turns it off)
  kernels::CooMatrix a;
  a.rows = a.cols = 64;
  for (kernels::index_t i = 0; i < 64; ++i) {
    a.row.push_back(i);
    a.col.push_back(i);
    a.val.push_back(1.0);
  }
  tuning::TuneRequest req;
  req.kind = kind;
  req.threads = 2;
  tuning::TuneObserver obs;
  tuning::TuneOperand op;
  op.matrix = &a;
  const tuning::Nomination n = tuning::nominate(op, req, 3, obs);
  CHECK(n.info.at("model").at("source") == "calibrated");
  req.use_calibration = false;
  CHECK(tuning::nominate(op, req, 3, obs).info.at("model").at("source") == "shipped");
  if (old.empty()) ::unsetenv("XDG_DATA_HOME"); else ::setenv("XDG_DATA_HOME", old.c_str(), 1);
}

TEST_CASE("calibrate: train --init refuses a model of another kernel or encoder, naming both") {
  const std::string dir = test::scratch_dir("calibrate-init");
  const std::string spmm = learned::default_model_path(kernels::KernelKind::SpMM);
  const test::CliResult k = test::run_cli("train --kernel spmv --init " + spmm + " -o " + dir + "/x.model -q");
  CHECK(k.status == 1);
  CHECK(k.err.find("spmm") != std::string::npos);
  const std::string spmv = learned::default_model_path(kernels::KernelKind::SpMV);
  const test::CliResult e =
      test::run_cli("train --kernel spmv --encoder stats --init " + spmv + " -o " + dir + "/x.model -q");
  CHECK(e.status == 1);
  CHECK(e.err.find("stats") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/x.model"));
}
