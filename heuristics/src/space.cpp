// The factored SuperSchedule space (space.hpp): split vectors, level sequences with formats, loop
// nests per split pattern and execution parameters, counted as sums of products over cached
// stage results, and decoded from an index for lazy enumeration and uniform sampling.
#include "waco/heuristics/space.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <exception>
#include <numeric>
#include <set>

#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {
using kernels::Error;

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::Split: return "split";
    case Stage::Storage: return "storage";
    case Stage::Nest: return "nest";
    case Stage::Execution: return "execution";
  }
  return "?";
}

const char* Constraint::check_split(const Space&, const std::vector<int>&) const { return nullptr; }
const char* Constraint::check_storage(const Space&, const std::vector<int>&,
                                      const std::vector<Loop>&,
                                      const std::vector<LevelFormat>&) const {
  return nullptr;
}
const char* Constraint::check_nest(const Space&, const std::vector<Loop>&, const Loop&) const {
  return nullptr;
}
const char* Constraint::check_execution(const Space&, const std::vector<int>&, const Loop&, int,
                                        int) const {
  return nullptr;
}

std::vector<int> chunk_choices() {
  std::vector<int> c = {codegen::kStaticChunk};
  for (int x = 1; x <= codegen::kMaxChunk; x *= 2) c.push_back(x);
  return c;
}

namespace {

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error("the schedule space is too large to count", "it exceeds 2^64 candidates");
  return r;
}
std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw Error("the schedule space is too large to count", "it exceeds 2^64 candidates");
  return r;
}

int loop_code(const codegen::KernelSpec& spec, const Loop& l) {
  return spec.var_index(l.var) * 3 + static_cast<int>(l.part);
}

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

struct Space::Pattern {
  unsigned mask = 0;
  std::vector<Loop> loops;                 ///< the pattern's loops (parallel loop q indexes these)
  std::vector<std::vector<Loop>> orders;   ///< every legal order of the pattern
  /// groups[lambda][q]: ids of the orders with that level sequence whose nest with parallel loop
  /// loops[q] passes every nest constraint.
  std::vector<std::vector<std::vector<int>>> groups;
};

struct Space::Cursor {
  std::size_t flat = 0;    ///< index of the split vector in product order
  std::size_t sparse = 0;  ///< index of its sparse split sizes
  unsigned mask = 0;       ///< its split pattern (bit v: variable v is split)
  std::vector<int> split;
  std::vector<std::size_t> choice;  ///< per variable: index into split_choices
};

struct Space::StorageMemo {
  /// Per format slot (sparse index x max_lambdas + lambda): -1 or an index into `rejected`.
  std::vector<std::int32_t> slot;
  /// Per memoized slot: the probe's reasons with the mask of the formats it rejects for each.
  std::vector<std::vector<std::pair<const char*, std::uint64_t>>> rejected;
};

namespace {

constexpr std::size_t kMaxLoops = 16;

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

std::uint64_t popcount(std::uint64_t x) { return static_cast<std::uint64_t>(__builtin_popcountll(x)); }

std::vector<LevelFormat> format_levels(std::uint64_t m, std::size_t levels) {
  std::vector<LevelFormat> f(levels);
  for (std::size_t l = 0; l < levels; ++l) f[l] = (m >> l) & 1u ? LevelFormat::C : LevelFormat::U;
  return f;
}

}  // namespace

