// Constraints on the factored space (space.hpp): what a constraint would remove, per reason
// (tally: its verdicts computed once per cached stage result), and adding it (add_constraint,
// constrain: the cached results of its stage filtered with it, from the tally's verdicts when
// there are some).
#include "waco/heuristics/space.hpp"

#include <algorithm>
#include <array>

#include "space_detail.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

using space_detail::add;
using space_detail::format_levels;
using space_detail::kMaxLoops;
using space_detail::loop_code;
using space_detail::mul;
using space_detail::popcount;

struct Space::StorageMemo {
  /// Per format slot (sparse index x max_lambdas + lambda): -1 or an index into `rejected`.
  std::vector<std::int32_t> slot;
  /// Per memoized slot: the probe's reasons with the mask of the formats it rejects for each.
  std::vector<std::vector<std::pair<const char*, std::uint64_t>>> rejected;
};

namespace {

/// Candidates per removal reason (a few distinct static strings: linear search on the pointer).
class ReasonHist {
 public:
  void put(const char* reason, std::uint64_t n) {
    if (n == 0) return;
    for (auto& [r, c] : hist_)
      if (r == reason) {
        c = add(c, n);
        return;
      }
    hist_.emplace_back(reason, n);
  }
  std::map<std::string, std::uint64_t> to_map() const {
    std::map<std::string, std::uint64_t> m;
    for (const auto& [r, c] : hist_) {
      std::uint64_t& slot = m[r == nullptr ? std::string() : std::string(r)];
      slot = add(slot, c);
    }
    return m;
  }

 private:
  std::vector<std::pair<const char*, std::uint64_t>> hist_;
};

}  // namespace

std::map<std::string, std::uint64_t> Space::tally(const Constraint& probe) const {
  return tally_impl(probe, nullptr);
}

std::map<std::string, std::uint64_t> Space::tally_impl(const Constraint& probe,
                                                       StorageMemo* memo) const {
  ReasonHist hist;
  const Stage st = probe.stage();
  // The probe's verdicts per stage result, computed once (nest: per (pattern, lambda, q) reason
  // counts; execution: per (loop code, choice) reason counts; storage: rejected format masks).
  StorageMemo local;
  StorageMemo& sm = memo ? *memo : local;
  if (st == Stage::Storage) {
    sm.slot.assign(formats_.size(), -1);
    sm.rejected.clear();
  }
  std::map<unsigned, std::vector<std::vector<std::pair<const char*, std::uint64_t>>>> nest_memo;
  std::vector<std::vector<std::pair<const char*, std::uint64_t>>> exec_memo;
  std::vector<std::uint8_t> exec_memo_known;
  if (st == Stage::Execution) {
    exec_memo.assign(exec_.size(), {});
    exec_memo_known.assign(exec_.size(), 0);
  }
  const auto put_counted = [](std::vector<std::pair<const char*, std::uint64_t>>& v,
                              const char* r) {
    for (auto& [k, n] : v)
      if (k == r) {
        ++n;
        return;
      }
    v.emplace_back(r, 1);
  };

  Cursor c;
  std::array<std::uint64_t, kMaxLoops> e{};
  for (std::size_t flat = 0; flat < split_total_; ++flat) {
    if (!split_alive_[flat]) continue;
    decode(flat, c);
    if (st == Stage::Split) {
      hist.put(probe.check_split(*this, c.split), split_count(c));
      continue;
    }
    const Pattern& pat = pattern(c.mask);
    const std::size_t nq = pat.loops.size();
    for (std::size_t q = 0; q < nq; ++q) e[q] = exec_of(c, pat.loops[q]).size();
    std::vector<std::vector<std::pair<const char*, std::uint64_t>>>* per_mask = nullptr;
    if (st == Stage::Nest) {
      per_mask = &nest_memo[c.mask];
      if (per_mask->empty()) per_mask->resize(pat.groups.size() * nq);
    }
    for (std::size_t li = 0; li < pat.groups.size(); ++li) {
      const std::uint64_t bits = formats_of(c, li);
      if (bits == 0) continue;
      const std::uint64_t F = popcount(bits);
      if (st == Stage::Storage) {
        std::uint64_t inner = 0;
        for (std::size_t q = 0; q < nq; ++q)
          inner = add(inner, mul(pat.groups[li][q].size(), e[q]));
        if (inner == 0) continue;
        const std::size_t slot = c.sparse * max_lambdas_ + li;
        if (sm.slot[slot] < 0) {
          const std::vector<Loop>& levels = lambdas_[c.mask & sparse_bits_][li];
          std::vector<int> split = c.split;
          for (std::size_t v = 0; v < split.size(); ++v)
            if (sparse_stride_[v] == 0) split[v] = 1;
          std::vector<std::pair<const char*, std::uint64_t>> rej;
          std::vector<LevelFormat> f(levels.size());
          for (std::uint64_t rest = bits; rest != 0; rest &= rest - 1) {
            const std::uint64_t m = static_cast<std::uint64_t>(__builtin_ctzll(rest));
            for (std::size_t l = 0; l < levels.size(); ++l)
              f[l] = (m >> l) & 1u ? LevelFormat::C : LevelFormat::U;
            const char* r = probe.check_storage(*this, split, levels, f);
            if (r == nullptr) continue;
            bool found = false;
            for (auto& [k, mk] : rej)
              if (k == r) {
                mk |= std::uint64_t{1} << m;
                found = true;
              }
            if (!found) rej.emplace_back(r, std::uint64_t{1} << m);
          }
          sm.slot[slot] = static_cast<std::int32_t>(sm.rejected.size());
          sm.rejected.push_back(std::move(rej));
        }
        std::uint64_t removed = 0;
        for (const auto& [r, mk] : sm.rejected[static_cast<std::size_t>(sm.slot[slot])]) {
          hist.put(r, mul(popcount(mk), inner));
          removed |= mk;
        }
        hist.put(nullptr, mul(F - popcount(removed), inner));
        continue;
      }
      for (std::size_t q = 0; q < nq; ++q) {
        const std::vector<int>& group = pat.groups[li][q];
        if (group.empty() || e[q] == 0) continue;
        if (st == Stage::Nest) {
          auto& h = (*per_mask)[li * nq + q];
          if (h.empty()) {
            for (int o : group)
              put_counted(h, probe.check_nest(*this, pat.orders[static_cast<std::size_t>(o)],
                                              pat.loops[q]));
          }
          const std::uint64_t w = mul(F, e[q]);
          for (const auto& [r, n] : h) hist.put(r, mul(w, n));
        } else {
          const Loop& par = pat.loops[q];
          const std::size_t v = static_cast<std::size_t>(spec_->var_index(par.var));
          const std::size_t key =
              static_cast<std::size_t>(loop_code(*spec_, par)) * max_choices_ + c.choice[v];
          if (!exec_memo_known[key]) {
            std::vector<int> split(split_choices_.size(), 1);
            split[v] = c.split[v];
            for (const auto& [t, ch] : exec_of(c, par))
              put_counted(exec_memo[key], probe.check_execution(*this, split, par, t, ch));
            exec_memo_known[key] = 1;
          }
          const std::uint64_t w = mul(F, group.size());
          for (const auto& [r, n] : exec_memo[key]) hist.put(r, mul(w, n));
        }
      }
    }
  }
  return hist.to_map();
}

