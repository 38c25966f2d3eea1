// The factored SuperSchedule space (space.hpp): split vectors, level sequences with formats, loop
// nests per split pattern and execution parameters, counted as sums of products over cached
// stage results, and decoded from an index for lazy enumeration and uniform sampling.
#include "waco/heuristics/space.hpp"

#include <algorithm>
#include <numeric>
#include <set>

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
  std::vector<int> c;
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

int log2_int(std::int64_t v) {
  int r = 0;
  while ((std::int64_t{1} << (r + 1)) <= v) ++r;
  return r;
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
  std::vector<std::vector<Loop>> lambdas;  ///< sparse level sequences (canonical, per sparse mask)
  std::vector<std::vector<Loop>> orders;   ///< every legal order of the pattern
  /// groups[lambda][q]: ids of the orders with that level sequence whose nest with parallel loop
  /// loops[q] passes every nest constraint.
  std::vector<std::vector<std::vector<int>>> groups;
};

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
}

Space Space::for_problem(const kernels::Problem& p, const SpaceOptions& opts) {
  Space s;
  const codegen::KernelSpec& spec = codegen::kernel_spec(p.kind);
  s.init(p.kind, codegen::extents(spec, p), opts);
  auto facts = std::make_shared<MatrixFacts>();
  facts->counts = PrefixCounts::compute(p);
  if (!kernels::needs_tensor(p.kind)) {
    facts->signature = signature::compute_signature(*p.A);
    facts->has_signature = true;
  }
  s.facts_ = std::move(facts);
  return s;
}

