// tile-window (heuristic, signature-driven; SC'20 Section IV via signature/model.hpp): split
// sizes far from the data-movement model's tiles are removed. The model is evaluated once per
// matrix on its locality signature; for each streaming dimension (M, N, K) its best fitting tile
// (T_i, T_j, T_k) is a center, mapped to split sizes: T_i -> s_i, T_j -> the sparse column
// variable (SpMM/SpMV k, SDDMM j), T_k -> the dense variable (SpMM j, SDDMM k). A split vector is
// kept when, for some center, every mapped variable's log2 split is within PassParams::tile_window
// of round(log2(center)). SpMV uses the SpMM model with one dense column (y = A x is SpMM with
// J = 1). MTTKRP uses the SpMM model on the signature of its (i, k) projection (B(k, :) is read per
// (i, k) fiber as SpMM reads it per nonzero), T_k -> j, and keeps l untiled
// (s_l within 2^w of its extent, unsplit included). A tile larger than the space's largest split
// (kMaxSplit) keeps that split and the unsplit loop, its nearest points.
// An unsplit variable is a tile covering its whole extent: it counts as log2 split
// ceil(log2(extent)). A model tile of 1 along a sparse dimension is that dimension streamed
// (untiled); a tile at the model's panel cap, ceil(extent / (threads x panels per thread)), means
// the capacity did not bind and the cap (load balance of J-Stream's panels, which the space gets
// from the parallel loop's chunks instead) chose it, so the untiled loop is kept beside it.
// Without this the admissible SpMV set held only split rows/columns and its best ran at
// 0.84-0.99x the speed of the hand-written csr on five of ten matrices (issue 5, session 2).
// SpMM's split vectors of register tiles are also kept (kRegisterTiles: s_j of 32 or 64 alone, or
// s_i x s_j of 2 x 32 or 4 x 16, k unsplit; s_j up to the extent, equal included): with j0
// innermost under the row's nonzeros (and i0 just outside it over a U level) the emitter keeps
// the output block in registers (codegen::register_block), a register tile, not a cache tile.
// Measured (issue 15, 2 threads, time / csr): s_j=64 alone 0.40-0.81 at J=64 on five matrices
// (bcsstk16, bcsstk13, ca-CondMat, email-Enron, web-indochina-2004), 0.62-0.93 at J=256; 2 x 32
// and 4 x 16 0.55 on bcsstk16 at J=256 where s_j=64 took 0.64; s_j=16 alone and 4 x 8 were
// slower than these everywhere. MTTKRP's s_j blocks (16, 32, 64 up to J) are kept too: at J=16
// the block ran at 1.2x csf's time before static ranges and aligned operands, 0.60x after.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>

#include "passes.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/signature/model.hpp"
#include "waco/signature/signature.hpp"

