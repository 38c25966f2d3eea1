// Unit "standalone": the drop-in headers of emit --standalone / tune -o (codegen::
// emit_standalone_header) compiled into a separate program with nothing of waco-hybrid, for every
// shortcut, 50 random valid schedules per kernel and 12 with narrow (N) levels: each builds its
// format from CSR arrays (from coordinates for MTTKRP), runs, and must equal the double-precision
// reference, on every edge-case operand and, for matrices, at the 16-bit boundary of N levels
// (65536 and 65537 columns); a format the library refuses (padding bound, an N level over 16
// bits) must be refused alike. SpMV adds the headers of plans the hand-written csr baseline
// serves (its threads and chunks) and the dia baseline serves (diagonal storage, refused where
// the library's dia refuses), on a matrix beyond the serial bound as well.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/edge_cases.hpp"
#include "support/random_schedule.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"

using namespace waco;
using kernels::KernelKind;

namespace {

constexpr int kDense = 3;  // not a power of two: inner splits of the dense variable are ragged

template <typename T, typename A>
void put(std::ofstream& out, const std::vector<T, A>& v) {
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

void put(std::ofstream& out, const kernels::Values& v) {
  out.write(static_cast<const char*>(v.raw()),
            static_cast<std::streamsize>(v.size() * kernels::dtype_size(v.dtype())));
}

/// Sparse values as the driver reads them (its value type).
void put_values(std::ofstream& out, const std::vector<double>& v, kernels::Dtype dtype) {
  if (dtype == kernels::Dtype::F64)
    put(out, v);
  else
    put(out, std::vector<float>(v.begin(), v.end()));
}

template <typename T>
void put_one(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

/// One operand with its dense inputs, as the driver reads it.
struct Case {
  std::string name;
  kernels::CooMatrix A;
  kernels::CooTensor T;
  kernels::DenseOperands dense;
  kernels::Problem problem;
};

void write_case(const std::string& path, KernelKind k, const Case& c) {
  std::ofstream out(path, std::ios::binary);
  if (kernels::needs_tensor(k)) {
    for (int m = 0; m < 3; ++m) put_one<long long>(out, c.T.dims[m]);
    put_one<long long>(out, c.T.nnz());
    for (int m = 0; m < 3; ++m) put(out, c.T.idx[m]);
    put_values(out, c.T.val, c.problem.dtype());
  } else {
    const kernels::CsrMatrix csr = kernels::to_csr(c.A);
    put_one<long long>(out, csr.rows);
    put_one<long long>(out, csr.cols);
    put_one<long long>(out, csr.nnz());
    std::vector<long long> rowptr(csr.rowptr.begin(), csr.rowptr.end());
    put(out, rowptr);
    put(out, csr.colidx);
    put_values(out, csr.val, c.problem.dtype());
  }
  put_one<long long>(out, static_cast<long long>(c.dense.B.data.size()));
  put(out, c.dense.B.data);
  put_one<long long>(out, static_cast<long long>(c.dense.C.data.size()));
  put(out, c.dense.C.data);
  put_one<long long>(out, static_cast<long long>(c.problem.output_size()));
}

/// The driver: reads each operand file, runs every namespace's build and call (dense size
/// `dense`), and writes per namespace 'R' (refused) or 'O', the output values (of type `vt`) and
/// the value after them (a sentinel, 12345: nothing past the output written) to FILE.out. The
/// output starts on a 64-byte line for even namespaces and 16 bytes past one for odd ones (as
/// malloc's arrays can: the headers that stage such an output, kStageUnalignedOutput, do).
/// With `probe` (headers compiled with -DWACO_STREAM_PROBE), the output starts one value past a
/// 64-byte line, and the lines its streaming writer wrote whole follow the sentinel.
std::string driver(KernelKind k, std::size_t headers, const std::string& vt, int dense = kDense,
                   bool probe = false) {
  std::ostringstream d;
  for (std::size_t i = 0; i < headers; ++i) d << "#include \"s" << i << ".hpp\"\n";
  d << "typedef " << vt << " V;\n";
  d << R"(#include <cstdint>
#include <cstdio>
#include <vector>
template <typename T> std::vector<T> get(std::FILE* f, long long n) {
  std::vector<T> v(n > 0 ? n : 0);
  if (n > 0 && std::fread(v.data(), sizeof(T), n, f) != static_cast<std::size_t>(n)) throw 1;
  return v;
}
template <typename T> T one(std::FILE* f) { T v; if (std::fread(&v, sizeof v, 1, f) != 1) throw 1; return v; }
int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    std::FILE* f = std::fopen(argv[a], "rb");
)";
  if (kernels::needs_tensor(k))
    d << R"(    long long dims[3] = {one<long long>(f), one<long long>(f), one<long long>(f)};
    const long long nnz = one<long long>(f);
    auto i = get<int>(f, nnz), kk = get<int>(f, nnz), l = get<int>(f, nnz);
    auto val = get<V>(f, nnz);
)";
  else
    d << R"(    const long long rows = one<long long>(f), cols = one<long long>(f), nnz = one<long long>(f);
    auto rowptr = get<long long>(f, rows + 1);
    auto colind = get<int>(f, nnz);
    auto val = get<V>(f, nnz);
)";
  d << R"(    auto in0 = get<V>(f, one<long long>(f));
    auto in1 = get<V>(f, one<long long>(f));
    const long long out_size = one<long long>(f);
    std::fclose(f);
    std::FILE* o = std::fopen((std::string(argv[a]) + ".out").c_str(), "wb");
)";
  for (std::size_t i = 0; i < headers; ++i) {
    const std::string ns = "s" + std::to_string(i);
    d << "    try {\n      auto fmt = " << ns << "::build(";
    d << (kernels::needs_tensor(k) ? "dims, nnz, i.data(), kk.data(), l.data(), val.data());\n"
                                   : "rows, cols, rowptr.data(), colind.data(), val.data());\n");
    d << "      std::vector<V> buf((out_size > 0 ? out_size : 1) + 64, V(12345));\n"
         "      V* out = buf.data();\n"
         "      while (reinterpret_cast<std::uintptr_t>(out) % 64 != 0) ++out;\n";
    if (probe)
      d << "      ++out;\n";
    else if (i % 2 == 1)
      d << "      out += 16 / sizeof(V);\n";
    d << "      ";
    switch (k) {
      case KernelKind::SpMV: d << ns << "::spmv(fmt, in0.data(), out);\n"; break;
      case KernelKind::SpMM: d << ns << "::spmm(fmt, " << dense << ", in0.data(), out);\n"; break;
      case KernelKind::SDDMM:
        d << ns << "::sddmm(fmt, " << dense << ", in0.data(), in1.data(), out);\n";
        break;
      case KernelKind::MTTKRP:
        d << ns << "::mttkrp(fmt, " << dense << ", in0.data(), in1.data(), out);\n";
        break;
    }
    d << "      std::fputc('O', o);\n      std::fwrite(out, sizeof(V), out_size + 1, o);\n";
    if (probe) d << "      std::fwrite(&" << ns << "::waco_stream_probe_lines, sizeof(long long), 1, o);\n";
    d << "    } catch (const std::length_error&) {\n      std::fputc('R', o);\n    }\n";
  }
  d << "    std::fclose(o);\n  }\n  return 0;\n}\n";
  return d.str();
}

