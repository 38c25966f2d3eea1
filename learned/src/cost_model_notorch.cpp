// cost_model.hpp without LibTorch: every entry point that needs the network throws.
#include "waco/kernels/error.hpp"
#include "waco/learned/cost_model.hpp"

namespace waco::learned {
namespace {
[[noreturn]] void no_torch() {
  throw kernels::Error("the cost model is not available: waco-hybrid was built without LibTorch",
                       "install libtorch-dev (scripts/setup.sh does) and rebuild");
}
}  // namespace

struct ModelInput::Impl {};
struct CostModel::Impl {};
const ModelInput::Impl& ModelInput::impl() const { no_torch(); }
double ModelInput::prepare_seconds() const { no_torch(); }
CostModel::CostModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CostModel::CostModel(CostModel&&) noexcept = default;
CostModel& CostModel::operator=(CostModel&&) noexcept = default;
CostModel::~CostModel() = default;
CostModel CostModel::create(const CostModelConfig&) { no_torch(); }
CostModel CostModel::load(const std::string&, std::optional<kernels::KernelKind>,
                          std::optional<EncoderKind>) { no_torch(); }
void CostModel::save(const std::string&) const { no_torch(); }
const CostModelConfig& CostModel::config() const { no_torch(); }
nlohmann::json& CostModel::record() { no_torch(); }
const nlohmann::json& CostModel::record() const { no_torch(); }
std::int64_t CostModel::parameter_count() const { no_torch(); }
ModelInput CostModel::prepare(const kernels::CooMatrix&) const { no_torch(); }
ModelInput CostModel::prepare(const kernels::CooTensor&) const { no_torch(); }
std::vector<double> CostModel::scores(const ModelInput&,
                                      const std::vector<codegen::SuperSchedule>&) const { no_torch(); }
TrainSummary CostModel::train(const std::vector<RankingExample>&, const std::vector<RankingExample>&,
                              const TrainOptions&, const std::function<void(const EpochReport&)>&) {
  no_torch();
}
HeadTail CostModel::head_tail() const { no_torch(); }
std::vector<float> CostModel::query_vector(const ModelInput&) const { no_torch(); }
std::vector<float> CostModel::node_vectors(const std::vector<codegen::SuperSchedule>&) const {
  no_torch();
}
double CostModel::loss(const std::vector<RankingExample>&, double, double) const { no_torch(); }

}  // namespace waco::learned
