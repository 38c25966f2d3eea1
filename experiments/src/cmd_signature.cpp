// waco-hybrid signature: the locality signature of a matrix (SC'20 Alg. 7-8): the active-segment
// curves nacs/nars/p for powers of two T, summaries of the zero-interval histograms, and the block
// statistics; with --cost, also the signature's time against one CSR SpMM with J = 128.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/signature/signature.hpp"

namespace waco::cli {
using namespace waco::kernels;
using namespace waco::signature;

namespace {

struct Options {
  std::string file;
  bool json = false;
  bool csv = false;
  bool cost = false;
  int threads = 0;
  int repeat = 5;
  ReadOptions read;
};

/// Summary of one interval histogram: counts, the length distribution in log2 bins
/// (bin 0: d = 0, bin b >= 1: 2^(b-1) <= d < 2^b), mean and median length, empty lines.
nlohmann::json histogram_summary(const SegmentSignature& s) {
  std::int64_t count = 0;
  double weighted = 0;
  std::int64_t longest = -1;
  std::vector<std::int64_t> bins;
  const std::vector<std::int64_t> intervals = s.interval_histogram();
  for (std::size_t d = 0; d < intervals.size(); ++d) {
    const std::int64_t n = intervals[d];
    if (n == 0) continue;
    count += n;
    weighted += static_cast<double>(d) * static_cast<double>(n);
    longest = static_cast<std::int64_t>(d);
    const std::size_t bin = d == 0 ? 0 : static_cast<std::size_t>(log2_ceil(d + 1));
    if (bins.size() <= bin) bins.resize(bin + 1, 0);
    bins[bin] += n;
  }
  std::int64_t median = 0, seen = 0;
  for (std::size_t d = 0; d < intervals.size(); ++d) {
    seen += intervals[d];
    if (2 * seen >= count && count > 0) {
      median = static_cast<std::int64_t>(d);
      break;
    }
  }
  return {{"lines", s.lines},
          {"length", s.length},
          {"nonempty_lines", s.nonempty_lines},
          {"intervals", count},
          {"zero_length_intervals", s.intervals(0)},
          {"empty_lines", s.intervals(s.length)},
          {"mean_length", count ? weighted / static_cast<double>(count) : 0.0},
          {"median_length", median},
          {"max_length", longest},
          {"log2_bins", bins}};
}

std::vector<std::int64_t> curve_points(const LocalitySignature& s) {
  std::vector<std::int64_t> ts;
  const std::int64_t top = std::int64_t{1} << log2_ceil(std::max<std::int64_t>({s.rows, s.cols, 1}));
  for (std::int64_t T = 1; T <= top; T *= 2) ts.push_back(T);
  return ts;
}

/// Median times of the signature (with `threads` row chunks) and of one CSR SpMM with J = 128 on
/// `threads` threads, measured interleaved (one of each per round) so machine noise hits both.
nlohmann::json measure_cost(const CooMatrix& a, int threads, int repeat) {
  const DenseOperands ops = make_dense_operands(KernelKind::SpMM, &a, nullptr, 128, 1);
  const Problem p = make_problem(KernelKind::SpMM, &a, nullptr, ops);
  auto csr = make_implementation(all_implementations(), "csr", KernelKind::SpMM);
  csr->prepare(p, threads);
  // One warm-up round, then `repeat` rounds of one of each, the order alternating.
  const std::vector<TimingStats> t =
      time_interleaved({[&] { (void)compute_signature(a, threads); }, [&] { csr->run(); }},
                       TimingOptions{1, repeat});
  const TimingStats &ts = t[0], &tc = t[1];
  const double ms = ts.median, mc = tc.median;
  return {{"signature_median_s", ms},
          {"csr_spmm_j128_median_s", mc},
          {"signature_min_s", ts.min},
          {"csr_spmm_j128_min_s", tc.min},
          {"threads", threads},
          {"ratio", mc > 0 ? ms / mc : 0.0},
          {"ratio_of_min", tc.min > 0 ? ts.min / tc.min : 0.0},
          {"repeats", repeat},
          {"interleaved", true}};
}

int run_signature(const Options& o) {
  const Operand op = load_operand(o.file, o.read, KernelKind::SpMM);
  const CooMatrix& a = op.matrix->matrix;
  const int threads = resolve_threads(o.threads);
  const LocalitySignature s = compute_signature(a, threads);
  const std::vector<std::int64_t> ts = curve_points(s);

  if (o.csv) {
    std::printf("T,nacs,nars,p_col,p_row\n");
    for (std::int64_t T : ts)
      std::printf("%lld,%lld,%lld,%.9g,%.9g\n", static_cast<long long>(T),
                  static_cast<long long>(s.nacs(T)), static_cast<long long>(s.nars(T)), s.p_col(T),
                  s.p_row(T));
    return kExitOk;
  }
  nlohmann::json cost;
  if (o.cost) cost = measure_cost(a, threads, o.repeat);

  if (o.json) {
    nlohmann::json j = {{"file", o.file},
                        {"rows", s.rows},
                        {"cols", s.cols},
                        {"nnz", s.nnz},
                        {"signature_s", s.seconds},
                        {"scan", scan_name(s.scan)},
                        {"curves", nlohmann::json::array()},
                        {"histograms",
                         {{"vertical", histogram_summary(s.col_segments)},
                          {"horizontal", histogram_summary(s.row_segments)}}},
                        {"blocks", nlohmann::json::array()}};
    for (std::int64_t T : ts)
      j["curves"].push_back(
          {{"T", T}, {"nacs", s.nacs(T)}, {"nars", s.nars(T)}, {"p_col", s.p_col(T)},
           {"p_row", s.p_row(T)}});
    for (const BlockStat& b : s.blocks)
      j["blocks"].push_back({{"bi", b.bi},
                             {"bk", b.bk},
                             {"nonempty_blocks", b.nonempty_blocks},
                             {"fill_ratio", b.fill_ratio}});
    if (o.cost) j["cost"] = cost;
    j["context"] = context_json(threads, "none");
    print_json(j);
    return kExitOk;
  }

  std::printf("%s: %d x %d, %lld nonzeros; signature in %s (scan: %s)\n", o.file.c_str(), s.rows,
              s.cols, static_cast<long long>(s.nnz), format_seconds(s.seconds).c_str(),
              scan_name(s.scan));
  std::printf("nacs(T): active column segments of row panels of height T; nars(T): active row\n"
              "segments of column panels of width T; p: proportion of active (unaligned) segments\n");
  std::printf("%10s %14s %14s %10s %10s\n", "T", "nacs", "nars", "p_col", "p_row");
  for (std::int64_t T : ts)
    std::printf("%10lld %14lld %14lld %10.6f %10.6f\n", static_cast<long long>(T),
                static_cast<long long>(s.nacs(T)), static_cast<long long>(s.nars(T)), s.p_col(T),
                s.p_row(T));
  for (const auto* seg : {&s.col_segments, &s.row_segments}) {
    const nlohmann::json h = histogram_summary(*seg);
    std::printf("%s intervals: %lld (%lld of length 0), mean length %.2f, median %lld, max %lld; "
                "%lld empty %s\n",
                seg == &s.col_segments ? "vertical" : "horizontal",
                static_cast<long long>(h["intervals"].get<std::int64_t>()),
                static_cast<long long>(h["zero_length_intervals"].get<std::int64_t>()),
                h["mean_length"].get<double>(),
                static_cast<long long>(h["median_length"].get<std::int64_t>()),
                static_cast<long long>(h["max_length"].get<std::int64_t>()),
                static_cast<long long>(h["empty_lines"].get<std::int64_t>()),
                seg == &s.col_segments ? "columns" : "rows");
  }
  std::printf("block fill ratio (nnz / (nonempty blocks * bi * bk)), rows bi, columns bk:\n%6s", "");
  for (int bk = 1; bk <= kMaxBlock; bk *= 2) std::printf(" %8d", bk);
  std::printf("\n");
  for (int bi = 1; bi <= kMaxBlock; bi *= 2) {
    std::printf("%6d", bi);
    for (int bk = 1; bk <= kMaxBlock; bk *= 2) std::printf(" %8.4f", s.block(bi, bk).fill_ratio);
    std::printf("\n");
  }
  if (o.cost)
    std::printf("cost (interleaved medians, %d threads): signature %s, csr spmm J=128 %s: ratio %.3f\n",
                threads,
                format_seconds(cost["signature_median_s"].get<double>()).c_str(),
                format_seconds(cost["csr_spmm_j128_median_s"].get<double>()).c_str(),
                cost["ratio"].get<double>());
  return kExitOk;
}

}  // namespace

Command make_signature_command() {
  return {"signature", "Locality signature of a matrix: active-segment curves, intervals, blocks",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            sub.add_option("FILE", o->file, "Matrix Market file (.mtx or .mtx.gz)")->required();
            auto* json = sub.add_flag("--json", o->json,
                                      "Print JSON (curves as objects with T, nacs, nars, p_col, "
                                      "p_row; histogram summaries; block statistics)");
            sub.add_flag("--csv", o->csv, "Print the curves as CSV (T,nacs,nars,p_col,p_row)")
                ->excludes(json);
            sub.add_flag("--cost", o->cost,
                         "Also time the signature against one CSR SpMM with J = 128");
            add_threads_option(sub, o->threads);
            sub.add_option("--repeat", o->repeat, "Timed runs for --cost")
                ->check(CLI::Range(1, 100000))
                ->capture_default_str();
            add_read_options(sub, o->read);
            sub.footer(
                "The curves are given for every power of two T up to the larger dimension; nacs and\n"
                "nars are exact counts over aligned panels, p_col and p_row the proportions of\n"
                "eq. 11 (SC'20) over all unaligned segments. \"scan\" (JSON) names the pass that\n"
                "computed them, with the same result: \"panels\" (dense matrices, AVX-512 builds)\n"
                "or \"entries\". --cost times the signature and one CSR SpMM (J = 128) side by\n"
                "side, --repeat rounds after one warm-up, and reports the ratio of the medians.\n\n"
                "Examples:\n  waco-hybrid signature examples/bcsstk13.mtx.gz --json\n"
                "  waco-hybrid signature examples/bcsstk13.mtx.gz --cost --repeat 11");
            return [o] { return run_signature(*o); };
          }};
}

}  // namespace waco::cli