std::vector<codegen::SuperSchedule> schedules_for(KernelKind k, int random_count, int narrow_count) {
  std::vector<codegen::SuperSchedule> out;
  std::set<std::string> seen;
  const std::vector<std::string> shortcuts =
      kernels::needs_tensor(k) ? std::vector<std::string>{"csf"}
                               : std::vector<std::string>{"csr", "dcsr", "csc", "bcsr4x4", "bcsr2x8", "ncsr"};
  for (const std::string& name : shortcuts) {
    const codegen::SuperSchedule s = codegen::canonicalize(*codegen::schedule_shortcut(k, name));
    if (seen.insert(codegen::to_text(s)).second) out.push_back(s);
  }
  test::Rng rng{0xD409u + static_cast<std::uint64_t>(k)};
  int random = 0;
  while (random < random_count) {
    const codegen::SuperSchedule s = codegen::canonicalize(test::random_schedule(k, rng));
    if (!codegen::validate(s).empty() || !seen.insert(codegen::to_text(s)).second) continue;
    out.push_back(s);
    ++random;
  }
  // Narrow (N) levels: random schedules with 16-bit coordinates, drawn after the others.
  for (int narrow = 0; narrow < narrow_count;) {
    const codegen::SuperSchedule s = codegen::canonicalize(test::random_schedule(k, rng, {0, false, true}));
    if (std::count(s.formats.begin(), s.formats.end(), codegen::LevelFormat::N) == 0 ||
        !seen.insert(codegen::to_text(s)).second)
      continue;
    out.push_back(s);
    ++narrow;
  }
  // A register block whose flush streams beyond the last-level cache (not at these sizes: the
  // source with the streaming writer compiles and runs its plain flush).
  if (k == KernelKind::SpMM || k == KernelKind::MTTKRP) {
    out.push_back(codegen::schedule_from_string(k, k == KernelKind::SpMM ? "split=j:64 order=i,j1,k,j0 format=UC"
                                                                         : "split=j:64 order=i,j1,k,l,j0 format=UCC"));
    REQUIRE(codegen::streams_output(out.back()));
  }
  if (!kernels::needs_tensor(k))  // whole k in 16 bits: 65536 columns built, 65537 refused
    out.push_back(codegen::schedule_from_string(k, k == KernelKind::SDDMM ? "order=i,j,k format=UN"
                                                    : k == KernelKind::SpMV ? "order=i,k format=UN"
                                                                            : "order=i,k,j format=UN"));
  return out;
}

