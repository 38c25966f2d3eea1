// The FeatureExtractor API of the lite waco_learned (backend.hpp): every entry point throws
// TorchRequired, and built_with_torch() is false, so callers can run the LibTorch build or say
// why WACONet is unavailable instead of failing to link.
#include "waco/kernels/error.hpp"
#include "waco/learned/feature_extractor.hpp"

#include "cost_model_internal.hpp"

namespace waco::learned {
namespace {

[[noreturn]] void no_torch() { throw_torch_required("WACONet"); }

}  // namespace

struct PreparedPattern::Impl {
  PatternStats stats;
};
struct FeatureExtractor::Impl {
  WacoNetParams params;
};

bool built_with_torch() { return false; }
void set_threads(int) {}
int threads() { return 1; }
void release_buffers() {}
double measure_gemm_gflops(std::int64_t, std::int64_t, std::int64_t, int) { no_torch(); }
const PatternStats& PreparedPattern::stats() const { no_torch(); }
const PreparedPattern::Impl& PreparedPattern::impl() const { no_torch(); }

FeatureExtractor::FeatureExtractor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FeatureExtractor::FeatureExtractor(FeatureExtractor&&) noexcept = default;
FeatureExtractor& FeatureExtractor::operator=(FeatureExtractor&&) noexcept = default;
FeatureExtractor::~FeatureExtractor() = default;
FeatureExtractor FeatureExtractor::create(const WacoNetParams&, std::uint64_t) { no_torch(); }
FeatureExtractor FeatureExtractor::load(const std::string&, const WacoNetParams*) { no_torch(); }
void FeatureExtractor::save(const std::string&) const { no_torch(); }
const WacoNetParams& FeatureExtractor::params() const { no_torch(); }
void FeatureExtractor::set_conv_impl(ConvImpl) { no_torch(); }
ConvImpl FeatureExtractor::conv_impl() const { no_torch(); }
void FeatureExtractor::set_standardization(const std::vector<float>&, const std::vector<float>&) {
  no_torch();
}
PreparedPattern FeatureExtractor::prepare(const kernels::CooMatrix&) const { no_torch(); }
PreparedPattern FeatureExtractor::prepare(const kernels::CooTensor&) const { no_torch(); }
Features FeatureExtractor::extract(const PreparedPattern&) const { no_torch(); }
Features FeatureExtractor::extract(const kernels::CooMatrix&) const { no_torch(); }
std::vector<Features> FeatureExtractor::extract(const std::vector<PreparedPattern>&) const {
  no_torch();
}
Features FeatureExtractor::extract(const kernels::CooTensor&) const { no_torch(); }
Features FeatureExtractor::forward_backward(const PreparedPattern&) { no_torch(); }
std::int64_t FeatureExtractor::parameter_count() const { no_torch(); }

}  // namespace waco::learned
