// narrow-indices (heuristic, working-set driven; issue 36): N levels (16-bit coordinates,
// codegen::LevelFormat::N) save 2 bytes a stored position, which pays where a kernel streams its
// sparse operand from memory on every call, and only there. The space enumerates U and C levels
// only, so this pass removes nothing from its count; what it decides is whether narrow twins of
// the nominees (narrow.hpp: tune measures each beside its nominee) are admitted: a storage
// constraint refuses every format with an N level ("narrow-within-llc") unless the operand's
// stream in CSR (a 32-bit coordinate and a value a nonzero, a position a row) exceeds the
// last-level cache (kernels::last_level_cache_bytes, with the plausibility cap: shared_data's
// reading). Measured (SpMV, 2 threads, side by side, 22M-nonzero banded matrix on a 32 MiB L3):
// the blocked narrow twin of csr ran at 0.62x the csr schedule's time and 0.88-0.91x librsb's
// tuner's; cache-resident operands have nothing to gain from fewer bytes.
#include <cstdio>

#include "passes.hpp"
#include "waco/heuristics/narrow.hpp"
#include "waco/kernels/context.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_narrow_indices_pass(const PassParams& params) {
  const kernels::Dtype dtype = params.dtype;
  return std::make_unique<SimplePass>(
      "narrow-indices",
      "Admits narrow (N: 16-bit coordinates) twins of the nominees only when the operand's CSR "
      "stream exceeds the last-level cache; the enumerated space (U/C levels) is unchanged.",
      false, [dtype](const Space& space, std::string& note) {
        std::vector<std::shared_ptr<const Constraint>> c;
        const auto refuse = [](const Space&, const std::vector<int>&, const std::vector<Loop>&,
                               const std::vector<LevelFormat>& formats) -> const char* {
          for (LevelFormat f : formats)
            if (f == LevelFormat::N) return "narrow-within-llc";
          return nullptr;
        };
        if (space.facts() == nullptr) {
          note = "no matrix: narrow levels are refused";
          c.push_back(std::make_shared<StorageConstraint>(refuse));
          return c;
        }
        const std::int64_t nnz = space.facts()->counts.nnz();
        const std::int64_t rows = space.extent(space.spec().sparse_vars.front());
        const std::int64_t llc = kernels::last_level_cache_bytes();
        const bool beyond = operand_beyond_llc(nnz, rows, dtype, llc);
        char buf[200];
        std::snprintf(buf, sizeof buf, "the operand streams %.1f MiB a call, %s the last-level cache (%.1f MiB)%s",
                      operand_stream_bytes(nnz, rows, dtype) / 1048576.0,
                      beyond ? "beyond" : "within", static_cast<double>(llc) / 1048576.0,
                      beyond ? ": narrow twins admitted" : ": narrow levels refused");
        note = llc > 0 ? buf : "no last-level cache size known: narrow levels are refused";
        if (!beyond) c.push_back(std::make_shared<StorageConstraint>(refuse));
        return c;
      });
}

}  // namespace waco::heuristics::detail