kernels::Values read_values(std::ifstream& in, std::int64_t n, kernels::Dtype dtype) {
  kernels::Values v(dtype, static_cast<std::size_t>(n));
  in.read(static_cast<char*>(v.raw()),
          static_cast<std::streamsize>(n * static_cast<std::int64_t>(kernels::dtype_size(dtype))));
  return v;
}

}  // namespace

namespace {

/// Every kernel's drop-in headers in one program per kernel, on the edge cases, in `dtype`
/// (double: on values float cannot hold, to the double tolerance), with `random` random schedules
/// beside the shortcuts.
void check_standalone(kernels::Dtype dtype, int random, int narrow) {
  const bool f64 = dtype == kernels::Dtype::F64;
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM, KernelKind::MTTKRP}) {
    const std::string kernel(kernels::kernel_name(k));
    const std::string dir =
        test::scratch_dir("standalone-" + kernel + "-" + std::string(kernels::dtype_name(dtype)));
    std::vector<codegen::SuperSchedule> schedules = schedules_for(k, random, narrow);
    // The last header of SpMV: a plan the hand-written csr baseline serves (its threads and
    // chunks: serial up to the serial bound, else about four dynamic chunks a thread, as the csr
    // schedule's chunk=auto).
    // After it, a plan the dia baseline serves (diagonal storage; its builder refuses a matrix
    // whose diagonals store more than 2 values a nonzero).
    const bool with_baseline = k == KernelKind::SpMV;
    const std::size_t baseline_header = schedules.size(), dia_header = baseline_header + 1;
    if (with_baseline) {
      schedules.push_back(*codegen::schedule_shortcut(k, "csr"));
      schedules.push_back(*codegen::schedule_shortcut(k, "csr"));
    }
    const auto baseline_of = [&](std::size_t i) -> std::string {
      return !with_baseline ? "" : i == baseline_header ? "csr" : i == dia_header ? codegen::kDiaBaseline : "";
    };
    for (std::size_t i = 0; i < schedules.size(); ++i) {
      // Every second random schedule with private output copies where that changes the code.
      const codegen::RaceStrategy race = i % 2 == 1 && !codegen::parallel_loop_is_race_free(schedules[i])
                                             ? codegen::RaceStrategy::Private
                                             : codegen::RaceStrategy::Atomic;
      const std::string header = codegen::emit_standalone_header(
          schedules[i], race, "s" + std::to_string(i), {}, codegen::StorageOptions().max_padding,
          dtype, baseline_of(i));
      std::ofstream(dir + "/s" + std::to_string(i) + ".hpp") << header;
      if (baseline_of(i) == codegen::kDiaBaseline) {
        CHECK(header.find("diagonal storage") != std::string::npos);
        continue;
      }
      // The csr SpMV baseline's rule in the headers of chunk=auto (the csr, dcsr and csc
      // shortcuts' SpMV chunk; the baseline's plan has the csr schedule).
      CHECK((header.find("kChunksPerThread = 4;") != std::string::npos) ==
            (schedules[i].chunk == codegen::kAutoChunk));
      if (baseline_of(i) == "csr") CHECK(schedules[i].chunk == codegen::kAutoChunk);
      // ... whose small products run the serial nest, outside the OpenMP region (the edge cases
      // below are such products; "2100 rows" is not).
      const std::size_t serial_branch = header.find("if (a->threads <= 1) {");
      CHECK((serial_branch != std::string::npos) == (schedules[i].chunk == codegen::kAutoChunk));
      if (serial_branch != std::string::npos)
        CHECK(serial_branch < header.find("#pragma omp parallel"));
      // Staging of an output off a 64-byte line, in the headers that add into its rows.
      CHECK(header.find(std::string("kStageUnalignedOutput = ") +
                        (codegen::updates_output_rows(schedules[i]) ? "true" : "false") + ";") !=
            std::string::npos);
      // The streaming rule of this machine, in the headers whose flush can stream.
      CHECK(header.find("kStreamMinBytes = " +
                        std::to_string(codegen::streams_output(schedules[i]) ? codegen::stream_output_min_bytes() : 0) +
                        ";") != std::string::npos);
    }
    std::ofstream(dir + "/driver.cpp") << driver(k, schedules.size(), std::string(kernels::dtype_ctype(dtype)));
    // A separate program: only the headers, the compiler and OpenMP (no waco include path).
    const std::string compile = "c++ -O1 -fopenmp -std=c++17 -Wall -Wextra -Werror -o " + dir +
                                "/driver " + dir + "/driver.cpp 2> " + dir + "/compile.log";
    INFO(kernel << ": " << compile);
    REQUIRE(std::system(compile.c_str()) == 0);

    std::vector<Case> cases;
    if (kernels::needs_tensor(k)) {
      for (auto& [name, t] : test::edge_case_tensors())
        cases.push_back({name, {}, f64 ? test::with_double_values(t) : t, {}, {}});
    } else {
      for (auto& [name, a] : test::edge_case_matrices())
        cases.push_back({name, f64 ? test::with_double_values(a) : a, {}, {}, {}});
      // The 16-bit boundary of N levels over a whole variable (coordinate 65535 is the last).
      for (const kernels::index_t cols : {kernels::index_t{65536}, kernels::index_t{65537}})
        cases.push_back({std::to_string(cols) + " columns",
                         test::from_triplets(3, cols, {0, 0, 2}, {0, 65535, cols - 1}, {1, 2, 3}),
                         {}, {}, {}});
      // SpMV beyond the csr baseline's serial bound, in chunks of more than 128 rows on two
      // threads: 2100 rows of 1-3 entries (uneven rows, 4200 nonzeros).
      if (k == KernelKind::SpMV) {
        std::vector<kernels::index_t> r, c;
        std::vector<float> v;
        for (kernels::index_t i = 0; i < 2100; ++i)
          for (kernels::index_t d = 0; d <= i % 3; ++d) {
            r.push_back(i);
            c.push_back((i * 7 + d * 1013) % 4001);
            v.push_back(1.0f + 0.25f * static_cast<float>(d) - 0.001f * static_cast<float>(i % 17));
          }
        const kernels::CooMatrix big = test::from_triplets(2100, 4001, r, c, v);
        cases.push_back({"2100 rows", f64 ? test::with_double_values(big) : big, {}, {}, {}});
        // ... and for dia: 2100 x 2100, tridiagonal but for a hole (6300 stored values, blocks
        // of 512 rows split unevenly between two threads).
        std::vector<kernels::index_t> tr, tc;
        std::vector<float> tv;
        for (kernels::index_t i = 0; i < 2100; ++i)
          for (kernels::index_t j = std::max(0, i - 1); j <= std::min(2099, i + 1); ++j)
            if (i != 1000 || j != 1001) {
              tr.push_back(i);
              tc.push_back(j);
              tv.push_back(i == j ? 4.0f : -1.0f - 0.001f * static_cast<float>(i % 13));
            }
        const kernels::CooMatrix band = test::from_triplets(2100, 2100, tr, tc, tv);
        REQUIRE_FALSE(test::dia_refuses(band));
        cases.push_back({"2100-row band", f64 ? test::with_double_values(band) : band, {}, {}, {}});
      }
    }
    std::string files;
    for (std::size_t c = 0; c < cases.size(); ++c) {
      Case& cs = cases[c];
      const kernels::CooMatrix* A = kernels::needs_tensor(k) ? nullptr : &cs.A;
      const kernels::CooTensor* T = kernels::needs_tensor(k) ? &cs.T : nullptr;
      cs.dense = kernels::make_dense_operands(k, A, T, kDense, 5, dtype);
      cs.problem = kernels::make_problem(k, A, T, cs.dense);
      const std::string path = dir + "/case" + std::to_string(c) + ".bin";
      write_case(path, k, cs);
      files += " " + path;
    }
    REQUIRE(std::system((dir + "/driver" + files).c_str()) == 0);

    int ran = 0, refused = 0;
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const Case& cs = cases[c];
      const kernels::Reference ref = kernels::compute_reference(cs.problem);
      std::ifstream in(dir + "/case" + std::to_string(c) + ".bin.out", std::ios::binary);
      for (std::size_t i = 0; i < schedules.size(); ++i) {
        INFO(kernel << " schedule '" << codegen::to_text(schedules[i]) << "' on " << cs.name);
        const char status = static_cast<char>(in.get());
        const bool library_refuses = baseline_of(i) == codegen::kDiaBaseline
                                         ? test::dia_refuses(cs.A)
                                         : !codegen::build_storage(schedules[i], cs.problem).storage;
        CHECK((status == 'R') == library_refuses);
        if (status != 'O') {
          ++refused;
          continue;
        }
        const kernels::Values out = read_values(in, cs.problem.output_size(), dtype);
        const kernels::Values after = read_values(in, 1, dtype);
        const kernels::Verification v = kernels::verify(
            out, ref, f64 ? test::kDoubleTolerance : kernels::kDefaultTolerance);
        CHECK(v.message == "");
        CHECK(after.get(0) == 12345.0);  // nothing past the output written
        ++ran;
      }
      CHECK(in.good());
    }
    INFO(kernel << ": " << ran << " runs, " << refused << " refused");
    CHECK(ran > refused);
  }
}

}  // namespace

