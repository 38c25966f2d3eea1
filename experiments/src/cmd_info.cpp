// waco-hybrid info FILE: shape and statistics of a sparse matrix or tensor.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/peaks.hpp"
#include "waco/kernels/serial_bound.hpp"
#include "waco/kernels/sparse.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

struct Options {
  std::string file;
  bool json = false;
  bool caches = false;
  bool probe = false;
  bool peaks = false;
  std::string isa;  ///< --isa: the probe's vector instructions (empty: the widest supported)
  int threads = 0;
  ReadOptions read;
};

/// A cache size for the --caches table ("-" when the source gave none).
std::string size_or_dash(std::int64_t bytes) { return bytes > 0 ? bytes_text(bytes) : "-"; }

/// info --caches: every source of the cache sizes side by side, and what the chain made of them.
int print_caches(bool json, bool fresh_probe) {
  const CacheSizes sysfs = read_sysfs_cache_sizes(sysfs_root());
  const CacheSizes cpuid = read_cpuid_cache_sizes();
  const CacheProbeResult& probe = cache_probe(!fresh_probe);
  const CacheSizes& chain = cache_sizes();
  const auto levels = [](std::int64_t l1d, std::int64_t l2, std::int64_t l3) {
    return nlohmann::json{{"l1d", l1d}, {"l2", l2}, {"l3", l3}};
  };
  if (json) {
    nlohmann::json j = {{"sysfs_root", sysfs_root()},
                        {"sysfs", levels(sysfs.l1d, sysfs.l2, sysfs.l3)},
                        {"sysfs_llc_sharing_cpus", sysfs.llc_sharing_cpus},
                        {"cpuid", levels(cpuid.l1d, cpuid.l2, cpuid.l3)},
                        {"probe", probe.to_json()},
                        {"probe_file", cache_probe_path()},
                        {"chain", chain.to_json()},
                        {"context", context_json(1, "none")}};
    print_json(j);
    return kExitOk;
  }
  std::printf("%-8s %10s %10s %10s\n", "source", "L1d", "L2", "L3");
  std::printf("%-8s %10s %10s %10s  (%s/devices/system/cpu/cpu0/cache, %d CPUs share the LLC)\n",
              "sysfs", size_or_dash(sysfs.l1d).c_str(), size_or_dash(sysfs.l2).c_str(), size_or_dash(sysfs.l3).c_str(),
              sysfs_root().c_str(), sysfs.llc_sharing_cpus);
  std::printf("%-8s %10s %10s %10s  (sysconf)\n", "cpuid", size_or_dash(cpuid.l1d).c_str(),
              size_or_dash(cpuid.l2).c_str(), size_or_dash(cpuid.l3).c_str());
  std::printf("%-8s %10s %10s %10s  (one core's read bandwidth, %d passes in %.2f s; %s)\n",
              "probe", size_or_dash(probe.l1d).c_str(), size_or_dash(probe.l2).c_str(), size_or_dash(probe.l3).c_str(),
              probe.passes, probe.seconds, cache_probe_path().c_str());
  std::printf("%-8s %10s %10s %10s  (LLC from %s, shared by %d CPUs)\n", "used",
              size_or_dash(chain.l1d).c_str(), size_or_dash(chain.l2).c_str(), size_or_dash(chain.l3).c_str(),
              chain.source.c_str(), chain.llc_sharing_cpus);
  if (!chain.note.empty()) std::printf("note: %s\n", chain.note.c_str());
  std::printf("probe curve (GB/s):");
  for (std::size_t i = 0; i < probe.curve.size(); ++i)
    std::printf("%s%s %.0f", i % 6 ? ", " : "\n  ", size_or_dash(probe.curve[i].bytes).c_str(),
                probe.curve[i].gbps);
  std::printf("\n");
  return kExitOk;
}

struct LengthStats {
  std::int64_t min = 0, max = 0, empty = 0;
  double mean = 0.0;
};

LengthStats length_stats(const std::vector<std::int64_t>& count) {
  LengthStats s;
  if (count.empty()) return s;
  s.min = *std::min_element(count.begin(), count.end());
  s.max = *std::max_element(count.begin(), count.end());
  std::int64_t total = 0;
  for (std::int64_t c : count) {
    total += c;
    s.empty += c == 0;
  }
  s.mean = static_cast<double>(total) / static_cast<double>(count.size());
  return s;
}