void Space::init(kernels::KernelKind k, std::vector<std::int64_t> extents,
                 const SpaceOptions& opts) {
  kind_ = k;
  spec_ = &codegen::kernel_spec(k);
  if (extents.size() != spec_->vars.size())
    throw Error("wrong number of extents for " + std::string(kernels::kernel_name(k)),
                "give one per variable of the kernel");
  extents_ = std::move(extents);
  opts_ = opts;
  if (opts.cores < 0) throw Error("cores must be >= 0", "0 means every available core");
  if (!(opts.max_padding > 0)) throw Error("max padding must be > 0", "the default is 20");
  cores_ = opts.cores > 0 ? opts.cores : std::max(1, kernels::available_cpus());
  split_choices_.clear();
  for (std::int64_t e : extents_) {
    std::vector<int> c;
    const std::int64_t top = std::min<std::int64_t>(codegen::kMaxSplit, std::max<std::int64_t>(e, 1));
    for (std::int64_t s = 1;; s *= 2) {
      c.push_back(static_cast<int>(s));
      if (s >= top) break;
    }
    split_choices_.push_back(std::move(c));
  }

  const std::size_t nv = spec_->vars.size();
  WACO_ASSERT(2 * nv <= kMaxLoops && spec_->sparse_vars.size() <= 3,
              "a kernel with more than 8 loops or 6 sparse levels (format masks are 64-bit)");
  split_stride_.assign(nv, 0);
  sparse_stride_.assign(nv, 0);
  split_total_ = 1;
  for (std::size_t v = nv; v-- > 0;) {
    split_stride_[v] = split_total_;
    split_total_ *= split_choices_[v].size();
  }
  sparse_total_ = 1;
  sparse_bits_ = 0;
  max_choices_ = 0;
  for (std::size_t v = nv; v-- > 0;) {
    max_choices_ = std::max(max_choices_, split_choices_[v].size());
    if (!spec_->is_sparse_var(spec_->vars[v])) continue;
    sparse_bits_ |= 1u << v;
    sparse_stride_[v] = sparse_total_;
    sparse_total_ *= split_choices_[v].size();
  }
  lambdas_.assign(std::size_t{1} << nv, {});
  max_lambdas_ = 0;
  for (unsigned m = 0; m < (1u << nv); ++m) {
    if ((m & ~sparse_bits_) != 0) continue;
    std::vector<Loop> sparse;
    for (const Loop& l : pattern_loops(spec_->vars, m))
      if (spec_->is_sparse_var(l.var)) sparse.push_back(l);
    lambdas_[m] = legal_orders(sparse);
    max_lambdas_ = std::max(max_lambdas_, lambdas_[m].size());
  }
  split_alive_.assign(split_total_, 1);
  patterns_.clear();
  formats_.assign(sparse_total_ * max_lambdas_, 0);
  formats_known_.assign(formats_.size(), 0);
  exec_.assign(3 * nv * max_choices_, {});
  exec_known_.assign(exec_.size(), 0);
  count_.reset();
  index_splits_.clear();
  index_cum_.clear();
}

Space Space::for_problem(const kernels::Problem& p, const SpaceOptions& opts) {
  // One construction for both entry points: tune's space (from the problem) and space's (from
  // the operand) must be the same space. They were not for MTTKRP, whose (i, k) projection
  // signature only for_operand computed, so tune's tile-window removed nothing there.
  Space s = for_operand(p.kind, p.A, p.T, p.dense_size(), opts);
  WACO_ASSERT(s.extents_ == codegen::extents(codegen::kernel_spec(p.kind), p),
              "for_operand and the problem disagree on the extents");
  return s;
}

Space Space::for_operand(kernels::KernelKind k, const kernels::CooMatrix* a,
                         const kernels::CooTensor* t, std::int64_t dense,
                         const SpaceOptions& opts) {
  return for_operand(k, a, t, dense, opts, {});
}