TEST_CASE("standalone: drop-in headers compiled without waco-hybrid equal the reference") {
  check_standalone(kernels::Dtype::F32, 50, 12);
}

TEST_CASE("standalone: drop-in headers in double precision equal the reference to 1e-12") {
  check_standalone(kernels::Dtype::F64, 6, 2);
}

TEST_CASE("standalone: a header streams its output beyond kStreamMinBytes and equals the reference") {
  // The header's own rule at run time: an output larger than kStreamMinBytes (the emitting
  // machine's last-level cache) goes through the streaming writer. s0 carries 4096 instead, as a
  // machine with that cache would write it, s1 this machine's value; compiled with the writer's
  // probe (-DWACO_STREAM_PROBE), the driver reports the lines written whole. 300 rows of 0-4
  // entries (empty rows among them), 64 columns of B: a 75 KiB output in f32, one value past a
  // line.
  const KernelKind k = KernelKind::SpMM;
  const int dense = 64;
  const codegen::SuperSchedule s = codegen::schedule_from_string(k, "split=j:64 order=i,j1,k,j0 format=UC chunk=4");
  REQUIRE(codegen::streams_output(s));
  const std::int64_t machine = codegen::stream_output_min_bytes();
  const std::string rule = "kStreamMinBytes = " + std::to_string(machine) + ";";
  std::vector<kernels::index_t> r, c;
  std::vector<float> v;
  for (kernels::index_t i = 0; i < 300; ++i)
    for (kernels::index_t e = 0; e < i % 5; ++e) {
      r.push_back(i);
      c.push_back((i * 13 + e * 31) % 257);
      v.push_back(0.5f + 0.125f * static_cast<float>(e) - 0.01f * static_cast<float>(i % 7));
    }
  const kernels::CooMatrix a = test::from_triplets(300, 257, r, c, v);
  for (const kernels::Dtype dtype : {kernels::Dtype::F32, kernels::Dtype::F64}) {
    const bool f64 = dtype == kernels::Dtype::F64;
    INFO(kernels::dtype_name(dtype));
    const std::string dir = test::scratch_dir("standalone-stream-" + std::string(kernels::dtype_name(dtype)));
    for (int i = 0; i < 2; ++i) {
      std::string header = codegen::emit_standalone_header(s, codegen::RaceStrategy::Atomic, "s" + std::to_string(i), {},
                                                           codegen::StorageOptions().max_padding, dtype, "");
      const std::size_t at = header.find(rule);
      REQUIRE(at != std::string::npos);
      if (i == 0) header.replace(at, rule.size(), "kStreamMinBytes = 4096;");
      std::ofstream(dir + "/s" + std::to_string(i) + ".hpp") << header;
    }
    std::ofstream(dir + "/driver.cpp") << driver(k, 2, std::string(kernels::dtype_ctype(dtype)), dense, true);
    const std::string compile = "c++ -O1 -fopenmp -std=c++17 -DWACO_STREAM_PROBE -Wall -Wextra -Werror -o " + dir +
                                "/driver " + dir + "/driver.cpp 2> " + dir + "/compile.log";
    INFO(compile);
    REQUIRE(std::system(compile.c_str()) == 0);
    Case cs{"300 rows", f64 ? test::with_double_values(a) : a, {}, {}, {}};
    cs.dense = kernels::make_dense_operands(k, &cs.A, nullptr, dense, 5, dtype);
    cs.problem = kernels::make_problem(k, &cs.A, nullptr, cs.dense);
    write_case(dir + "/case.bin", k, cs);
    REQUIRE(std::system((dir + "/driver " + dir + "/case.bin").c_str()) == 0);
    const kernels::Reference ref = kernels::compute_reference(cs.problem);
    const std::int64_t n = cs.problem.output_size();
    const std::int64_t bytes = n * static_cast<std::int64_t>(kernels::dtype_size(dtype));
    REQUIRE(bytes > 4096);
    std::ifstream in(dir + "/case.bin.out", std::ios::binary);
    for (int i = 0; i < 2; ++i) {
      INFO("s" << i);
      REQUIRE(in.get() == 'O');
      const kernels::Values out = read_values(in, n, dtype);
      CHECK(read_values(in, 1, dtype).get(0) == 12345.0);  // nothing past the output written
      long long lines = -1;
      in.read(reinterpret_cast<char*>(&lines), sizeof lines);
      REQUIRE(in.good());
      CHECK(kernels::verify(out, ref, f64 ? test::kDoubleTolerance : kernels::kDefaultTolerance).message == "");
      // Chunks of 4 rows (16 or more lines): at most two partial lines each.
      if (i == 0 || (machine > 0 && bytes > machine))
        CHECK(lines * 64 * 2 >= bytes);
      else
        CHECK(lines == 0);
    }
  }
}