nlohmann::json stats_json(const LengthStats& s) {
  return {{"min", s.min}, {"mean", s.mean}, {"max", s.max}, {"empty", s.empty}};
}

nlohmann::json source_json(const SourceInfo& src) {
  return {{"path", src.path},
          {"field", field_name(src.field)},
          {"symmetry", symmetry_name(src.symmetry)},
          {"stored_entries", src.stored_entries},
          {"duplicates_summed", src.duplicates_summed},
          {"explicit_zeros", src.explicit_zeros},
          {"zeros_dropped", src.zeros_dropped},
          {"gzip", src.gzip},
          {"bytes", src.bytes},
          {"read_seconds", src.seconds}};
}

nlohmann::json matrix_info(const LoadedMatrix& m) {
  const CooMatrix& a = m.matrix;
  std::vector<std::int64_t> per_row(a.rows, 0), per_col(a.cols, 0);
  for (std::int64_t e = 0; e < a.nnz(); ++e) {
    ++per_row[a.row[e]];
    ++per_col[a.col[e]];
  }
  const LengthStats rows = length_stats(per_row), cols = length_stats(per_col);
  // CSR structure (4-byte positions, coordinates, values) plus the dense operands of SpMV and of
  // SpMM with the default J: what must stay in cache for one pass to reuse its operands.
  const std::int64_t csr = (static_cast<std::int64_t>(a.rows) + 1) * 4 + a.nnz() * 8;
  const std::int64_t spmv_ws = csr + (static_cast<std::int64_t>(a.rows) + a.cols) * 4;
  const std::int64_t J = default_dense_size(KernelKind::SpMM);
  const std::int64_t spmm_ws = csr + (static_cast<std::int64_t>(a.rows) + a.cols) * J * 4;
  const std::int64_t llc = cache_sizes().llc();
  const double density =
      a.rows && a.cols ? static_cast<double>(a.nnz()) / (double(a.rows) * double(a.cols)) : 0.0;
  return {{"kind", "matrix"},
          {"rows", a.rows},
          {"cols", a.cols},
          {"nnz", a.nnz()},
          {"density", density},
          {"source", source_json(m.source)},
          {"nnz_per_row", stats_json(rows)},
          {"nnz_per_col", stats_json(cols)},
          {"empty_rows", rows.empty},
          {"empty_cols", cols.empty},
          {"csr_bytes", csr},
          {"llc_bytes", llc},
          {"spmv_working_set_bytes", spmv_ws},
          {"spmv_fits_llc", llc > 0 && spmv_ws <= llc},
          {"spmm_j", J},
          {"spmm_working_set_bytes", spmm_ws},
          {"spmm_fits_llc", llc > 0 && spmm_ws <= llc},
          {"fingerprint", fingerprint_hex(a)}};
}

nlohmann::json tensor_info(const LoadedTensor& t) {
  const CooTensor& x = t.tensor;
  nlohmann::json modes = nlohmann::json::array();
  for (int m = 0; m < x.order(); ++m) {
    std::vector<std::int64_t> count(x.dims[m], 0);
    for (index_t i : x.idx[m]) ++count[i];
    modes.push_back({{"mode", m}, {"dim", x.dims[m]}, {"nnz_per_slice", stats_json(length_stats(count))}});
  }
  return {{"kind", "tensor"},
          {"order", x.order()},
          {"dims", x.dims},
          {"nnz", x.nnz()},
          {"source", source_json(t.source)},
          {"modes", modes},
          {"coo_bytes", x.nnz() * (4 * x.order() + 4)},
          {"llc_bytes", cache_sizes().llc()},
          {"fingerprint", fingerprint_hex(x)}};
}

