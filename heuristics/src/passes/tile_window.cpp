// tile-window (heuristic, signature-driven; SC'20 Section IV via signature/model.hpp): split
// sizes far from the data-movement model's tiles are removed. The model is evaluated once per
// matrix on its locality signature; for each streaming dimension (M, N, K) its best fitting tile
// (T_i, T_j, T_k) is a center, mapped to split sizes: T_i -> s_i, T_j -> the sparse column
// variable (SpMM/SpMV k, SDDMM j), T_k -> the dense variable (SpMM j, SDDMM k). A split vector is
// kept when, for some center, every mapped variable's log2 split is within PassParams::tile_window
// of round(log2(center)). SpMV uses the SpMM model with one dense column (y = A x is SpMM with
// J = 1). MTTKRP uses the SpMM model on the signature of its (i, k) projection (B(k, :) is read per
// (i, k) fiber as SpMM reads it per nonzero), T_k -> j, and keeps s_l within 2^w of 1.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "passes.hpp"
#include "waco/signature/model.hpp"

namespace waco::heuristics::detail {

namespace {

struct Center {
  std::vector<int> log2_split;  ///< per KernelSpec::vars; -1 = variable not constrained
};

int round_log2(std::int64_t v) {
  return static_cast<int>(std::lround(std::log2(static_cast<double>(std::max<std::int64_t>(v, 1)))));
}

}  // namespace

std::unique_ptr<Pass> make_tile_window_pass(const PassParams& params) {
  const PassParams p = params;
  return std::make_unique<SimplePass>(
      "tile-window",
      "Keeps split sizes within 2^tile-window of a tile chosen by the signature's data-movement "
      "model (best fitting tile of each streaming dimension); SpMM, SDDMM, SpMV (as SpMM, J=1), MTTKRP (its (i,k) projection).",
      false, [p](const Space& space, std::string& note) {
        std::vector<std::shared_ptr<const Constraint>> c;
        using kernels::KernelKind;
        const KernelKind kind = space.kind();
        if (space.facts() == nullptr || !space.facts()->has_signature) {
          note = "no matrix: no locality signature for the tile model";
          return c;
        }
        signature::ModelOptions mo;
        mo.kind = kind == KernelKind::SDDMM ? KernelKind::SDDMM : KernelKind::SpMM;
        const char dense_var = kind == KernelKind::SDDMM ? 'k' : kind == KernelKind::SpMV ? 0 : 'j';
        const char col_var = kind == KernelKind::SDDMM ? 'j' : 'k';
        mo.dense = dense_var ? space.extent(dense_var) : 1;
        mo.threads = space.cores();
        mo.cache = signature::cache_capacity(p.cache_level, space.cores(), p.cache_bytes);
        const signature::TileSelection sel = signature::select_tiles(space.facts()->signature, mo);
        const codegen::KernelSpec& spec = space.spec();
        std::vector<Center> centers;
        std::ostringstream msg;
        msg << "model centers (s_i, s_" << col_var << (dense_var ? std::string(", s_") + dense_var : "")
            << "):";
        for (auto stream : {signature::StreamDim::M, signature::StreamDim::N,
                            signature::StreamDim::K}) {
          const signature::TileCandidate* best = nullptr;
          for (const auto& cand : sel.candidates)
            if (cand.stream == stream && cand.fits && (!best || cand.volume < best->volume))
              best = &cand;
          if (best == nullptr) continue;
          Center ctr;
          ctr.log2_split.assign(spec.vars.size(), -1);
          ctr.log2_split[static_cast<std::size_t>(spec.var_index('i'))] = round_log2(best->T_i);
          ctr.log2_split[static_cast<std::size_t>(spec.var_index(col_var))] = round_log2(best->T_j);
          if (kind == KernelKind::MTTKRP)  // l is not modeled: kept unsplit-near (s_l <= 2^w)
            ctr.log2_split[static_cast<std::size_t>(spec.var_index('l'))] = 0;
          if (dense_var)
            ctr.log2_split[static_cast<std::size_t>(spec.var_index(dense_var))] =
                round_log2(std::min<std::int64_t>(best->T_k, space.extent(dense_var)));
          msg << " " << signature::stream_name(stream) << "=(" << best->T_i << ", " << best->T_j;
          if (dense_var) msg << ", " << best->T_k;
          msg << ")";
          centers.push_back(std::move(ctr));
        }
        if (centers.empty()) {
          note = "the tile model found no fitting tile: nothing removed";
          return c;
        }
        note = msg.str();
        const int w = std::max(0, p.tile_window);
        c.push_back(std::make_shared<SplitConstraint>(
            [centers, w](const Space&, const std::vector<int>& split) -> const char* {
              for (const Center& ctr : centers) {
                bool near = true;
                for (std::size_t v = 0; v < split.size() && near; ++v) {
                  if (ctr.log2_split[v] < 0) continue;
                  const int l = round_log2(split[v]);
                  near = std::abs(l - ctr.log2_split[v]) <= w;
                }
                if (near) return nullptr;
              }
              return "far-from-model-tile";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