void Space::filter_caches(const Constraint& con, const StorageMemo* memo) {
  Cursor c;
  switch (con.stage()) {
    case Stage::Split:
      for (std::size_t flat = 0; flat < split_total_; ++flat) {
        if (!split_alive_[flat]) continue;
        decode(flat, c);
        if (con.check_split(*this, c.split) != nullptr) split_alive_[flat] = 0;
      }
      break;
    case Stage::Storage:
      for (std::size_t slot = 0; slot < formats_.size(); ++slot) {
        if (!formats_known_[slot] || formats_[slot] == 0) continue;
        if (memo && memo->slot[slot] >= 0) {
          for (const auto& [r, mk] : memo->rejected[static_cast<std::size_t>(memo->slot[slot])])
            formats_[slot] &= ~mk;
          continue;
        }
        // Not seen by the tally: the split sizes of this slot's sparse index (dense ones 1).
        const std::size_t sparse = slot / max_lambdas_, li = slot % max_lambdas_;
        std::vector<int> split(split_choices_.size(), 1);
        unsigned mask = 0;
        for (std::size_t v = 0; v < split.size(); ++v) {
          if (sparse_stride_[v] == 0) continue;
          const std::size_t ch = (sparse / sparse_stride_[v]) % split_choices_[v].size();
          split[v] = split_choices_[v][ch];
          if (ch > 0) mask |= 1u << v;
        }
        const std::vector<Loop>& levels = lambdas_[mask][li];
        for (std::uint64_t rest = formats_[slot]; rest != 0; rest &= rest - 1) {
          const std::uint64_t m = static_cast<std::uint64_t>(__builtin_ctzll(rest));
          if (con.check_storage(*this, split, levels, format_levels(m, levels.size())) != nullptr)
            formats_[slot] &= ~(std::uint64_t{1} << m);
        }
      }
      break;
    case Stage::Nest:
      for (auto& [mask, shared] : patterns_) {
        auto pat = std::make_shared<Pattern>(*shared);  // copies of this Space share the old one
        for (auto& per_lambda : pat->groups)
          for (std::size_t q = 0; q < per_lambda.size(); ++q) {
            std::vector<int>& group = per_lambda[q];
            group.erase(std::remove_if(group.begin(), group.end(),
                                       [&](int o) {
                                         return con.check_nest(
                                                    *this, pat->orders[static_cast<std::size_t>(o)],
                                                    pat->loops[q]) != nullptr;
                                       }),
                        group.end());
          }
        shared = std::move(pat);
      }
      break;
    case Stage::Execution:
      for (std::size_t key = 0; key < exec_.size(); ++key) {
        if (!exec_known_[key] || exec_[key].empty()) continue;
        const std::size_t code = key / max_choices_, ch = key % max_choices_;
        const std::size_t v = code / 3;
        const Loop par{spec_->vars[v], static_cast<Loop::Part>(code % 3)};
        std::vector<int> split(split_choices_.size(), 1);
        split[v] = split_choices_[v][ch];
        auto& list = exec_[key];
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [&](const std::pair<int, int>& tc) {
                                    return con.check_execution(*this, split, par, tc.first,
                                                               tc.second) != nullptr;
                                  }),
                   list.end());
      }
      break;
  }
}

void Space::add_constraint(std::shared_ptr<const Constraint> c) {
  WACO_ASSERT(c != nullptr, "null constraint");
  constraints_.push_back(c);  // first: stage results computed while filtering include it
  filter_caches(*c, nullptr);
  count_.reset();
  index_splits_.clear();
  index_cum_.clear();
}

std::map<std::string, std::uint64_t> Space::constrain(std::shared_ptr<const Constraint> c) {
  WACO_ASSERT(c != nullptr, "null constraint");
  StorageMemo memo;
  auto hist = tally_impl(*c, &memo);
  constraints_.push_back(c);
  filter_caches(*c, c->stage() == Stage::Storage ? &memo : nullptr);
  count_.reset();
  index_splits_.clear();
  index_cum_.clear();
  return hist;
}

}  // namespace waco::heuristics