Space Space::for_operand(kernels::KernelKind k, const kernels::CooMatrix* a,
                         const kernels::CooTensor* t, std::int64_t dense,
                         const SpaceOptions& opts,
                         const std::function<void(const signature::LocalitySignature&)>& beside) {
  using kernels::KernelKind;
  const codegen::KernelSpec& spec = codegen::kernel_spec(k);
  std::vector<std::int64_t> ext(spec.vars.size(), 1);
  auto set = [&](char v, std::int64_t n) { ext[static_cast<std::size_t>(spec.var_index(v))] = n; };
  auto facts = std::make_shared<MatrixFacts>();
  if (dense < 1 && k != KernelKind::SpMV)
    throw Error("the dense extent must be >= 1", "give J (spmm, mttkrp) or K (sddmm)");
  if (kernels::needs_tensor(k)) {
    if (t == nullptr || t->order() != 3)
      throw Error("mttkrp needs an order-3 tensor", "give a .tns file");
    set('i', t->dims[0]);
    set('k', t->dims[1]);
    set('l', t->dims[2]);
    set('j', dense);
    facts->counts = PrefixCounts::compute({&t->idx[0], &t->idx[1], &t->idx[2]},
                                          {t->dims[0], t->dims[1], t->dims[2]});
    // The (i, k) projection (distinct pairs): MTTKRP reads B(k, :) per (i, k) fiber as SpMM
    // reads B(k, :) per nonzero, so its signature drives the tile model (tile-window).
    std::vector<std::pair<kernels::index_t, kernels::index_t>> ik;
    ik.reserve(t->idx[0].size());
    for (std::size_t e = 0; e < t->idx[0].size(); ++e) ik.emplace_back(t->idx[0][e], t->idx[1][e]);
    std::sort(ik.begin(), ik.end());
    ik.erase(std::unique(ik.begin(), ik.end()), ik.end());
    kernels::CooMatrix proj;
    proj.rows = t->dims[0];
    proj.cols = t->dims[1];
    for (const auto& [r, c] : ik) {
      proj.row.push_back(r);
      proj.col.push_back(c);
      proj.val.push_back(1.0f);
    }
    facts->signature = signature::compute_signature(proj);
    facts->has_signature = true;
  } else {
    if (a == nullptr)
      throw Error(std::string(kernels::kernel_name(k)) + " needs a matrix", "give a .mtx file");
    set('i', a->rows);
    if (k == KernelKind::SDDMM) {
      set('j', a->cols);
      set('k', dense);
    } else {
      set('k', a->cols);
      if (k == KernelKind::SpMM) set('j', dense);
    }
    // Serial: on OpenMP's threads they made two processes beside each other on two cores
    // slower (heuristics/README.md, prefix_counts.hpp). With the caller's work beside them, two
    // threads of OpenMP's team: the counts on one, the signature (serial) and the caller's work
    // on the other. The team's, not a thread of its own: an OpenMP thread idle after a region
    // (the signature's, the model's scoring) spins for milliseconds and would take its core.
    const bool apart = beside && a->nnz() >= kBesideMinNnz;
    const auto count = [&] {
      facts->counts = PrefixCounts::compute({&a->row, &a->col}, {a->rows, a->cols});
      if (k == KernelKind::SpMV && opts.diagonals >= 0)
        facts->diagonals = opts.diagonals;
      else if (k == KernelKind::SpMV && opts.count_diagonals)
        facts->diagonals = static_cast<std::int64_t>(kernels::dia_offsets(*a).size());
    };
    const auto describe = [&] {
      facts->signature = signature::compute_signature(*a, apart ? 1 : 0);
      facts->has_signature = true;
      if (beside) beside(facts->signature);
    };
    if (apart) {
      std::exception_ptr failed[2];
#pragma omp parallel num_threads(2)
      {
        const int t = omp_get_thread_num(), team = omp_get_num_threads();
        for (int part = t; part < 2; part += team) {
          try {
            if (part == 0) count();
            else describe();
          } catch (...) {
            failed[part] = std::current_exception();
          }
        }
      }
      for (const std::exception_ptr& e : failed)
        if (e) std::rethrow_exception(e);
    } else {
      count();
      describe();
    }
  }
  Space s;
  s.init(k, std::move(ext), opts);
  s.facts_ = std::move(facts);
  return s;
}

Space Space::structural(kernels::KernelKind k, std::vector<std::int64_t> extents,
                        const SpaceOptions& opts) {
  Space s;
  s.init(k, std::move(extents), opts);
  return s;
}

std::int64_t Space::extent(char var) const {
  const int v = spec_->var_index(var);
  WACO_ASSERT(v >= 0, std::string("no variable ") + var);
  return extents_[static_cast<std::size_t>(v)];
}

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

std::optional<std::string> Space::admits(const SuperSchedule& schedule) const {
  return check(schedule, false);
}

std::optional<std::string> Space::storage_admits(const SuperSchedule& schedule) const {
  return check(schedule, true);
}

namespace {
constexpr unsigned stage_bit(Stage s) { return 1u << static_cast<unsigned>(s); }
constexpr unsigned kAllStages = stage_bit(Stage::Split) | stage_bit(Stage::Storage) |
                                stage_bit(Stage::Nest) | stage_bit(Stage::Execution);
}  // namespace

const char* Space::range_refusal(const SuperSchedule& s) const {
  for (std::size_t v = 0; v < split_choices_.size(); ++v)
    if (std::find(split_choices_[v].begin(), split_choices_[v].end(), s.split[v]) ==
        split_choices_[v].end())
      return "split-out-of-range";
  if (s.threads < 1 || s.threads > cores_) return "threads-out-of-range";
  return nullptr;
}

