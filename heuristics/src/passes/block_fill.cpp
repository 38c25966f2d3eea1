// block-fill (heuristic, signature-driven): U levels under C levels store explicit zeros; a dense
// inner block (U inner levels, as BCSR) only pays when its fill ratio nnz / stored values is high
// enough that the saved index reads outweigh the extra values. Formats storing more than
// PassParams::max_block_padding values per nonzero (fill below 1 / max_block_padding) are removed.
// Stored values come from the prefix counts, which extend the signature's block statistics
// (nonempty bi x bk blocks, fill ratio) to every power-of-two block and to 3-D tensors.
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_block_fill_pass(const PassParams& params) {
  const double bound = params.max_block_padding;
  return std::make_unique<SimplePass>(
      "block-fill",
      "Keeps padded (dense-block) formats only where the block fill ratio is at least 1 / "
      "max-block-padding (default 0.5): stored values <= max-block-padding x nnz.",
      false, [bound](const Space& space, std::string& note) {
        std::vector<std::shared_ptr<const Constraint>> c;
        if (space.facts() == nullptr) {
          note = "no matrix: block fill ratios are unknown";
          return c;
        }
        c.push_back(std::make_shared<StorageConstraint>(
            [bound](const Space& s, const std::vector<int>& split, const std::vector<Loop>& levels,
                    const std::vector<LevelFormat>& formats) -> const char* {
              const double nnz = static_cast<double>(std::max<std::int64_t>(s.facts()->counts.nnz(), 1));
              return s.stored_values(split, levels, formats) > bound * nnz ? "low-block-fill"
                                                                            : nullptr;
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
