// Sorts the errors a training step can raise into the outcomes scenario files expect (model/outcome.h).
//
//   m.outcome = OutcomeOfException(e);  // VariantOutcome::Oom(), or Error(ErrorCategory::kInplaceLeaf), ...
//   m.error = DescribeError(e, trace.Locate());
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "model/outcome.h"

namespace oomguard {

// Oom for c10::OutOfMemoryError; else an error of category kInplaceSavedTensor (autograd's
// version-counter check), kInplaceLeaf (in-place op on a leaf that requires grad), kMetaKernelMissing
// (an op with no Meta kernel), or kError (anything else).
VariantOutcome OutcomeOfException(const std::exception& e);

// Whether `e` is the TorchScript interpreter's report of an op that failed inside a module (Note
// [TorchScript interpreter errors]): it may arrive as a plain std::runtime_error, an OOM included.
bool IsScriptInterpreterError(const std::exception& e);

// The category from an error message alone (what OutcomeOfException gives a non-OOM error).
ErrorCategory CategorizeError(std::string_view message);

// The message without c10's backtrace.
std::string ErrorMessage(const std::exception& e);

// The message a measurement records: ErrorMessage plus where it was raised (LayerTrace::Locate; may be
// empty). A missing Meta kernel becomes one sentence naming the op, the layer and the way out, in place
// of PyTorch's advice about torch.compile, which does not apply to LibTorch.
std::string DescribeError(const std::exception& e, const std::string& location);

}  // namespace oomguard