Space Space::for_operand(kernels::KernelKind k, const kernels::CooMatrix* a,
                         const kernels::CooTensor* t, std::int64_t dense,
                         const SpaceOptions& opts) {
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
    facts->counts = PrefixCounts::compute({&a->row, &a->col}, {a->rows, a->cols});
    facts->signature = signature::compute_signature(*a);
    facts->has_signature = true;
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

void Space::clear_caches() {
  patterns_.clear();
  formats_.clear();
  exec_.clear();
  index_splits_.clear();
  index_cum_.clear();
}

void Space::add_constraint(std::shared_ptr<const Constraint> c) {
  WACO_ASSERT(c != nullptr, "null constraint");
  constraints_.push_back(std::move(c));
  clear_caches();
}

const Space::Pattern& Space::pattern(unsigned mask) const {
  auto it = patterns_.find(mask);
  if (it != patterns_.end()) return *it->second;
  auto pat = std::make_shared<Pattern>();
  pat->mask = mask;
  pat->loops = pattern_loops(spec_->vars, mask);
  pat->orders = legal_orders(pat->loops);
  // Level sequences: the legal orders of the sparse loops alone (canonical per sparse mask).
  std::vector<Loop> sparse;
  for (const Loop& l : pat->loops)
    if (spec_->is_sparse_var(l.var)) sparse.push_back(l);
  pat->lambdas = legal_orders(sparse);
  pat->groups.assign(pat->lambdas.size(), std::vector<std::vector<int>>(pat->loops.size()));
  for (std::size_t o = 0; o < pat->orders.size(); ++o) {
    const std::vector<Loop>& order = pat->orders[o];
    std::vector<Loop> lam;
    for (const Loop& l : order)
      if (spec_->is_sparse_var(l.var)) lam.push_back(l);
    const std::size_t li = static_cast<std::size_t>(
        std::find(pat->lambdas.begin(), pat->lambdas.end(), lam) - pat->lambdas.begin());
    WACO_ASSERT(li < pat->lambdas.size(), "level sequence not found");
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
  patterns_[mask] = pat;
  return *pat;
}

const std::vector<std::uint8_t>& Space::formats_of(const std::vector<int>& split, unsigned mask,
                                                   std::size_t lambda) const {
  std::vector<int> key;
  for (char v : spec_->sparse_vars) key.push_back(split[static_cast<std::size_t>(spec_->var_index(v))]);
  auto k = std::make_pair(std::move(key), lambda);
  auto it = formats_.find(k);
  if (it != formats_.end()) return it->second;
  const std::vector<Loop>& levels = pattern(mask).lambdas[lambda];
  const std::size_t L = levels.size();
  std::vector<std::uint8_t> ok;
  std::vector<LevelFormat> f(L);
  for (unsigned m = 0; m < (1u << L); ++m) {
    for (std::size_t l = 0; l < L; ++l) f[l] = (m >> l) & 1u ? LevelFormat::C : LevelFormat::U;
    bool keep = true;
    for (const auto& c : constraints_)
      if (c->stage() == Stage::Storage && c->check_storage(*this, split, levels, f) != nullptr) {
        keep = false;
        break;
      }
    if (keep) ok.push_back(static_cast<std::uint8_t>(m));
  }
  return formats_.emplace(std::move(k), std::move(ok)).first->second;
}

const std::vector<std::pair<int, int>>& Space::exec_of(const std::vector<int>& split,
                                                       const Loop& parallel) const {
  auto k = std::make_pair(split, loop_code(*spec_, parallel));
  auto it = exec_.find(k);
  if (it != exec_.end()) return it->second;
  std::vector<std::pair<int, int>> ok;
  for (int t = 1; t <= cores_; ++t)
    for (int c : chunk_choices()) {
      bool keep = true;
      for (const auto& con : constraints_)
        if (con->stage() == Stage::Execution &&
            con->check_execution(*this, split, parallel, t, c) != nullptr) {
          keep = false;
          break;
        }
      if (keep) ok.emplace_back(t, c);
    }
  return exec_.emplace(std::move(k), std::move(ok)).first->second;
}

bool Space::split_ok(const std::vector<int>& split) const {
  for (const auto& c : constraints_)
    if (c->stage() == Stage::Split && c->check_split(*this, split) != nullptr) return false;
  return true;
}

void Space::for_each_split(const std::function<void(const std::vector<int>&)>& f) const {
  const std::size_t n = split_choices_.size();
  std::vector<std::size_t> idx(n, 0);
  std::vector<int> split(n);
  for (;;) {
    for (std::size_t v = 0; v < n; ++v) split[v] = split_choices_[v][idx[v]];
    if (split_ok(split)) f(split);
    std::size_t v = n;
    while (v > 0) {
      --v;
      if (++idx[v] < split_choices_[v].size()) break;
      idx[v] = 0;
      if (v == 0) return;
    }
    if (n == 0) return;
  }
}

static unsigned mask_of(const std::vector<int>& split) {
  unsigned m = 0;
  for (std::size_t v = 0; v < split.size(); ++v)
    if (split[v] > 1) m |= 1u << v;
  return m;
}

std::uint64_t Space::split_count(const std::vector<int>& split) const {
  const unsigned mask = mask_of(split);
  const Pattern& pat = pattern(mask);
  std::uint64_t total = 0;
  for (std::size_t li = 0; li < pat.lambdas.size(); ++li) {
    const std::uint64_t F = formats_of(split, mask, li).size();
    if (F == 0) continue;
    std::uint64_t inner = 0;
    for (std::size_t q = 0; q < pat.loops.size(); ++q) {
      const std::uint64_t n = pat.groups[li][q].size();
      if (n == 0) continue;
      inner = add(inner, mul(n, exec_of(split, pat.loops[q]).size()));
    }
    total = add(total, mul(F, inner));
  }
  return total;
}

std::uint64_t Space::count() const {
  std::uint64_t total = 0;
  for_each_split([&](const std::vector<int>& s) { total = add(total, split_count(s)); });
  return total;
}

std::map<std::string, std::uint64_t> Space::tally(const Constraint& probe) const {
  std::map<std::string, std::uint64_t> hist;
  auto put = [&](const char* reason, std::uint64_t w) {
    if (w == 0) return;
    std::string key = reason == nullptr ? std::string() : std::string(reason);
    hist[key] = add(hist[key], w);
  };
  const Stage st = probe.stage();
  // Nest probes do not depend on split sizes: per (pattern, lambda, q) reason histograms.
  std::map<std::tuple<unsigned, std::size_t, std::size_t>, std::map<std::string, std::uint64_t>>
      nest_hist;
  for_each_split([&](const std::vector<int>& split) {
    if (st == Stage::Split) {
      put(probe.check_split(*this, split), split_count(split));
      return;
    }
    const unsigned mask = mask_of(split);
    const Pattern& pat = pattern(mask);
    for (std::size_t li = 0; li < pat.lambdas.size(); ++li) {
      const std::vector<std::uint8_t>& formats = formats_of(split, mask, li);
      const std::uint64_t F = formats.size();
      if (F == 0) continue;
      if (st == Stage::Storage) {
        std::uint64_t inner = 0;
        for (std::size_t q = 0; q < pat.loops.size(); ++q)
          inner = add(inner, mul(pat.groups[li][q].size(), exec_of(split, pat.loops[q]).size()));
        const std::vector<Loop>& levels = pat.lambdas[li];
        std::vector<LevelFormat> f(levels.size());
        for (std::uint8_t m : formats) {
          for (std::size_t l = 0; l < levels.size(); ++l)
            f[l] = (m >> l) & 1u ? LevelFormat::C : LevelFormat::U;
          put(probe.check_storage(*this, split, levels, f), inner);
        }
        continue;
      }
      for (std::size_t q = 0; q < pat.loops.size(); ++q) {
        const std::vector<int>& group = pat.groups[li][q];
        if (group.empty()) continue;
        const auto& exec = exec_of(split, pat.loops[q]);
        if (st == Stage::Nest) {
          auto key = std::make_tuple(mask, li, q);
          auto it = nest_hist.find(key);
          if (it == nest_hist.end()) {
            std::map<std::string, std::uint64_t> h;
            for (int o : group) {
              const char* r = probe.check_nest(*this, pat.orders[static_cast<std::size_t>(o)],
                                               pat.loops[q]);
              ++h[r == nullptr ? std::string() : std::string(r)];
            }
            it = nest_hist.emplace(key, std::move(h)).first;
          }
          const std::uint64_t w = mul(F, exec.size());
          for (const auto& [r, n] : it->second) hist[r] = add(hist[r], mul(w, n));
        } else {
          const std::uint64_t w = mul(F, group.size());
          for (const auto& [t, c] : exec)
            put(probe.check_execution(*this, split, pat.loops[q], t, c), w);
        }
      }
    }
  });
  return hist;
}

void Space::build_index() const {
  if (!index_cum_.empty()) return;
  index_cum_.push_back(0);
  for_each_split([&](const std::vector<int>& s) {
    const std::uint64_t n = split_count(s);
    if (n == 0) return;
    index_splits_.push_back(s);
    index_cum_.push_back(add(index_cum_.back(), n));
  });
}

SuperSchedule Space::at(std::uint64_t index) const {
  build_index();
  const std::uint64_t total = index_cum_.back();
  if (index >= total)
    throw Error("schedule index " + std::to_string(index) + " out of range",
                "the space has " + std::to_string(total) + " candidates");
  const std::size_t si = static_cast<std::size_t>(
      std::upper_bound(index_cum_.begin(), index_cum_.end(), index) - index_cum_.begin() - 1);
  const std::vector<int>& split = index_splits_[si];
  std::uint64_t rem = index - index_cum_[si];
  const unsigned mask = mask_of(split);
  const Pattern& pat = pattern(mask);
  for (std::size_t li = 0; li < pat.lambdas.size(); ++li) {
    const auto& formats = formats_of(split, mask, li);
    if (formats.empty()) continue;
    for (std::size_t q = 0; q < pat.loops.size(); ++q) {
      const auto& group = pat.groups[li][q];
      const auto& exec = exec_of(split, pat.loops[q]);
      const std::uint64_t fe = mul(formats.size(), exec.size());
      const std::uint64_t block = mul(group.size(), fe);
      if (rem >= block) {
        rem -= block;
        continue;
      }
      const std::vector<Loop>& order = pat.orders[static_cast<std::size_t>(group[rem / fe])];
      const std::uint64_t r2 = rem % fe;
      const std::uint8_t fm = formats[r2 / exec.size()];
      const auto [threads, chunk] = exec[r2 % exec.size()];
      SuperSchedule s;
      s.kind = kind_;
      s.split = split;
      s.order = order;
      for (std::size_t l = 0; l < pat.lambdas[li].size(); ++l)
        s.formats.push_back((fm >> l) & 1u ? LevelFormat::C : LevelFormat::U);
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
  for (const std::vector<int>& split : index_splits_) {
    const unsigned mask = mask_of(split);
    const Pattern& pat = pattern(mask);
    for (std::size_t li = 0; li < pat.lambdas.size(); ++li) {
      const auto& formats = formats_of(split, mask, li);
      for (std::size_t q = 0; q < pat.loops.size(); ++q) {
        const auto& exec = exec_of(split, pat.loops[q]);
        for (int o : pat.groups[li][q])
          for (std::uint8_t fm : formats)
            for (const auto& [threads, chunk] : exec) {
              SuperSchedule s;
              s.kind = kind_;
              s.split = split;
              s.order = pat.orders[static_cast<std::size_t>(o)];
              for (std::size_t l = 0; l < pat.lambdas[li].size(); ++l)
                s.formats.push_back((fm >> l) & 1u ? LevelFormat::C : LevelFormat::U);
              s.parallel = pat.loops[q];
              s.threads = threads;
              s.chunk = chunk;
              if (!visit(s)) return;
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

// ---- storage sizes from the prefix counts (mirrors codegen::build_storage) ----

namespace {

struct LevelSizes {
  std::vector<double> dims;
  std::vector<std::vector<int>> shifts;  ///< per level: the prefix through it, as shifts
};

LevelSizes level_sizes(const Space& sp, const std::vector<int>& split,
                       const std::vector<Loop>& levels) {
  const codegen::KernelSpec& spec = sp.spec();
  const PrefixCounts& pc = sp.facts()->counts;
  LevelSizes ls;
  std::vector<int> shift(spec.sparse_vars.size());
  for (std::size_t m = 0; m < shift.size(); ++m) shift[m] = pc.bits(static_cast<int>(m));
  for (const Loop& l : levels) {
    const std::size_t v = static_cast<std::size_t>(spec.var_index(l.var));
    const std::size_t m = static_cast<std::size_t>(
        std::find(spec.sparse_vars.begin(), spec.sparse_vars.end(), l.var) -
        spec.sparse_vars.begin());
    const std::int64_t e = sp.extents()[v];
    const std::int64_t s = split[v];
    if (l.part == Loop::Part::Whole) {
      ls.dims.push_back(static_cast<double>(e));
      shift[m] = 0;
    } else if (l.part == Loop::Part::Outer) {
      ls.dims.push_back(static_cast<double>((e + s - 1) / s));
      shift[m] = std::min(log2_int(s), pc.bits(static_cast<int>(m)));
    } else {
      ls.dims.push_back(static_cast<double>(s));
      shift[m] = 0;
    }
    ls.shifts.push_back(shift);
  }
  return ls;
}

}  // namespace

const char* Space::storage_refusal(const std::vector<int>& split, const std::vector<Loop>& levels,
                                   const std::vector<LevelFormat>& formats) const {
  if (!facts_) return nullptr;
  const PrefixCounts& pc = facts_->counts;
  const LevelSizes ls = level_sizes(*this, split, levels);
  const double nnz = static_cast<double>(std::max<std::int64_t>(pc.nnz(), 1));
  const double value_bound = opts_.max_padding * nnz;
  const double dims_sum = std::accumulate(ls.dims.begin(), ls.dims.end(), 0.0);
  const double L = static_cast<double>(levels.size());
  const double index_bound = value_bound + 2.0 * dims_sum + 2.0 * L;
  double parent = 1, index_words = 0;
  for (std::size_t l = 0; l < levels.size(); ++l) {
    double size = 0;
    if (formats[l] == LevelFormat::U) {
      size = parent * ls.dims[l];
      if (size > value_bound && size > index_bound) return "padding-bound";
    } else {
      index_words += parent + 1;
      if (index_words > index_bound) return "padding-bound";
      size = static_cast<double>(pc.distinct(ls.shifts[l]));
      index_words += size;
    }
    if (size > static_cast<double>(kernels::kMaxIndex)) return "index-overflow";
    parent = size;
  }
  if (parent > value_bound) return "padding-bound";
  return nullptr;
}

double Space::stored_values(const std::vector<int>& split, const std::vector<Loop>& levels,
                            const std::vector<LevelFormat>& formats) const {
  WACO_ASSERT(facts_ != nullptr, "stored_values needs the matrix facts");
  const LevelSizes ls = level_sizes(*this, split, levels);
  double parent = 1;
  for (std::size_t l = 0; l < levels.size(); ++l)
    parent = formats[l] == LevelFormat::U ? parent * ls.dims[l]
                                          : static_cast<double>(facts_->counts.distinct(ls.shifts[l]));
  return parent;
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