void print_text(const nlohmann::json& j) {
  const auto& src = j["source"];
  std::cout << "file:        " << src["path"].get<std::string>() << (src["gzip"].get<bool>() ? " (gzip)" : "")
            << "\n";
  if (j["kind"] == "matrix") {
    std::cout << "matrix:      " << j["rows"] << " x " << j["cols"] << ", " << j["nnz"]
              << " nonzeros (density " << j["density"].get<double>() << ")\n"
              << "stored:      " << src["stored_entries"] << " entries, "
              << src["field"].get<std::string>() << ", " << src["symmetry"].get<std::string>()
              << "; " << src["duplicates_summed"] << " duplicates summed, " << src["explicit_zeros"]
              << " explicit zeros kept, " << src["zeros_dropped"] << " dropped\n";
    for (const char* dim : {"row", "col"}) {
      const auto& s = j[std::string("nnz_per_") + dim];
      std::cout << "nnz per " << dim << ": min " << s["min"] << ", mean " << s["mean"].get<double>()
                << ", max " << s["max"] << "; " << s["empty"] << " empty " << dim << "s\n";
    }
    std::cout << "CSR bytes:   " << j["csr_bytes"] << "\n"
              << "working set: SpMV " << j["spmv_working_set_bytes"] << " B ("
              << (j["spmv_fits_llc"].get<bool>() ? "fits" : "exceeds") << " the "
              << j["llc_bytes"] << " B LLC), SpMM J=" << j["spmm_j"] << " "
              << j["spmm_working_set_bytes"] << " B ("
              << (j["spmm_fits_llc"].get<bool>() ? "fits" : "exceeds") << ")\n";
  } else {
    std::cout << "tensor:      order " << j["order"] << ", dims " << j["dims"].dump() << ", "
              << j["nnz"] << " nonzeros\n"
              << "stored:      " << src["stored_entries"] << " entries; "
              << src["duplicates_summed"] << " duplicates summed\n";
    for (const auto& m : j["modes"])
      std::cout << "mode " << m["mode"] << ":      nnz per slice min "
                << m["nnz_per_slice"]["min"] << ", mean "
                << m["nnz_per_slice"]["mean"].get<double>() << ", max "
                << m["nnz_per_slice"]["max"] << "; " << m["nnz_per_slice"]["empty"]
                << " empty slices\n";
  }
  std::cout << "read:        " << src["bytes"] << " bytes in "
            << format_seconds(src["read_seconds"].get<double>()) << "\n"
            << "fingerprint: " << j["fingerprint"].get<std::string>() << "\n";
}

}  // namespace

