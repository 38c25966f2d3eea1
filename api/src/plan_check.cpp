// A measured plan's gain checked in this process, where the caller runs it (Options::
// check_in_process; plan_internal.hpp): the chosen kernel and the csr / csf baseline
// alternating in blocks of calls (tuning::check_in_process) on operands made here.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan_internal.hpp"
#include "waco/heuristics/economy.hpp"
#include "waco/kernels/values.hpp"
#include "waco/tune/in_process.hpp"

namespace waco::detail {

/// A measured plan's gain checked in this process, where the caller runs it (tuning::
/// check_in_process: the chosen kernel and the csr / csf baseline alternating in blocks of
/// calls on operands made here). When it holds, speedup() and the break-even are this
/// process's figures; when it does not, the baseline serves and the verdict (the report's too)
/// is "no-gain". The report keeps the tune's own figures and gains "in_process".
void check_here(Plan::Impl& impl, const Matrix& A, Kernel k, const Options& o) {
  if (!o.check_in_process || impl.verdict != "gain") return;
  const std::string reference = reference_of(k);
  if (impl.arm->bound.baseline == reference) return;  // nothing to compare with
  const std::shared_ptr<Plan::Impl> base = bind_reference(A, k, o);
  const std::int64_t n = k == Kernel::SpMV ? 1 : impl.dense;
  const std::int64_t rows = impl.dims[0], cols = impl.dims.size() > 1 ? impl.dims[1] : 1;
  std::int64_t in0 = cols * n, in1 = 0, out = rows * n;
  if (k == Kernel::SDDMM) {
    in0 = rows * n;
    in1 = cols * n;
    out = impl.nnz;
  } else if (k == Kernel::MTTKRP) {
    in1 = impl.dims[2] * n;
  }
  // Up to 4 placements of the operands (separate allocations, each at another offset in its
  // page), as many as fit in 256 MiB: where they lie can change the kernels' speed.
  const double bytes = static_cast<double>(in0 + in1 + out) * kernels::dtype_size(impl.dtype);
  tuning::InProcessOptions io;
  io.placements = static_cast<int>(std::clamp(std::floor(256.0 * (1 << 20) / std::max(bytes, 1.0)), 1.0, 4.0));
  tuning::InProcessCheck c;
  kernels::with_value_type(impl.dtype, [&](auto v) {
    using V = decltype(v);
    struct Operands {
      std::vector<V> a, b, y;
      std::size_t pad = 0;
    };
    std::vector<Operands> at(static_cast<std::size_t>(io.placements));
    const auto sized = [](std::int64_t n, std::size_t pad) {
      return static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) + pad;
    };
    for (std::size_t p = 0; p < at.size(); ++p) {
      Operands& d = at[p];
      d.pad = p * (1040 / sizeof(V));  // 0, 1040, 2080, 3120 bytes: other offsets in a page
      d.a.resize(sized(in0, d.pad));
      d.b.resize(sized(in1, d.pad));
      d.y.resize(sized(out, d.pad));
      for (std::size_t i = 0; i < d.a.size(); ++i) d.a[i] = static_cast<V>(0.5 + 0.125 * (i % 7));
      for (std::size_t i = 0; i < d.b.size(); ++i) d.b[i] = static_cast<V>(0.25 + 0.125 * (i % 5));
    }
    const auto on = [&](const tuning::Arm& arm) {
      return [&at, &arm, n](int p) {
        Operands& d = at[static_cast<std::size_t>(p)];
        arm.run(d.a.data() + d.pad, d.b.data() + d.pad, d.y.data() + d.pad, n);
      };
    };
    c = tuning::check_in_process(on(*impl.arm), on(*base->arm), io);
  });
  nlohmann::json j = c.to_json();
  j["claimed_speedup"] = impl.speedup;
  if (c.held) {
    impl.speedup = c.speedup();
    // The tune's cost, this check's included, over what a call saves here.
    const nlohmann::json total = impl.report.contains("economy")
                                     ? impl.report["economy"].value("total_s", nlohmann::json())
                                     : nlohmann::json();
    if (impl.break_even >= 0 && total.is_number()) {
      const std::optional<double> be = heuristics::break_even_calls(
          total.get<double>() + c.seconds, c.csr_call_s, c.csr_call_s / impl.speedup);
      impl.break_even = be ? *be : -1.0;
    }
  } else {
    j["note"] = "the gain the measuring processes judged did not hold in this process: the " +
                reference + " baseline serves";
    j["tune_verdict"] = impl.verdict;
    impl.report["verdict"] = "no-gain";
    impl.arm = base->arm;
    impl.verdict = "no-gain";
    impl.speedup = 1.0;
    impl.break_even = -1.0;
  }
  impl.report["in_process"] = std::move(j);
}

}  // namespace waco::detail
