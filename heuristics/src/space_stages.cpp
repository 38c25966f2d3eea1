// The stage results of the factored space (space.hpp), each cached per what its stage sees: the
// split vectors decoded from their flat index, per split pattern its loops and legal orders
// grouped by level sequence and parallel loop, the kept formats per (sparse split sizes, level
// sequence), the (threads, chunk) lists per (parallel loop, its split size); and count(), the sum
// of products over them.
#include "waco/heuristics/space.hpp"

#include <algorithm>
#include <array>
#include <numeric>

#include "space_detail.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

using space_detail::add;
using space_detail::kMaxLoops;
using space_detail::legal_orders;
using space_detail::loop_code;
using space_detail::mul;
using space_detail::pattern_loops;
using space_detail::popcount;

namespace space_detail {

/// The loops of a split pattern, in KernelSpec::vars order (x1 before x0).
std::vector<Loop> pattern_loops(const std::vector<char>& vars, unsigned mask) {
  std::vector<Loop> loops;
  for (std::size_t v = 0; v < vars.size(); ++v) {
    if (mask & (1u << v)) {
      loops.push_back({vars[v], Loop::Part::Outer});
      loops.push_back({vars[v], Loop::Part::Inner});
    } else {
      loops.push_back({vars[v], Loop::Part::Whole});
    }
  }
  return loops;
}

/// Every permutation of `loops` with x1 before x0 (lexicographic in the positions of `loops`).
std::vector<std::vector<Loop>> legal_orders(const std::vector<Loop>& loops) {
  std::vector<int> perm(loops.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<std::vector<Loop>> out;
  do {
    bool ok = true;
    for (std::size_t a = 0; a < perm.size() && ok; ++a)
      for (std::size_t b = a + 1; b < perm.size() && ok; ++b) {
        const Loop& la = loops[perm[a]];
        const Loop& lb = loops[perm[b]];
        if (la.var == lb.var && la.part == Loop::Part::Inner) ok = false;
      }
    if (!ok) continue;
    std::vector<Loop> o;
    for (int i : perm) o.push_back(loops[i]);
    out.push_back(std::move(o));
  } while (std::next_permutation(perm.begin(), perm.end()));
  return out;
}

}  // namespace space_detail

void Space::decode(std::size_t flat, Cursor& c) const {
  const std::size_t nv = split_choices_.size();
  c.flat = flat;
  c.sparse = 0;
  c.mask = 0;
  c.split.resize(nv);
  c.choice.resize(nv);
  for (std::size_t v = 0; v < nv; ++v) {
    const std::size_t ch = (flat / split_stride_[v]) % split_choices_[v].size();
    c.choice[v] = ch;
    c.split[v] = split_choices_[v][ch];
    if (ch > 0) c.mask |= 1u << v;  // choice 0 is split size 1
    c.sparse += ch * sparse_stride_[v];
  }
}

const Space::Pattern& Space::pattern(unsigned mask) const {
  auto it = patterns_.find(mask);
  if (it != patterns_.end()) return *it->second;
  auto pat = std::make_shared<Pattern>();
  pat->mask = mask;
  pat->loops = pattern_loops(spec_->vars, mask);
  pat->orders = legal_orders(pat->loops);
  const std::vector<std::vector<Loop>>& lambdas = lambdas_[mask & sparse_bits_];
  pat->groups.assign(lambdas.size(), std::vector<std::vector<int>>(pat->loops.size()));
  std::vector<Loop> lam;
  for (std::size_t o = 0; o < pat->orders.size(); ++o) {
    const std::vector<Loop>& order = pat->orders[o];
    lam.clear();
    for (const Loop& l : order)
      if (spec_->is_sparse_var(l.var)) lam.push_back(l);
    const std::size_t li = static_cast<std::size_t>(
        std::find(lambdas.begin(), lambdas.end(), lam) - lambdas.begin());
    WACO_ASSERT(li < lambdas.size(), "level sequence not found");
    for (std::size_t q = 0; q < pat->loops.size(); ++q) {
      bool ok = true;
      for (const auto& c : constraints_)
        if (c->stage() == Stage::Nest && c->check_nest(*this, order, pat->loops[q]) != nullptr) {
          ok = false;
          break;
        }
      if (ok) pat->groups[li][q].push_back(static_cast<int>(o));
    }
  }
  return *patterns_.emplace(mask, std::move(pat)).first->second;
}

std::uint64_t Space::formats_of(const Cursor& c, std::size_t lambda) const {
  const std::size_t slot = c.sparse * max_lambdas_ + lambda;
  if (formats_known_[slot]) return formats_[slot];
  const std::vector<Loop>& levels = lambdas_[c.mask & sparse_bits_][lambda];
  const std::size_t L = levels.size();
  std::vector<int> split = c.split;  // storage constraints see the sparse split sizes only
  for (std::size_t v = 0; v < split.size(); ++v)
    if (sparse_stride_[v] == 0) split[v] = 1;
  std::uint64_t bits = 0;
  std::vector<LevelFormat> f(L);
  for (std::uint64_t m = 0; m < (std::uint64_t{1} << L); ++m) {
    for (std::size_t l = 0; l < L; ++l) f[l] = (m >> l) & 1u ? LevelFormat::C : LevelFormat::U;
    bool keep = true;
    for (const auto& con : constraints_)
      if (con->stage() == Stage::Storage && con->check_storage(*this, split, levels, f) != nullptr) {
        keep = false;
        break;
      }
    if (keep) bits |= std::uint64_t{1} << m;
  }
  formats_[slot] = bits;
  formats_known_[slot] = 1;
  return bits;
}

const std::vector<std::pair<int, int>>& Space::exec_of(const Cursor& c,
                                                       const Loop& parallel) const {
  const std::size_t v = static_cast<std::size_t>(spec_->var_index(parallel.var));
  const std::size_t key =
      static_cast<std::size_t>(loop_code(*spec_, parallel)) * max_choices_ + c.choice[v];
  if (exec_known_[key]) return exec_[key];
  std::vector<int> split(split_choices_.size(), 1);  // execution constraints see s_x of x only
  split[v] = c.split[v];
  std::vector<std::pair<int, int>> ok;
  for (int t = 1; t <= cores_; ++t)
    for (int ch : chunk_choices()) {
      bool keep = true;
      for (const auto& con : constraints_)
        if (con->stage() == Stage::Execution &&
            con->check_execution(*this, split, parallel, t, ch) != nullptr) {
          keep = false;
          break;
        }
      if (keep) ok.emplace_back(t, ch);
    }
  exec_[key] = std::move(ok);
  exec_known_[key] = 1;
  return exec_[key];
}

std::uint64_t Space::split_count(const Cursor& c) const {
  const Pattern& pat = pattern(c.mask);
  const std::size_t nq = pat.loops.size();
  std::array<std::uint64_t, kMaxLoops> e{};
  for (std::size_t q = 0; q < nq; ++q) e[q] = exec_of(c, pat.loops[q]).size();
  std::uint64_t total = 0;
  for (std::size_t li = 0; li < pat.groups.size(); ++li) {
    const std::uint64_t F = popcount(formats_of(c, li));
    if (F == 0) continue;
    std::uint64_t inner = 0;
    for (std::size_t q = 0; q < nq; ++q)
      inner = add(inner, mul(pat.groups[li][q].size(), e[q]));
    total = add(total, mul(F, inner));
  }
  return total;
}

std::uint64_t Space::count() const {
  if (count_) return *count_;
  std::uint64_t total = 0;
  Cursor c;
  for (std::size_t flat = 0; flat < split_total_; ++flat) {
    if (!split_alive_[flat]) continue;
    decode(flat, c);
    total = add(total, split_count(c));
  }
  count_ = total;
  return total;
}

}  // namespace waco::heuristics