Command make_info_command() {
  return {"info", "Shape, statistics and working set of a sparse matrix or tensor",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            auto* file = sub.add_option("FILE", o->file,
                                        "Matrix Market (.mtx[.gz]) or FROSTT (.tns[.gz]) file");
            sub.add_flag("--json", o->json, "Print JSON (with a context block)");
            auto* caches = sub.add_flag(
                "--caches", o->caches,
                "Instead of a file: this machine's cache sizes from each source (sysfs, CPUID, "
                "the measured probe) and the ones waco-hybrid uses");
            sub.add_flag("--probe", o->probe, "With --caches: measure the probe anew (about 1 s)")
                ->needs(caches);
            auto* peaks = sub.add_flag(
                "--peaks", o->peaks,
                "Instead of a file: measure this machine's fp32 and fp64 peaks and memory "
                "bandwidth on --threads (about 0.5 s), the roofline bench --roofline reports "
                "against, and on 2 threads or more the csr SpMV serial bound (the nonzeros up to "
                "which csr runs serially) probed anew beside the one in use");
            sub.add_option("--isa", o->isa,
                           "With --peaks: the vector instructions of the arithmetic probe "
                           "(default: the widest this CPU supports)")
                ->check(CLI::IsMember({"sse2", "avx2+fma", "avx512f"}))
                ->needs(peaks);
            add_threads_option(sub, o->threads);
            file->excludes(caches);
            file->excludes(peaks);
            peaks->excludes(caches);
            add_read_options(sub, o->read);
            sub.footer(
                "Examples:\n"
                "  waco-hybrid info examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid info --json data/tensor.tns.gz\n"
                "  waco-hybrid info --caches\n"
                "  waco-hybrid info --peaks --threads 2\n"
                "  waco-hybrid info --peaks --threads 1 --isa avx2+fma\n"
                "nnz counts both triangles of symmetric files; duplicates are summed.");
            return [o] {
              if (o->caches) return print_caches(o->json, o->probe);
              if (o->peaks) {
                const int threads = resolve_threads(o->threads);
                VectorIsa isa = widest_isa(cpu_isa_features());
                for (VectorIsa i : {VectorIsa::Sse2, VectorIsa::Avx2Fma, VectorIsa::Avx512})
                  if (o->isa == isa_name(i)) isa = i;
                const MachinePeaks p = measure_peaks(threads, isa);
                // The csr SpMV rule's serial bound (kernels/serial_bound.hpp): probed anew, and
                // the one the rule uses (stored for this machine, or WACO_CSR_SERIAL_NNZ).
                nlohmann::json bound = nlohmann::json::object();
                if (threads >= 2)
                  for (const Dtype d : {Dtype::F32, Dtype::F64}) {
                    nlohmann::json b = run_serial_bound_probe(threads, d).to_json();
                    b["used"] = csr_spmv_serial_nnz(threads, d);
                    bound[std::string(dtype_name(d))] = b;
                  }
                // The serial loop's copies (serial_bound.hpp): probed anew, and the one that runs.
                nlohmann::json loop = nlohmann::json::object();
                for (const Dtype d : {Dtype::F32, Dtype::F64}) {
                  nlohmann::json l = run_serial_loop_probe(d).to_json();
                  l["used"] = csr_spmv_serial_copy(d);
                  loop[std::string(dtype_name(d))] = l;
                }
                if (o->json) {
                  nlohmann::json j = p.to_json();
                  j["csr_serial_bound"] = bound;
                  j["csr_serial_loop"] = loop;
                  j["context"] = context_json(threads, "none");
                  print_json(j);
                } else {
                  std::printf("fp32 peak  %8.1f GFLOP/s  (%d threads; %s vector FMA chains in registers)\n"
                              "fp64 peak  %8.1f GFLOP/s\n"
                              "bandwidth  %8.1f GB/s     (STREAM triad, 3 x 128 MiB)\n",
                              p.fp32_gflops, threads, isa_name(p.isa), p.fp64_gflops,
                              p.bandwidth_gbs);
                  if (p.reported_mhz > 0)
                    std::printf("           %.2f vector FMAs a cycle a thread at the reported "
                                "%.0f MHz (2 FMA units a core deliver 2; more: the cores ran "
                                "above it)\n",
                                p.fma_per_cycle(), p.reported_mhz);
                  if (!bound.empty())
                    std::printf("csr serial bound: f32 %lld, f64 %lld nonzeros (this probe); the "
                                "rule uses %lld, %lld (%s)\n",
                                bound["f32"]["serial_nnz"].get<long long>(),
                                bound["f64"]["serial_nnz"].get<long long>(),
                                bound["f32"]["used"].get<long long>(),
                                bound["f64"]["used"].get<long long>(),
                                std::getenv("WACO_CSR_SERIAL_NNZ") ? "WACO_CSR_SERIAL_NNZ"
                                                                   : serial_bound_path().c_str());
                  for (const auto& [dtype, l] : loop.items()) {
                    std::printf("csr serial loop %s: copies' time over copy 0's", dtype.c_str());
                    for (const auto& r : l.at("relative")) std::printf(" %.2f", r.get<double>());
                    std::printf(" (this probe: copy %d); the loop runs copy %d (%s)\n", l.at("copy").get<int>(),
                                l.at("used").get<int>(),
                                std::getenv("WACO_CSR_SERIAL_COPY") ? "WACO_CSR_SERIAL_COPY"
                                                                    : serial_loop_path().c_str());
                  }
                  std::printf("measured in %.2f s\n", p.seconds);
                }
                return kExitOk;
              }
              if (o->file.empty())
                throw CLI::RequiredError("FILE");  // a usage error: exit 2 from main
              const Operand op = load_operand(o->file, o->read);
              nlohmann::json j = op.matrix ? matrix_info(*op.matrix) : tensor_info(*op.tensor);
              if (o->json) {
                j["context"] = context_json(1, "none");
                print_json(j);
              } else {
                print_text(j);
              }
              return kExitOk;
            };
          }};
}

}  // namespace waco::cli