const char* Space::constraint_refusal(const SuperSchedule& s, unsigned stages) const {
  // Every stage's constraints see what the space's caches show them (see the Constraint docs).
  const std::size_t nv = split_choices_.size();
  std::vector<int> sparse_split = s.split, exec_split(nv, 1);
  for (std::size_t v = 0; v < nv; ++v)
    if (sparse_stride_[v] == 0) sparse_split[v] = 1;
  const std::size_t pv = static_cast<std::size_t>(spec_->var_index(s.parallel.var));
  exec_split[pv] = s.split[pv];
  std::vector<Loop> levels;
  if (stages & stage_bit(Stage::Storage)) levels = s.levels();
  for (const auto& c : constraints_) {
    if (!(stages & stage_bit(c->stage()))) continue;
    const char* why = nullptr;
    switch (c->stage()) {
      case Stage::Split: why = c->check_split(*this, s.split); break;
      case Stage::Storage: why = c->check_storage(*this, sparse_split, levels, s.formats); break;
      case Stage::Nest: why = c->check_nest(*this, s.order, s.parallel); break;
      case Stage::Execution:
        why = c->check_execution(*this, exec_split, s.parallel, s.threads, s.chunk);
        break;
    }
    if (why) return why;
  }
  return nullptr;
}

std::optional<std::string> Space::check(const SuperSchedule& schedule, bool storage_only) const {
  if (schedule.kind != kind_) return std::string("other-kernel");
  const std::vector<std::string> problems = codegen::validate(schedule);
  if (!problems.empty()) return "invalid schedule: " + problems.front();
  const SuperSchedule s = codegen::canonicalize(schedule);
  if (!storage_only) {
    if (const char* why = range_refusal(s)) return std::string(why);
    const std::vector<int> chunks = chunk_choices();
    if (std::find(chunks.begin(), chunks.end(), s.chunk) == chunks.end())
      return std::string("chunk-out-of-range");
  }
  if (const char* why =
          constraint_refusal(s, storage_only ? stage_bit(Stage::Storage) : kAllStages))
    return std::string(why);
  return std::nullopt;
}

std::vector<bool> Space::admits_each_chunk(const SuperSchedule& schedule,
                                           const std::vector<int>& chunks) const {
  std::vector<bool> out(chunks.size(), false);
  if (schedule.kind != kind_) return out;
  // validate() reads the chunk only to check its range, which chunk_choices() holds (below).
  SuperSchedule s = schedule;
  s.chunk = codegen::kStaticChunk;
  if (!codegen::validate(s).empty()) return out;
  s = codegen::canonicalize(s);  // the chunk kept as it is
  if (range_refusal(s) != nullptr) return out;
  if (constraint_refusal(s, kAllStages & ~stage_bit(Stage::Execution)) != nullptr) return out;
  const std::vector<int> choices = chunk_choices();
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    if (std::find(choices.begin(), choices.end(), chunks[k]) == choices.end()) continue;
    s.chunk = chunks[k];
    out[k] = constraint_refusal(s, stage_bit(Stage::Execution)) == nullptr;
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

// ---- storage sizes from the prefix counts (prefix_counts.hpp mirrors codegen::build_storage) ----

const LevelShapes& Space::shapes(const std::vector<int>& split,
                                 const std::vector<Loop>& levels) const {
  // Storage constraints are asked about every format of one (split, levels) in a row.
  if (!(shape_split_ == split && shape_levels_ == levels)) {
    shape_ = level_shapes(facts_->counts, *spec_, extents_, split, levels);
    shape_split_ = split;
    shape_levels_ = levels;
  }
  return shape_;
}

const char* Space::storage_refusal(const std::vector<int>& split, const std::vector<Loop>& levels,
                                   const std::vector<LevelFormat>& formats) const {
  if (!facts_) return nullptr;
  return check_format(shapes(split, levels), formats, facts_->counts.nnz(), opts_.max_padding)
      .refusal;
}

double Space::stored_values(const std::vector<int>& split, const std::vector<Loop>& levels,
                            const std::vector<LevelFormat>& formats) const {
  WACO_ASSERT(facts_ != nullptr, "stored_values needs the matrix facts");
  return format_stored_values(shapes(split, levels), formats);
}

std::int64_t Space::trip_count(const std::vector<int>& split, const Loop& loop) const {
  const std::size_t v = static_cast<std::size_t>(spec_->var_index(loop.var));
  const std::int64_t e = extents_[v];
  const std::int64_t s = split[v];
  switch (loop.part) {
    case Loop::Part::Whole: return e;
    case Loop::Part::Outer: return (e + s - 1) / s;
    case Loop::Part::Inner: return std::min(e, s);
  }
  return e;
}

}  // namespace waco::heuristics
