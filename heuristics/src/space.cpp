// The factored SuperSchedule space (space.hpp): split vectors, level sequences with formats, loop
// nests per split pattern and execution parameters, counted as sums of products over cached
// stage results, and decoded from an index for lazy enumeration and uniform sampling.
// This file: the stage names, Constraint's default checks, the chunk choices and the construction
// of a space; the other parts are listed in space_detail.hpp.
#include "waco/heuristics/space.hpp"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "space_detail.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {
using kernels::Error;
using space_detail::kMaxLoops;
using space_detail::legal_orders;
using space_detail::pattern_loops;

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

}  // namespace waco::heuristics
