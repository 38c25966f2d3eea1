// Unit "data_matrices" (label data): every matrix and tensor of the shared development data is
// read and checked against MANIFEST.tsv, and every baseline is verified on it against the
// reference. Skips cleanly (with a warning) when ../shared/data is absent.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/reference.hpp"

using namespace waco::kernels;

namespace {

struct Entry {
  std::string type, name, file, dims, order_or_cols, symmetry;
  std::int64_t nnz = 0, stored = 0;
};

std::vector<Entry> manifest(const std::string& dir) {
  std::ifstream in(dir + "/MANIFEST.tsv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::istringstream h(line);
    std::string f;
    while (std::getline(h, f, '\t')) header.push_back(f);
  }
  std::vector<Entry> out;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::map<std::string, std::string> row;
    std::string f;
    for (std::size_t i = 0; std::getline(s, f, '\t') && i < header.size(); ++i) row[header[i]] = f;
    Entry e{row["type"], row["name"], row["file"], row["rows_or_dims"], row["cols_or_order"],
            row["mm_symmetry"]};
    e.nnz = std::stoll(row["nnz"]);
    e.stored = std::stoll(row["entries_stored"]);
    out.push_back(e);
  }
  return out;
}

void verify_impl(const ImplementationInfo& info, const Problem& p, const Reference& ref,
                 const std::string& what) {
  INFO(info.name << " " << kernel_name(p.kind) << " on " << what);
  auto impl = info.make();
  impl->prepare(p, 2);
  impl->run();
  const Verification v =
      verify(impl->output(), ref);
  INFO(v.message);
  CHECK(v.ok);
}

}  // namespace

TEST_CASE("data_matrices: every matrix reads as the manifest says and every baseline is right") {
  const auto dir = waco::test::shared_data_dir();
  if (!dir) {
    WARN("shared data folder absent: skipped");
    return;
  }
  const auto entries = manifest(*dir);
  REQUIRE(entries.size() > 0);
  for (const Entry& e : entries) {
    if (e.type != "matrix") continue;
    DYNAMIC_SECTION(e.name) {
      const LoadedMatrix m = read_matrix_market(*dir + "/" + e.file);
      CHECK(std::to_string(m.matrix.rows) == e.dims);
      CHECK(std::to_string(m.matrix.cols) == e.order_or_cols);
      CHECK(m.matrix.nnz() == e.nnz);
      CHECK(m.source.stored_entries == e.stored);
      CHECK(std::string(symmetry_name(m.source.symmetry)) == e.symmetry);
      for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM}) {
        const DenseOperands ops = make_dense_operands(k, &m.matrix, nullptr, 8, 1);
        const Problem p = make_problem(k, &m.matrix, nullptr, ops);
        const Reference ref = compute_reference(p);
        for (const ImplementationInfo& info : implementations()) {
          if (!info.supports(k)) continue;
          // librsb's autotuner takes seconds per matrix: keep it to the smaller ones here.
          if (info.name == "rsb-tuned" && m.matrix.nnz() > 300000) continue;
          if (info.name == "dia" && waco::test::dia_refuses(m.matrix)) {  // too many diagonals
            CHECK_THROWS_WITH(info.make()->prepare(p, 2), Catch::Contains("diagonals"));
            continue;
          }
          verify_impl(info, p, ref, e.name);
        }
      }
    }
  }
}

TEST_CASE("data_matrices: every tensor reads as the manifest says and csf mttkrp is right") {
  const auto dir = waco::test::shared_data_dir();
  if (!dir) {
    WARN("shared data folder absent: skipped");
    return;
  }
  for (const Entry& e : manifest(*dir)) {
    if (e.type != "tensor") continue;
    DYNAMIC_SECTION(e.name) {
      const LoadedTensor t = read_frostt(*dir + "/" + e.file);
      CHECK(t.tensor.order() == std::stoi(e.order_or_cols));
      std::string dims;
      for (index_t d : t.tensor.dims) dims += (dims.empty() ? "" : "x") + std::to_string(d);
      CHECK(dims == e.dims);
      CHECK(t.tensor.nnz() == e.nnz);
      const DenseOperands ops = make_dense_operands(KernelKind::MTTKRP, nullptr, &t.tensor, 16, 1);
      const Problem p = make_problem(KernelKind::MTTKRP, nullptr, &t.tensor, ops);
      const Reference ref = compute_reference(p);
      for (const ImplementationInfo& info : implementations())
        if (info.supports(KernelKind::MTTKRP)) verify_impl(info, p, ref, e.name);
    }
  }
}
