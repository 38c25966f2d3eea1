// chunk-rows (heuristic, signature-driven): OpenMP dynamic chunks should give every thread at
// least PassParams::min_chunks_per_thread chunks of the parallel loop (load balance), and be as
// large as that allows (fewer scheduling events: on small matrices a dispatch costs more than
// the imbalance it avoids), with chunk_window smaller ones for imbalanced rows. With n iterations
// of the parallel loop and t threads, c_max is the largest power of two <= max(1, n / (t *
// min_chunks_per_thread)) (at most 256); chunks in [c_max / 2^chunk_window, c_max] are kept. A
// serial kernel (threads = 1, parallelize-one) keeps c_max only: it has no dynamic loop. Static
// scheduling (chunk=static) is kept beside them on more than one thread.
#include <algorithm>

#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_chunk_rows_pass(const PassParams& params) {
  const int per_thread = std::max(1, params.min_chunks_per_thread);
  const int window = std::max(0, params.chunk_window);
  return std::make_unique<SimplePass>(
      "chunk-rows",
      "Keeps chunk sizes consistent with the iterations per thread: the largest power of two "
      "giving each thread >= min-chunks-per-thread (1) chunks, and chunk-window (2) smaller ones.",
      false, [per_thread, window](const Space&, std::string&) {
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<ExecutionConstraint>(
            [per_thread, window](const Space& s, const std::vector<int>& split, const Loop& parallel,
                                 int threads, int chunk) -> const char* {
              // Static scheduling (one contiguous range per thread) has no chunk to size; a
              // serial kernel keeps only its largest chunk (below).
              if (chunk == codegen::kStaticChunk) return threads == 1 ? "serial-chunk" : nullptr;
              const std::int64_t trips = s.trip_count(split, parallel);
              const std::int64_t target =
                  std::max<std::int64_t>(1, trips / (static_cast<std::int64_t>(threads) * per_thread));
              std::int64_t cmax = 1;
              while (cmax * 2 <= target && cmax * 2 <= codegen::kMaxChunk) cmax *= 2;
              if (chunk > cmax) return "chunk-too-large";
              // A serial kernel (threads = 1) has no dynamic loop: its chunk values would be
              // copies of one kernel. One is kept.
              if (threads == 1 && chunk != cmax) return "serial-chunk";
              if (chunk < std::max<std::int64_t>(1, cmax >> window)) return "chunk-too-small";
              return nullptr;
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
