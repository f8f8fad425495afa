// Sorts the errors a training step can raise into the categories scenario files expect.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace oomguard {

// "oom" for c10::OutOfMemoryError; else "error:<category>" with category one of
// inplace-saved-tensor (autograd's version-counter check), inplace-leaf (in-place op on a leaf that
// requires grad), meta-kernel-missing (an op with no Meta kernel), or error (anything else).
std::string OutcomeOfException(const std::exception& e);

// The category from an error message alone (OutcomeOfException without the "error:" prefix).
std::string ErrorCategory(std::string_view message);

// The message without c10's backtrace.
std::string ErrorMessage(const std::exception& e);

// The message a measurement records: ErrorMessage plus where it was raised (LayerTrace::Locate; may be
// empty). A missing Meta kernel becomes one sentence naming the op, the layer and the way out, in place
// of PyTorch's advice about torch.compile, which does not apply to LibTorch.
std::string DescribeError(const std::exception& e, const std::string& location);

}  // namespace oomguard
