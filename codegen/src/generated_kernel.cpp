#include "waco/codegen/generated_kernel.hpp"

#include <algorithm>

#include "waco/codegen/emitter.hpp"
#include "waco/kernels/error.hpp"

namespace waco::codegen {

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

  compile_ = compile_and_load(emit_kernel_source(schedule_), opts_.compiler);
  fn_ = reinterpret_cast<void (*)(const WacoArgs*)>(compile_.library->symbol("waco_kernel"));

  args_ = WacoArgs{};
  for (std::size_t l = 0; l < storage_->levels.size(); ++l) {
    const Level& lv = storage_->levels[l];
    args_.pos[l] = lv.pos.empty() ? nullptr : lv.pos.data();
    args_.crd[l] = lv.crd.empty() ? nullptr : lv.crd.data();
    args_.level_dim[l] = lv.dim;
  }
  args_.vals = storage_->vals.data();
  args_.in[0] = p.B->data.data();
  args_.in[1] = spec.inputs.size() > 1 ? p.C->data.data() : nullptr;
  const std::vector<std::int64_t> ext = extents(spec, p);
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    args_.extent[v] = ext[v];
    args_.split[v] = schedule_.split[v];
  }
  args_.threads = schedule_.threads > 0 ? schedule_.threads : std::max(1, threads);
  args_.chunk = schedule_.chunk;
  out_.assign(static_cast<std::size_t>(spec.sparse_output() ? storage_->stored_values()
                                                             : p.output_size()),
              0.0f);
  args_.out = out_.data();
  args_.out_size = static_cast<long long>(out_.size());
}

void GeneratedKernel::run() {
  WACO_ASSERT(fn_ != nullptr, "run() before prepare()");
  fn_(&args_);
}

const std::vector<float>& GeneratedKernel::output() const {
  if (!kernel_spec(schedule_.kind).sparse_output()) return out_;
  canonical_.resize(storage_->entry_position.size());
  for (std::size_t e = 0; e < canonical_.size(); ++e)
    canonical_[e] = out_[storage_->entry_position[e]];
  return canonical_;
}

}  // namespace waco::codegen
