// waco-hybrid tile: the model-driven tiler (SC'20 Section IV): modeled data movement of tiled SpMM
// or SDDMM for each streaming dimension and the tiles it selects; with --exhaustive, a sweep of
// the J-Stream tile grid, measured and verified, that reports the model's choice against the best
// measured tile (model_to_best_time_ratio and the model's rank), like the paper's Fig. 6 spikes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/signature/jstream.hpp"
#include "waco/signature/model.hpp"
#include "waco/signature/signature.hpp"

namespace waco::cli {
using namespace waco::kernels;
using namespace waco::signature;

namespace {

struct Options {
  std::string kernel;
  std::string file;
  int dense = 0;
  std::int64_t cache_bytes = 0;
  std::string cache_level = kDefaultCacheLevel;
  double cache_fraction = kDefaultCacheFraction;
  int panels_per_thread = kDefaultPanelsPerThread;
  int min_dense_tile = kDefaultMinDenseTile;
  int threads = 0;
  bool json = false;
  bool exhaustive = false;
  int repeat = 5;
  int warmup = 1;
  double cutoff = 2.0;
  int confirm = 4;
  std::string clock = "auto";
  std::vector<std::string> calibrate;  ///< capacities (bytes, K/M/G suffixes) re-timed too
  std::int64_t min_ti = 4;
  std::uint64_t seed = 1;
  double tolerance = kDefaultTolerance;
  ReadOptions read;
};

nlohmann::json candidate_json(const TileCandidate& c, KernelKind kind) {
  return {{"stream", stream_name(c.stream)},
          {"stationary", stationary_name(c.stream, kind)},
          {"T_i", c.T_i},
          {"T_j", c.T_j},
          {"T_k", c.T_k},
          {"volume_elements", c.volume},
          {"volume_bytes", 4.0 * c.volume},
          {"footprint_elements", c.footprint},
          {"fits", c.fits},
          {"exact", c.exact}};
}

/// Average ranks (1-based, ties share the mean rank).
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<std::size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

/// Spearman's rank correlation; 0 when either side is constant or there are < 2 points.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2) return 0.0;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

struct GridPoint {
  JStreamTiles tiles;
  TileCandidate modeled;
  TimingStats t;
  double conversion = 0;
  bool cut = false;  ///< timing stopped early: the first run was > cutoff x the best so far
  std::string error;
};

/// The sweep: for each T_i the panel structure is built once and every T_k of the grid runs on
/// it, verified once, then timed (warm-up, then up to `repeat` runs; a point whose first run is
/// more than `cutoff` times the best median so far stops there). Then the confirmation: the
/// model's point and the `confirm` fastest points are re-timed interleaved, round-robin, so that
/// machine noise hits them alike; the ratio and the best point come from it (the sweep's own ratio
/// is reported too: the minimum of many noisy medians is biased low).
/// Bytes from "N", "NK", "NM" or "NG" (binary units; N may have a fraction, e.g. 0.5M).
std::int64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double unit = 1;
  const std::string suffix = text.substr(used);
  if (suffix == "K" || suffix == "k") unit = 1024.0;
  else if (suffix == "M" || suffix == "m") unit = 1024.0 * 1024.0;
  else if (suffix == "G" || suffix == "g") unit = 1024.0 * 1024.0 * 1024.0;
  else if (!suffix.empty()) used = 0;
  if (used == 0 || !(v > 0))
    throw Error("bad capacity '" + text + "' for --calibrate",
                "give bytes, optionally with K, M or G (binary), e.g. 512K,1M,8M");
  return static_cast<std::int64_t>(v * unit);
}

/// One tile the confirmation re-times besides the model's and the fastest: the model's choice at
/// another cache capacity (--calibrate).
struct ExtraTile {
  std::int64_t capacity_bytes = 0;
  int panels_per_thread = 0;
  JStreamTiles tiles;
};

nlohmann::json exhaustive(const Options& o, const CooMatrix& a, const Problem& p,
                          const LocalitySignature& sig, const TileSelection& sel, int threads,
                          const std::vector<ExtraTile>& extra, bool& failed) {
  const std::int64_t K = p.dense_size();
  const bool cpu_clock = o.clock == "cpu" || (o.clock == "auto" && threads == 1);
  const JStreamTiles model{std::min<std::int64_t>(sel.best_jstream.T_i, std::max(a.rows, 1)),
                           std::min<std::int64_t>(sel.best_jstream.T_k, K)};
  std::set<std::int64_t> tis, tks;
  const std::int64_t top = std::int64_t{1} << log2_ceil(std::max(a.rows, 1));
  for (std::int64_t t = std::min<std::int64_t>(o.min_ti, top); t <= top; t *= 2) tis.insert(t);
  tis.insert(std::max<std::int64_t>(1, (a.rows + threads - 1) / threads));
  const std::int64_t parts = static_cast<std::int64_t>(threads) * o.panels_per_thread;
  tis.insert(std::max<std::int64_t>(1, (a.rows + parts - 1) / parts));
  tis.insert(model.T_i);
  for (std::int64_t t = kVectorWidth; t < K; t *= 2) tks.insert(t);
  tks.insert(K);
  tks.insert(model.T_k);
  for (const ExtraTile& x : extra) {
    tis.insert(x.tiles.T_i);
    tks.insert(x.tiles.T_k);
  }

  const Reference ref = compute_reference(p);
  double (*const clock)() = cpu_clock ? thread_cpu_seconds : now_seconds;
  const auto time_run = [&](JStream& impl) {
    const double t0 = clock();
    impl.run();
    return clock() - t0;
  };
  std::vector<GridPoint> grid;
  const std::size_t total = tis.size() * tks.size();
  const double sweep0 = now_seconds();
  double best_so_far = std::numeric_limits<double>::infinity();
  for (std::int64_t ti : tis) {
    JStream impl({ti, *tks.begin()});
    impl.prepare(p, threads);
    const double conversion = impl.conversion_seconds();
    for (std::int64_t tk : tks) {
      GridPoint g;
      g.tiles = {ti, tk};
      g.modeled = evaluate(sig, sel.options, StreamDim::N, ti, 1, tk);
      g.conversion = conversion;
      impl.set_dense_tile(tk);
      impl.run();  // also the first warm-up run
      const Verification v = verify(impl.output(), ref,
                                    o.tolerance);
      if (!v.ok) {
        g.error = "wrong result: " + v.message;
        failed = true;
      } else {
        for (int w = 1; w < o.warmup; ++w) impl.run();
        std::vector<double> samples;
        for (int r = 0; r < o.repeat; ++r) {
          samples.push_back(time_run(impl));
          if (r == 0 && o.cutoff > 0 && samples[0] > o.cutoff * best_so_far) {
            g.cut = true;
            break;
          }
        }
        g.t = summarize(samples);
        best_so_far = std::min(best_so_far, g.t.median);
      }
      std::cerr << "[" << grid.size() + 1 << "/" << total << "] T_i=" << ti << " T_k=" << tk
                << (g.error.empty() ? " median " + format_seconds(g.t.median) : " " + g.error)
                << (g.cut ? " (stopped after 1 run: > cutoff x best)" : "") << "; "
                << format_seconds(now_seconds() - sweep0) << " elapsed\n";
      grid.push_back(std::move(g));
    }
  }

  std::vector<std::size_t> ok;
  for (std::size_t i = 0; i < grid.size(); ++i)
    if (grid[i].error.empty()) ok.push_back(i);
  nlohmann::json j = {{"grid_T_i", std::vector<std::int64_t>(tis.begin(), tis.end())},
                      {"grid_T_k", std::vector<std::int64_t>(tks.begin(), tks.end())},
                      {"warmup", o.warmup},
                      {"repeats", o.repeat},
                      {"cutoff", o.cutoff},
                      {"clock", cpu_clock ? "thread_cpu" : "wall"},
                      {"points", nlohmann::json::array()}};
  for (const GridPoint& g : grid) {
    nlohmann::json pj = {{"T_i", g.tiles.T_i},
                         {"T_k", g.tiles.T_k},
                         {"modeled_volume_elements", g.modeled.volume},
                         {"fits", g.modeled.fits},
                         {"conversion_s", g.conversion}};
    if (g.error.empty())
      pj.update({{"median_s", g.t.median},
                 {"min_s", g.t.min},
                 {"max_s", g.t.max},
                 {"runs", g.t.seconds.size()},
                 {"stopped_early", g.cut}});
    else
      pj["error"] = g.error;
    j["points"].push_back(pj);
  }
  if (ok.empty()) return j;

  const auto by_time = [&](std::size_t x, std::size_t y) {
    return grid[x].t.median < grid[y].t.median;
  };
  const std::size_t sweep_best = *std::min_element(ok.begin(), ok.end(), by_time);
  const std::size_t worst = *std::max_element(ok.begin(), ok.end(), by_time);
  std::size_t mi = grid.size();
  for (std::size_t i : ok)
    if (grid[i].tiles.T_i == model.T_i && grid[i].tiles.T_k == model.T_k) mi = i;
  if (mi == grid.size()) return j;  // the model's point failed verification (reported above)

  int rank = 1;
  for (std::size_t i : ok) rank += grid[i].t.median < grid[mi].t.median;
  std::vector<double> vol, time;
  for (std::size_t i : ok) {
    vol.push_back(grid[i].modeled.volume);
    time.push_back(grid[i].t.median);
  }

  // Confirmation: the model's point first, then the --calibrate choices, then the fastest
  // points of the sweep.
  const auto point_of = [&](const JStreamTiles& t) {
    for (std::size_t i : ok)
      if (grid[i].tiles.T_i == t.T_i && grid[i].tiles.T_k == t.T_k) return i;
    return grid.size();
  };
  std::vector<std::size_t> cand = {mi};
  for (const ExtraTile& x : extra) {
    const std::size_t i = point_of(x.tiles);
    if (i < grid.size() && std::find(cand.begin(), cand.end(), i) == cand.end()) cand.push_back(i);
  }
  {
    std::vector<std::size_t> order = ok;
    std::sort(order.begin(), order.end(), by_time);
    int added = 0;
    for (std::size_t i : order) {
      if (added >= o.confirm) break;
      if (std::find(cand.begin(), cand.end(), i) != cand.end()) continue;
      cand.push_back(i);
      ++added;
    }
  }
  std::vector<TimingStats> conf(cand.size());
  if (cand.size() > 1) {
    std::vector<std::unique_ptr<JStream>> impls;
    for (std::size_t c : cand) {
      impls.push_back(std::make_unique<JStream>(grid[c].tiles));
      impls.back()->prepare(p, threads);
    }
    std::vector<std::function<void()>> runs;
    for (const auto& impl : impls) runs.push_back([j = impl.get()] { j->run(); });
    conf = time_interleaved(runs, {o.warmup, o.repeat, clock});
  } else {
    conf[0] = grid[mi].t;
  }
  std::size_t cb = 0;
  for (std::size_t k = 1; k < cand.size(); ++k)
    if (conf[k].median < conf[cb].median) cb = k;
  const std::size_t best = cand[cb];
  const double ratio = conf[0].median / conf[cb].median;
  const double min_ratio =
      conf[0].min / std::min_element(conf.begin(), conf.end(), [](const auto& x, const auto& y) {
                      return x.min < y.min;
                    })->min;
  nlohmann::json cj = nlohmann::json::array();
  for (std::size_t k = 0; k < cand.size(); ++k)
    cj.push_back({{"T_i", grid[cand[k]].tiles.T_i},
                  {"T_k", grid[cand[k]].tiles.T_k},
                  {"model", k == 0},
                  {"median_s", conf[k].median},
                  {"min_s", conf[k].min},
                  {"sweep_median_s", grid[cand[k]].t.median}});

  nlohmann::json calib = nlohmann::json::array();
  for (const ExtraTile& x : extra) {
    const std::size_t i = point_of(x.tiles);
    const std::size_t k = static_cast<std::size_t>(
        std::find(cand.begin(), cand.end(), i) - cand.begin());
    nlohmann::json cj2 = {{"capacity_bytes", x.capacity_bytes},
                          {"panels_per_thread", x.panels_per_thread},
                          {"T_i", x.tiles.T_i},
                          {"T_k", x.tiles.T_k}};
    if (k < cand.size())
      cj2.update({{"median_s", conf[k].median},
                  {"time_ratio_to_best", conf[k].median / conf[cb].median}});
    calib.push_back(cj2);
  }
  if (!extra.empty()) j["capacity_calibration"] = calib;
  j.update({{"best", {{"T_i", grid[best].tiles.T_i}, {"T_k", grid[best].tiles.T_k},
                      {"median_s", conf[cb].median}, {"sweep_median_s", grid[best].t.median}}},
            {"sweep_best", {{"T_i", grid[sweep_best].tiles.T_i},
                            {"T_k", grid[sweep_best].tiles.T_k},
                            {"median_s", grid[sweep_best].t.median}}},
            {"worst", {{"T_i", grid[worst].tiles.T_i}, {"T_k", grid[worst].tiles.T_k},
                       {"median_s", grid[worst].t.median}}},
            {"model", {{"T_i", model.T_i}, {"T_k", model.T_k}, {"median_s", conf[0].median},
                       {"sweep_median_s", grid[mi].t.median}}},
            {"model_rank", rank},
            {"measured_points", ok.size()},
            {"confirmation", {{"rounds", cand.size() > 1 ? o.repeat : 0},
                              {"warmup_rounds", cand.size() > 1 ? o.warmup : 0},
                              {"candidates", cj}}},
            {"model_to_best_time_ratio", ratio},
            {"model_to_best_min_time_ratio", min_ratio},
            {"model_to_best_time_ratio_interleaved", ratio},
            {"model_to_best_time_ratio_sweep", grid[mi].t.median / grid[sweep_best].t.median},
            {"worst_to_best_time_ratio", grid[worst].t.median / grid[sweep_best].t.median},
            {"volume_time_spearman", spearman(vol, time)},
            {"sweep_seconds", now_seconds() - sweep0}});
  return j;
}

int run_tile(const Options& o) {
  const KernelKind kind = kernel_from_option(o.kernel);
  if (kind != KernelKind::SpMM && kind != KernelKind::SDDMM)
    throw Error("tile models spmm and sddmm, not " + o.kernel, "use --kernel spmm or sddmm");
  const int threads = resolve_threads(o.threads);
  const Operand op = load_operand(o.file, o.read, kind);
  const CooMatrix& a = op.matrix->matrix;
  const int dense = o.dense > 0 ? o.dense : default_dense_size(kind);

  const LocalitySignature sig = compute_signature(a, threads);
  ModelOptions mopt;
  mopt.kind = kind;
  mopt.dense = dense;
  mopt.threads = threads;
  mopt.panels_per_thread = o.panels_per_thread;
  mopt.min_dense_tile = o.min_dense_tile;
  mopt.cache = cache_capacity(o.cache_level, threads, o.cache_bytes, o.cache_fraction);
  mopt.dtype = o.read.dtype;
  const TileSelection sel = select_tiles(sig, mopt);

  // Best fitting candidate per streaming dimension.
  std::vector<TileCandidate> per_stream;
  for (StreamDim s : {StreamDim::M, StreamDim::N, StreamDim::K}) {
    const TileCandidate* b = nullptr;
    for (const TileCandidate& c : sel.candidates)
      if (c.stream == s && (b == nullptr || (c.fits && !b->fits) ||
                            (c.fits == b->fits && c.volume < b->volume)))
        b = &c;
    if (b) per_stream.push_back(*b);
  }

  bool failed = false;
  nlohmann::json ex;
  if (o.exhaustive) {
    const DenseOperands ops = dense_operands(kind, op, dense, o.seed, "", o.read.dtype);
    const Problem p = make_problem(kind, &a, nullptr, ops);
    std::vector<ExtraTile> extra;
    for (const std::string& c : o.calibrate) {
      ModelOptions m = mopt;
      const std::size_t colon = c.find(':');
      const std::int64_t bytes = parse_bytes(c.substr(0, colon));
      if (colon != std::string::npos) {
        m.panels_per_thread = std::atoi(c.c_str() + colon + 1);
        if (m.panels_per_thread < 1)
          throw Error("bad panels per thread in --calibrate '" + c + "'",
                      "write CAPACITY or CAPACITY:PANELS_PER_THREAD, e.g. 8M:1");
      }
      m.cache = cache_capacity(o.cache_level, threads, bytes, o.cache_fraction);
      const TileSelection xs = select_tiles(sig, m);
      extra.push_back({bytes, m.panels_per_thread,
                       {std::min<std::int64_t>(xs.best_jstream.T_i, std::max(a.rows, 1)),
                        std::min<std::int64_t>(xs.best_jstream.T_k, dense)}});
    }
    ex = exhaustive(o, a, p, sig, sel, threads, extra, failed);
  }

  if (o.json) {
    nlohmann::json j = {
        {"file", o.file},
        {"kernel", o.kernel},
        {"dense", dense},
        {"rows", a.rows},
        {"cols", a.cols},
        {"nnz", a.nnz()},
        {"threads", threads},
        {"panels_per_thread", mopt.panels_per_thread},
        {"min_dense_tile", mopt.min_dense_tile},
        {"cache", mopt.cache.to_json()},
        {"signature_s", sig.seconds},
        {"selection_s", sel.seconds},
        {"best", candidate_json(sel.best, kind)},
        {"jstream", candidate_json(sel.best_jstream, kind)},
        {"best_per_stream", nlohmann::json::array()},
        {"candidates", nlohmann::json::array()}};
    for (const TileCandidate& c : per_stream) j["best_per_stream"].push_back(candidate_json(c, kind));
    for (const TileCandidate& c : sel.candidates) j["candidates"].push_back(candidate_json(c, kind));
    // Single precision's output is what it always was (no key); double says so.
    if (mopt.dtype != Dtype::F32) j["dtype"] = std::string(dtype_name(mopt.dtype));
    if (o.exhaustive) j["exhaustive"] = ex;
    j["context"] = context_json(threads, "none");
    print_json(j);
    return failed ? kExitFailure : kExitOk;
  }

  std::printf("%s: %s, %d x %d, %lld nonzeros, dense %d, %d threads%s\n", o.file.c_str(),
              o.kernel.c_str(), a.rows, a.cols, static_cast<long long>(a.nnz()), dense, threads,
              mopt.dtype == Dtype::F32 ? "" : ", double precision (8-byte values)");
  std::printf("cache: %s (%s, %lld bytes%s) -> capacity %lld elements per thread; "
              ">= %d panels per thread\n",
              mopt.cache.level.c_str(), mopt.cache.rule.c_str(),
              static_cast<long long>(mopt.cache.bytes),
              mopt.cache.shared ? " shared" : " private",
              static_cast<long long>(mopt.cache.elements()), mopt.panels_per_thread);
  std::printf("signature %s, selection %s\n", format_seconds(sig.seconds).c_str(),
              format_seconds(sel.seconds).c_str());
  std::printf("%-7s %-24s %8s %8s %6s %14s %14s %5s\n", "stream", "stationary", "T_i", "T_j",
              "T_k", "volume (B)", "footprint", "fits");
  for (const TileCandidate& c : per_stream)
    std::printf("%-7s %-24s %8lld %8lld %6lld %14.4g %14.4g %5s\n", stream_name(c.stream),
                stationary_name(c.stream, kind), static_cast<long long>(c.T_i),
                static_cast<long long>(c.T_j), static_cast<long long>(c.T_k), 4.0 * c.volume,
                c.footprint, c.fits ? "yes" : "no");
  std::printf("model choice: stream %s; J-Stream tiles T_i=%lld T_k=%lld\n",
              stream_name(sel.best.stream), static_cast<long long>(sel.best_jstream.T_i),
              static_cast<long long>(sel.best_jstream.T_k));
  if (o.exhaustive && ex.contains("model_to_best_time_ratio")) {
    std::printf("exhaustive (%zu points, %s clock): best T_i=%lld T_k=%lld %s; model %s, "
                "rank %d in the sweep; model/best %.3f re-timed interleaved (sweep medians %.3f, "
                "by min %.3f); worst/best %.3f; Spearman(volume, time) %.3f\n",
                ex["measured_points"].get<std::size_t>(), ex["clock"].get<std::string>().c_str(),
                static_cast<long long>(ex["best"]["T_i"].get<std::int64_t>()),
                static_cast<long long>(ex["best"]["T_k"].get<std::int64_t>()),
                format_seconds(ex["best"]["median_s"].get<double>()).c_str(),
                format_seconds(ex["model"]["median_s"].get<double>()).c_str(),
                ex["model_rank"].get<int>(), ex["model_to_best_time_ratio"].get<double>(),
                ex["model_to_best_time_ratio_sweep"].get<double>(),
                ex["model_to_best_min_time_ratio"].get<double>(),
                ex["worst_to_best_time_ratio"].get<double>(),
                ex["volume_time_spearman"].get<double>());
  }
  if (failed) std::printf("some grid points computed wrong results (see stderr)\n");
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

Command make_tile_command() {
  return {"tile", "Model-driven tile sizes for tiled SpMM/SDDMM (SC'20), optionally vs exhaustive",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            sub.add_option("--kernel", o->kernel, "Kernel: spmm or sddmm")
                ->required()
                ->check(CLI::IsMember({"spmm", "sddmm"}));
            sub.add_option("FILE", o->file, "Matrix Market file (.mtx or .mtx.gz)")->required();
            sub.add_option("--dense", o->dense, "Dense size: SpMM J / SDDMM K (default 256)")
                ->check(CLI::Range(1, 1 << 20));
            add_cache_options(sub, o->cache_level, o->cache_bytes, o->cache_fraction);
            sub.add_option("--panels-per-thread", o->panels_per_thread,
                           "Row panels each thread gets at least (caps T_i)")
                ->check(CLI::Range(1, 1 << 20))
                ->capture_default_str();
            sub.add_option("--min-dense-tile", o->min_dense_tile,
                           "Smallest dense tile T_k the model considers (16: the paper's set)")
                ->check(CLI::Range(1, 1 << 20))
                ->capture_default_str();
            add_threads_option(sub, o->threads);
            sub.add_flag("--json", o->json, "Print JSON");
            sub.add_flag("--exhaustive", o->exhaustive,
                         "Also measure J-Stream on the whole tile grid (T_i powers of two from "
                         "--min-ti up, T_k powers of two from 16 up to the dense size), then "
                         "re-time the model's point and the fastest points interleaved; "
                         "progress goes to stderr");
            sub.add_option("--min-ti", o->min_ti, "Smallest T_i of the exhaustive grid")
                ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
                ->capture_default_str();
            sub.add_option("--repeat", o->repeat, "Timed runs per grid point")
                ->check(CLI::Range(1, 100000))
                ->capture_default_str();
            sub.add_option("--warmup", o->warmup, "Untimed runs per grid point")
                ->check(CLI::Range(0, 100000))
                ->capture_default_str();
            sub.add_option("--cutoff", o->cutoff,
                           "Stop timing a grid point after one run when it is more than this "
                           "times the best median so far (0: never)")
                ->check(CLI::Range(0.0, 1e9))
                ->capture_default_str();
            sub.add_option("--confirm", o->confirm,
                           "Fastest grid points re-timed with the model's point, interleaved "
                           "(model_to_best_time_ratio comes from this; 0: the sweep's medians)")
                ->check(CLI::Range(0, 1000))
                ->capture_default_str();
            sub.add_option("--calibrate", o->calibrate,
                           "With --exhaustive: also re-time the model's choice at each of these "
                           "cache capacities (bytes, K/M/G suffixes; CAPACITY:P also sets the "
                           "panels per thread), reported as capacity_calibration")
                ->delimiter(',')
                ->allow_extra_args(false);
            sub.add_option("--clock", o->clock,
                           "Timer of the sweep: cpu (the thread's CPU time; one thread only), wall, "
                           "or auto (cpu with one thread)")
                ->check(CLI::IsMember({"auto", "cpu", "wall"}))
                ->capture_default_str();
            sub.add_option("--seed", o->seed, "Seed of the generated dense operands")
                ->capture_default_str();
            sub.add_option("--tolerance", o->tolerance, "Verification tolerance")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            add_read_options(sub, o->read);
            add_dtype_option(sub, o->read.dtype);
            sub.footer(
                "Streams (the paper's letters, sparse matrix M x N, dense width K): M keeps the\n"
                "input dense tile in cache, N the output tile (J-Stream, what --impl jstream runs),\n"
                "K the sparse tile. Volumes are in bytes; footprints and the capacity in elements\n"
                "of 4 bytes (an index is one, a value one in f32 and two in f64: --dtype f64\n"
                "sizes tiles for, and --exhaustive runs J-Stream in, double precision).\n\n"
                "Examples:\n"
                "  waco-hybrid tile --kernel spmm --dense 128 examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tile --kernel sddmm --exhaustive --json examples/bcsstk13.mtx.gz");
            return [o] { return run_tile(*o); };
          }};
}

}  // namespace waco::cli