namespace waco::heuristics::detail {

namespace {

/// Panels per thread of the model run by this pass (the sparse-tile cap of its centers).
constexpr int kTileWindowPanelsPerThread = 4;
/// SpMM's register tiles (s_i, s_j) kept beside the model's tiles (4 and 8 AVX2 vectors).
struct RegisterTile {
  int rows, columns;
};
constexpr RegisterTile kRegisterTiles[] = {{1, 32}, {1, 64}, {2, 32}, {4, 16}};
/// MTTKRP's register tiles: s_j alone (i, k, l unsplit), the output row's block of j kept in
/// registers across the (k, l) fibres. Measured (2 threads, static ranges, J = 16, side by side):
/// `split=j:16 order=i,j1,k,l,j0 format=CCC` at 0.60x csf's time on a uniform 200^3 tensor
/// where the csf-like kernel took 1.07x (it loads and stores the output row per nonzero).
constexpr RegisterTile kMttkrpRegisterTiles[] = {{1, 16}, {1, 32}, {1, 64}};
/// The register tiles tile-window keeps for a kernel (none but SpMM's and MTTKRP's).
std::vector<RegisterTile> register_tiles(kernels::KernelKind kind) {
  switch (kind) {
    case kernels::KernelKind::SpMM: return {std::begin(kRegisterTiles), std::end(kRegisterTiles)};
    case kernels::KernelKind::MTTKRP:
      return {std::begin(kMttkrpRegisterTiles), std::end(kMttkrpRegisterTiles)};
    default: return {};
  }
}
static_assert(4 * 16 <= codegen::kMaxRegisterBlock && 64 <= codegen::kMaxRegisterBlock,
              "register tiles fit a register block");

struct Center {
  /// Per KernelSpec::vars, the log2 tile sizes kept (within the window); empty = not constrained.
  std::vector<std::vector<int>> log2_split;
};

int round_log2(std::int64_t v) {
  return static_cast<int>(std::lround(std::log2(static_cast<double>(std::max<std::int64_t>(v, 1)))));
}

/// The log2 tile size of a split (1 = unsplit = the whole extent).
int log2_tile(int split, std::int64_t extent) {
  return split == 1 ? signature::log2_ceil(extent) : round_log2(split);
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
        const char dense_var = detail::dense_var(kind);
        const char col_var = kind == KernelKind::SDDMM ? 'j' : 'k';
        mo.dense = dense_var ? space.extent(dense_var) : 1;
        mo.threads = space.cores();
        // The centers stay where issue 5's oracle study validated them (4 panels per thread); the
        // space balances its parallel loop with chunk-rows, not with the tile.
        mo.panels_per_thread = kTileWindowPanelsPerThread;
        mo.cache = signature::cache_capacity(p.cache_level, space.cores(), p.cache_bytes,
                                             p.cache_fraction);
        mo.dtype = p.dtype;
        const signature::TileSelection sel = signature::select_tiles(space.facts()->signature, mo);
        const int parts = mo.threads * mo.panels_per_thread;
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
          ctr.log2_split.resize(spec.vars.size());
          // The kept log2 tile sizes of variable v for a model tile T along it.
          // A tile beyond the space's largest split (codegen::kMaxSplit: a model tile of 2^18
          // columns on a 2.3M-column matrix) is kept as its two nearest points, the largest
          // split and the unsplit loop: without them no split vector was near any center and
          // the pass removed the whole space (tune failed on web-indochina x200, 19M nonzeros).
          auto tiles = [&](char v, std::int64_t T, bool sparse) -> std::vector<int> {
            const int whole = signature::log2_ceil(space.extent(v));
            const int largest = round_log2(space.split_choices(static_cast<std::size_t>(spec.var_index(v))).back());
            const std::int64_t cap =
                signature::sparse_tile_candidates(space.extent(v), parts).back();
            if (T <= 1) return {whole};
            if (round_log2(T) > largest && round_log2(T) < whole) return {largest, whole};
            if (sparse && T >= cap && round_log2(T) < whole) return {round_log2(T), whole};
            return {std::min(round_log2(T), whole)};
          };
          ctr.log2_split[static_cast<std::size_t>(spec.var_index('i'))] =
              tiles('i', best->T_i, true);
          ctr.log2_split[static_cast<std::size_t>(spec.var_index(col_var))] =
              tiles(col_var, best->T_j, true);
          if (kind == KernelKind::MTTKRP)  // l is not modeled: kept untiled (whole extent)
            ctr.log2_split[static_cast<std::size_t>(spec.var_index('l'))] = {
                signature::log2_ceil(space.extent('l'))};
          if (dense_var)
            ctr.log2_split[static_cast<std::size_t>(spec.var_index(dense_var))] =
                tiles(dense_var, best->T_k, false);
          msg << " " << signature::stream_name(stream) << "=(" << best->T_i << ", " << best->T_j;
          if (dense_var) msg << ", " << best->T_k;
          msg << ")";
          centers.push_back(std::move(ctr));
        }
        if (centers.empty()) {
          note = "the tile model found no fitting tile: nothing removed";
          return c;
        }
        // Single precision's note is the one it always was; double says its value size.
        if (p.dtype != kernels::Dtype::F32)
          msg << " for " << kernels::dtype_size(p.dtype) << "-byte values";
        note = msg.str();
        const int w = std::max(0, p.tile_window);
        // SpMM's and MTTKRP's register tiles: their split vectors (s_i and s_j up to their
        // extents, every other variable unsplit).
        std::vector<std::vector<int>> register_splits;
        for (const RegisterTile& r : register_tiles(kind)) {
          if (r.rows > space.extent('i') || r.columns > space.extent('j')) continue;
          std::vector<int> split(spec.vars.size(), 1);
          split[static_cast<std::size_t>(spec.var_index('i'))] = r.rows;
          split[static_cast<std::size_t>(spec.var_index('j'))] = r.columns;
          register_splits.push_back(split);
          note += (register_splits.size() == 1 ? "; register tiles s_i x s_j: " : ", ") +
                  std::to_string(r.rows) + "x" + std::to_string(r.columns);
        }
        c.push_back(std::make_shared<SplitConstraint>(
            [centers, w, register_splits](const Space& sp,
                                          const std::vector<int>& split) -> const char* {
              const std::vector<char>& vars = sp.spec().vars;
              if (std::find(register_splits.begin(), register_splits.end(), split) !=
                  register_splits.end())
                return nullptr;
              for (const Center& ctr : centers) {
                bool near = true;
                for (std::size_t v = 0; v < split.size() && near; ++v) {
                  if (ctr.log2_split[v].empty()) continue;

                  // A split as large as the extent is the unsplit tile with a one-trip outer
                  // loop: the unsplit loop stands for it.
                  if (split[v] > 1 && split[v] >= sp.extent(vars[v])) {
                    near = false;
                    break;
                  }
                  const int l = log2_tile(split[v], sp.extent(vars[v]));
                  near = std::any_of(ctr.log2_split[v].begin(), ctr.log2_split[v].end(),
                                     [&](int c) { return std::abs(l - c) <= w; });
                }
                if (near) return nullptr;
              }
              return "far-from-model-tile";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
