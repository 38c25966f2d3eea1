#include "waco/codegen/generated_kernel.hpp"

#include <algorithm>

#include "waco/codegen/emitter.hpp"
#include "waco/kernels/error.hpp"

namespace waco::codegen {

RaceStrategy resolve_race(RaceStrategy requested, const SuperSchedule& s, std::int64_t output_size,
                          double updates, int threads) {
  if (requested != RaceStrategy::Auto) return requested;
  if (parallel_loop_is_race_free(s)) return RaceStrategy::Atomic;  // same source either way
  // Measured (issue 4, SpMV and SpMM csc on 2 threads): private took 0.07-0.23x the time of
  // atomic with several updates per output entry (bcsstk16, email-Enron, delaunay_n16,
  // loc-Gowalla), about the same at one update per entry, and 1.1-1.4x at 1/4-1/16 update per
  // entry (uniform 1M x 1M): an extra copy costs about one update per entry. One thread needs no
  // copy, so private always wins there.
  const double copies = static_cast<double>(threads - 1) * static_cast<double>(output_size);
  if (copies * sizeof(float) > kMaxPrivateCopyBytes) return RaceStrategy::Atomic;
  return copies <= updates ? RaceStrategy::Private : RaceStrategy::Atomic;
}

GeneratedKernel::GeneratedKernel(SuperSchedule schedule, GeneratedOptions opts)
    : schedule_(canonicalize(schedule)), opts_(std::move(opts)) {}

void GeneratedKernel::prepare(const kernels::Problem& p, int threads) {
  p.validate();
  if (schedule_.kind != p.kind)
    throw kernels::Error("the schedule is for " + std::string(kernels::kernel_name(schedule_.kind)) +
                         ", the problem is " + std::string(kernels::kernel_name(p.kind)));
  const std::vector<std::string> problems = validate(schedule_);
  if (!problems.empty()) throw kernels::Error("invalid schedule: " + problems.front());
  const KernelSpec& spec = kernel_spec(p.kind);
  problem_ = p;

  StorageResult built = build_storage(schedule_, p, opts_.storage);
  if (!built.storage)
    throw kernels::Error(built.refused, "choose another format, or raise the bound with --max-padding");
  storage_ = std::make_unique<Storage>(std::move(*built.storage));
  conversion_seconds_ = storage_->build_seconds;
  WACO_ASSERT(storage_->levels.size() <= static_cast<std::size_t>(kMaxLevels), "too many levels");

  out_.assign(static_cast<std::size_t>(spec.sparse_output() ? storage_->stored_values()
                                                             : p.output_size()),
              0.0f);
  const std::vector<std::int64_t> ext = extents(spec, p);
  // Updates of the output: one per stored value and iteration of the dense-only loops.
  double updates = static_cast<double>(storage_->stored_values());
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    if (!spec.is_sparse_var(spec.vars[v])) updates *= static_cast<double>(ext[v]);

  args_ = WacoArgs{};
  args_.threads = schedule_.threads > 0 ? schedule_.threads : std::max(1, threads);
  race_ = resolve_race(opts_.race, schedule_, static_cast<std::int64_t>(out_.size()), updates,
                       args_.threads);
  compile_ = compile_and_load(emit_kernel_source(schedule_, race_), opts_.compiler);
  fn_ = reinterpret_cast<int (*)(const WacoArgs*)>(compile_.library->symbol("waco_kernel"));
  const auto* constant_split =
      static_cast<const long long*>(compile_.library->symbol("waco_constant_split"));
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    WACO_ASSERT(constant_split[v] ==
                    (split_is_constant(schedule_, spec.vars[v]) ? schedule_.split[v] : 0),
                std::string("the kernel's constant split size of ") + spec.vars[v] +
                    " is not the schedule's: " + compile_.library_path);

  for (std::size_t l = 0; l < storage_->levels.size(); ++l) {
    const Level& lv = storage_->levels[l];
    args_.pos[l] = lv.pos.empty() ? nullptr : lv.pos.data();
    args_.crd[l] = lv.crd.empty() ? nullptr : lv.crd.data();
    args_.level_dim[l] = lv.dim;
  }
  args_.vals = storage_->vals.data();
  args_.in[0] = p.B->data.data();
  args_.in[1] = spec.inputs.size() > 1 ? p.C->data.data() : nullptr;
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    args_.extent[v] = ext[v];
    args_.split[v] = schedule_.split[v];
  }
  args_.chunk = schedule_.chunk;
  args_.out = out_.data();
  args_.out_size = static_cast<long long>(out_.size());
}

void GeneratedKernel::run() {
  WACO_ASSERT(fn_ != nullptr, "run() before prepare()");
  if (fn_(&args_) != 0)
    throw kernels::Error(
        "the generated kernel could not allocate its " + std::to_string(args_.threads - 1) +
            " per-thread copies of the output (" + std::to_string(args_.out_size) + " floats each)",
        "use --race atomic, or fewer threads");
}

const std::vector<float>& GeneratedKernel::output() const {
  if (!kernel_spec(schedule_.kind).sparse_output()) return out_;
  canonical_.resize(storage_->entry_position.size());
  for (std::size_t e = 0; e < canonical_.size(); ++e)
    canonical_[e] = out_[storage_->entry_position[e]];
  return canonical_;
}

}  // namespace waco::codegen
