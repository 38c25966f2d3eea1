// The index order of the factored space (space.hpp): sigma, lambda, the parallel loop, the
// order, the format, the (threads, chunk) pair. at() decodes an index (through an index of the
// nonempty split vectors), for_each() visits every candidate in that order, sample() draws
// uniform indices (SplitMix64 with rejection, the same on every platform), materialize() lists
// them all.
#include "waco/heuristics/space.hpp"

#include <algorithm>
#include <set>

#include "space_detail.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {
using kernels::Error;
using space_detail::add;
using space_detail::format_levels;
using space_detail::mul;
using space_detail::popcount;

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Uniform in [0, n), n >= 1, by rejection (no modulo bias; the same on every platform).
std::uint64_t uniform_below(std::uint64_t& state, std::uint64_t n) {
  const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  for (;;) {
    const std::uint64_t x = splitmix64(state);
    if (x < limit) return x % n;
  }
}

}  // namespace

void Space::build_index() const {
  if (!index_cum_.empty()) return;
  index_cum_.push_back(0);
  Cursor c;
  for (std::size_t flat = 0; flat < split_total_; ++flat) {
    if (!split_alive_[flat]) continue;
    decode(flat, c);
    const std::uint64_t n = split_count(c);
    if (n == 0) continue;
    index_splits_.push_back(flat);
    index_cum_.push_back(add(index_cum_.back(), n));
  }
}

SuperSchedule Space::at(std::uint64_t index) const {
  build_index();
  const std::uint64_t total = index_cum_.back();
  if (index >= total)
    throw Error("schedule index " + std::to_string(index) + " out of range",
                "the space has " + std::to_string(total) + " candidates");
  const std::size_t si = static_cast<std::size_t>(
      std::upper_bound(index_cum_.begin(), index_cum_.end(), index) - index_cum_.begin() - 1);
  Cursor c;
  decode(index_splits_[si], c);
  std::uint64_t rem = index - index_cum_[si];
  const Pattern& pat = pattern(c.mask);
  for (std::size_t li = 0; li < pat.groups.size(); ++li) {
    const std::uint64_t bits = formats_of(c, li);
    if (bits == 0) continue;
    const std::uint64_t F = popcount(bits);
    for (std::size_t q = 0; q < pat.loops.size(); ++q) {
      const auto& group = pat.groups[li][q];
      const auto& exec = exec_of(c, pat.loops[q]);
      const std::uint64_t fe = mul(F, exec.size());
      const std::uint64_t block = mul(group.size(), fe);
      if (rem >= block) {
        rem -= block;
        continue;
      }
      const std::vector<Loop>& order = pat.orders[static_cast<std::size_t>(group[rem / fe])];
      const std::uint64_t r2 = rem % fe;
      std::uint64_t rest = bits;  // the (r2 / |exec|)-th set bit is the format
      for (std::uint64_t skip = r2 / exec.size(); skip > 0; --skip) rest &= rest - 1;
      const std::uint64_t fm = static_cast<std::uint64_t>(__builtin_ctzll(rest));
      const auto [threads, chunk] = exec[r2 % exec.size()];
      SuperSchedule s;
      s.kind = kind_;
      s.split = c.split;
      s.order = order;
      s.formats = format_levels(fm, lambdas_[c.mask & sparse_bits_][li].size());
      s.parallel = pat.loops[q];
      s.threads = threads;
      s.chunk = chunk;
      return s;
    }
  }
  WACO_ASSERT(false, "index decoding ran past its split vector's candidates");
  return {};
}

void Space::for_each(const std::function<bool(const SuperSchedule&)>& visit) const {
  build_index();
  Cursor c;
  for (const std::size_t flat : index_splits_) {
    decode(flat, c);
    const Pattern& pat = pattern(c.mask);
    for (std::size_t li = 0; li < pat.groups.size(); ++li) {
      const std::uint64_t bits = formats_of(c, li);
      if (bits == 0) continue;
      for (std::size_t q = 0; q < pat.loops.size(); ++q) {
        const auto& exec = exec_of(c, pat.loops[q]);
        for (int o : pat.groups[li][q])
          for (std::uint64_t rest = bits; rest != 0; rest &= rest - 1) {
            const std::uint64_t fm = static_cast<std::uint64_t>(__builtin_ctzll(rest));
            for (const auto& [threads, chunk] : exec) {
              SuperSchedule s;
              s.kind = kind_;
              s.split = c.split;
              s.order = pat.orders[static_cast<std::size_t>(o)];
              s.formats = format_levels(fm, lambdas_[c.mask & sparse_bits_][li].size());
              s.parallel = pat.loops[q];
              s.threads = threads;
              s.chunk = chunk;
              if (!visit(s)) return;
            }
          }
      }
    }
  }
}

std::vector<SuperSchedule> Space::sample(std::uint64_t n, std::uint64_t seed) const {
  const std::uint64_t total = count();
  std::vector<SuperSchedule> out;
  if (n >= total) {
    for_each([&](const SuperSchedule& s) {
      out.push_back(s);
      return true;
    });
    return out;
  }
  std::uint64_t state = seed;
  std::set<std::uint64_t> seen;
  while (out.size() < n) {
    const std::uint64_t i = uniform_below(state, total);
    if (seen.insert(i).second) out.push_back(at(i));
  }
  return out;
}

std::vector<SuperSchedule> Space::materialize(std::uint64_t limit) const {
  const std::uint64_t total = count();
  if (total > limit)
    throw Error("the space has " + std::to_string(total) + " candidates, more than the limit " +
                    std::to_string(limit),
                "apply trimming passes first, or sample");
  std::vector<SuperSchedule> out;
  out.reserve(static_cast<std::size_t>(total));
  for_each([&](const SuperSchedule& s) {
    out.push_back(s);
    return true;
  });
  return out;
}

}  // namespace waco::heuristics
