#include "nn/net.h"

#include "base/check.h"

namespace oomguard {

at::Tensor Net::ForwardInputs(const std::vector<at::Tensor>& inputs, bool training) {
  OOMGUARD_CHECK(inputs.size() == 1) << "this net takes one input, got " << inputs.size();
  return Forward(inputs[0], training);
}

std::string Net::WhyNoSegments() const { return ""; }

// The defaults are a source without segments: callers ask segments() first.
std::string Net::segment_name(size_t i) const {
  OOMGUARD_CHECK(false) << "this net offers no segments (segment " << i << ")";
  return "";
}

std::vector<at::Tensor> Net::segment_parameters(size_t begin, size_t end) const {
  OOMGUARD_CHECK(false) << "this net offers no segments ([" << begin << ", " << end << "))";
  return {};
}

at::Tensor Net::ForwardSegments(at::Tensor x, size_t begin, size_t end, bool, const AfterSegment&) {
  OOMGUARD_CHECK(false) << "this net offers no segments ([" << begin << ", " << end << "))";
  return x;
}

}  // namespace oomguard
