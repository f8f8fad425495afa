#include "workload/error_category.h"

#include <c10/util/Exception.h>

namespace oomguard {

ErrorCategory CategorizeError(std::string_view message) {
  if (message.find("modified by an inplace operation") != std::string_view::npos) {
    return ErrorCategory::kInplaceSavedTensor;
  }
  if (message.find("leaf Variable that requires grad") != std::string_view::npos) return ErrorCategory::kInplaceLeaf;
  if (message.find("with Meta tensors") != std::string_view::npos ||
      message.find("Meta kernel") != std::string_view::npos) {
    return ErrorCategory::kMetaKernelMissing;
  }
  return ErrorCategory::kError;
}

std::string ErrorMessage(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

std::string DescribeError(const std::exception& e, const std::string& location) {
  const std::string message = ErrorMessage(e);
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return message;  // the OOM report says where
  const std::string where = location.empty() ? "" : " (" + location + ")";
  if (CategorizeError(message) == ErrorCategory::kMetaKernelMissing) {
    const size_t colon = message.find(": ");
    const std::string op = colon == std::string::npos ? "an operator" : message.substr(0, colon);
    return op + " has no Meta kernel" + where +
           ": LibTorch ships none and oomguard registers none. Add one to backends/meta_kernels.cpp, or run "
           "this scenario on cpu.";
  }
  return message + where;
}

VariantOutcome OutcomeOfException(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return VariantOutcome::Oom();
  return VariantOutcome::Error(CategorizeError(ErrorMessage(e)));
}

}  // namespace oomguard
