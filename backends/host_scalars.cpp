#include "backends/host_scalars.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/host_first_allocation.h"
#include "ops/op_stream.h"

namespace oomguard {
namespace {

// The ops whose cpu kernel wraps its Scalar argument in a 0-dim tensor and redispatches to the Tensor
// overload (at::native::mul_(Tensor&, const Scalar&) and the like): the wrapped number is the only
// thing they allocate before the nested op starts.
bool WrapsScalar(const at::RecordFunction& fn) {
  const std::optional<c10::OperatorName> op = fn.operator_name();
  if (!op || op->overload_name != "Scalar") return false;
  static constexpr std::string_view kOps[] = {"aten::add", "aten::add_", "aten::sub", "aten::sub_",
                                              "aten::mul", "aten::mul_", "aten::div", "aten::div_"};
  for (std::string_view name : kOps) {
    if (op->name == name) return true;
  }
  return false;
}

// The comparisons with a number (x > 0.1: a hand-written dropout's mask), whose structured kernel wraps
// the number first and then allocates its result itself, with no nested op to close a scope at.
bool ComparesWithScalar(const at::RecordFunction& fn) {
  const std::optional<c10::OperatorName> op = fn.operator_name();
  if (!op || op->overload_name != "Scalar") return false;
  static constexpr std::string_view kOps[] = {"aten::eq",  "aten::ne",  "aten::lt",  "aten::le",
                                              "aten::gt",  "aten::ge",  "aten::eq_", "aten::ne_",
                                              "aten::lt_", "aten::le_", "aten::gt_", "aten::ge_"};
  for (std::string_view name : kOps) {
    if (op->name == name) return true;
  }
  return false;
}

// The cast TensorIterator makes of a wrapped number to the op's dtype.
bool CastsWrappedNumber(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (name == nullptr || std::strcmp(name, "aten::_to_copy") != 0) return false;
  const auto inputs = fn.inputs();
  if (inputs.empty() || !inputs[0].isTensor()) return false;
  const at::Tensor& source = inputs[0].toTensor();
  return source.is_cpu() && source.unsafeGetTensorImpl()->is_wrapped_number();
}

// A number made into a tensor by a Python optimizer's step (Note [The Python optimizer's step counts]):
// torch.tensor's `aten::empty.memory_format` with no dimensions, on cpu or no device given.
bool MakesHostStepCount(const at::RecordFunction& fn) {
  const std::optional<c10::OperatorName> op = fn.operator_name();
  if (!op || op->name != "aten::empty" || op->overload_name != "memory_format") return false;
  const auto inputs = fn.inputs();
  if (inputs.size() < 4 || !inputs[0].isIntList() || !inputs[0].toIntList().empty()) return false;
  return inputs[3].isNone() || (inputs[3].isDevice() && inputs[3].toDevice().is_cpu());
}

thread_local bool t_python_caller = false;  // Note [Python's wrapped numbers]
std::atomic<int> g_watches{0};              // HostScalarCopies alive: the only ones that count operators
thread_local int t_python_op_depth = 0;     // operators running on the Python caller's thread
thread_local bool t_in_python_optimizer_step = false;
thread_local int t_step_op_depth = 0;  // operators running inside the Python optimizer's step

// A wrapping op's scope: it closes as soon as a nested op starts, since what that op allocates (the
// result) is device memory again.
thread_local std::optional<HostAllocationScope> t_until_nested;

// A cast's scope: the whole op, nested empty_strided and copy_ included. Lives in the op's context.
struct WholeOpScope final : at::ObserverContext {
  HostAllocationScope scope;
};
struct UntilNestedScope final : at::ObserverContext {};
// A comparison's scope: its first allocation, the wrapped number.
struct FirstAllocationScope final : at::ObserverContext {
  HostFirstAllocationScope scope;
};

}  // namespace

struct HostScalarCopies::Watch final : OpObserver {
  Watch() : subscription(this, {.op_starts = true, .op_ends = true, .inputs = true}) { ++g_watches; }
  ~Watch() override { --g_watches; }

  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override {
    t_until_nested.reset();
    if (t_python_caller && t_python_op_depth++ == 0) SetTinyAllocationsAreHost(false);
    if (t_in_python_optimizer_step && t_step_op_depth++ == 0 && MakesHostStepCount(fn)) {
      return std::make_unique<WholeOpScope>();
    }
    if (CastsWrappedNumber(fn)) return std::make_unique<WholeOpScope>();
    if (ComparesWithScalar(fn)) return std::make_unique<FirstAllocationScope>();
    if (!WrapsScalar(fn)) return nullptr;
    t_until_nested.emplace();
    return std::make_unique<UntilNestedScope>();
  }

  void OnOpEnd(const at::RecordFunction&, at::ObserverContext* context) override {
    if (t_python_caller && t_python_op_depth > 0 && --t_python_op_depth == 0) SetTinyAllocationsAreHost(true);
    if (t_in_python_optimizer_step && t_step_op_depth > 0) --t_step_op_depth;
    if (dynamic_cast<UntilNestedScope*>(context) != nullptr) t_until_nested.reset();
  }

  OpSubscription subscription;
};

HostScalarCopies::HostScalarCopies() : watch_(std::make_unique<Watch>()) {}

HostScalarCopies::~HostScalarCopies() {
  watch_.reset();
  t_until_nested.reset();
  SetInPythonOptimizerStep(false);
  SetPythonCallerThread(false);
}

void SetInPythonOptimizerStep(bool in_step) {
  t_in_python_optimizer_step = in_step;
  t_step_op_depth = 0;
}

void SetPythonCallerThread(bool on) {
  t_python_caller = on && g_watches.load() > 0;  // no operators counted on the other backends
  t_python_op_depth = 0;
  SetTinyAllocationsAreHost(t_python_caller);
}

}  // namespace oomguard
