#include "nn/autocast/meta_autocast.h"

#include <ATen/ATen.h>
#include <ATen/CachedTensorUtils.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/library.h>

#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "allocators/ledger.h"
#include "base/check.h"
#include "nn/autocast/autocast_tables.h"

// Note [Autocast on meta]
// at::autocast works through a dispatch key per device type (AutocastCPU, AutocastCUDA, ...) that a
// tensor carries when it is made for that backend. Meta has none, and AutocastCPU's kernels check that
// an argument is a cpu tensor before they cast it, so under at::autocast a meta run would cast
// nothing and save fp32 activations where the cpu run saves bf16. MetaAutocastScope puts a key of its
// own into the thread's included set: AutocastPrivateUse1, which no LibTorch kernel uses (no private
// backend is loaded in oomguard) and which sits, like every autocast key, above Autograd, so that the
// casts are recorded by autograd and the cast tensors are what backward saves. Its one boxed fallback
// looks the operator up in a table copied from AutocastCPU's registrations in the pinned torch
// (aten/src/ATen/autocast_mode.cpp; nn/autocast/autocast_table_cpu.cpp), and casts as AutocastCPU's
// WrapFunction_ does:
// - an operator in the table: its floating-point meta arguments (not double) are cast to the policy's
//   type, with the autocast key excluded while the operator runs (its inner operators are not cast
//   again), and a lower-precision cast of an fp32 leaf that requires grad is cached until the
//   outermost scope exits, exactly as cached_cast caches weights;
// - any other operator passes below the key unchanged, and the operators it calls are dispatched
//   again (a composite such as einsum reaches bmm, which casts), as AutocastCPU's fallthrough does.
// tests/autocast_test.cpp checks the table against the operators that have an AutocastCPU kernel,
// so an upgrade that changes the list fails there, and that cpu and meta allocate the same bytes.

// Note [AutocastCUDA on meta]
// On a GPU, torch.autocast("cuda") casts by AutocastCUDA's table, not the cpu's; meta with a card's
// kernels (`--kernels cuda`, backends/meta/kernel_target.h) must too, or a mixed-precision number on
// the card is the cpu's without a word. So a scope says whose autocast it mirrors (the workload passes
// c10::kCUDA when the kernel target is a card's) and the fallback then casts by AutocastCUDA's table
// (nn/autocast/autocast_table_cuda.cpp) as its wrappers do, which differ from the cpu's:
// - the lists: layer_norm, group_norm, exp, log, pow, rsqrt, softplus, logsumexp, upsampling and the
//   losses but cross entropy are fp32 on CUDA; cross_entropy_loss, the padding convolutions and most
//   linalg and fft ops are listed on cpu only. cross_entropy, not listed, reaches log_softmax
//   with its input's dtype given, which the policy keeps (bf16 log-probabilities, saved), and then
//   nll_loss, which casts them to fp32 (saved too): on cpu one fp32 tensor is saved instead.
// - fp32_set_opt_dtype (softmax, log_softmax, sum, cumsum, cumprod, prod, the vector and matrix norms):
//   nothing is cast; an unset `dtype` becomes float when the first argument is eligible, so the op
//   returns fp32. softmax and log_softmax then copy their input to fp32 inside (SoftMax.cpp), but for a
//   half CUDA input, which runs _softmax(input, dim, half_to_float=true) without the copy: meta is no
//   CUDA tensor, so the fallback takes that branch itself.
// - fp32_append_dtype (norm without a dtype): the overload with a dtype, float when the input is eligible.
// - binary_cross_entropy is refused, as binary_cross_entropy_banned refuses it; so is _cudnn_rnn (its
//   wrapper reflattens fp16 weights), which meta never reaches: an LSTM on meta runs no cuDNN.
// - the dtype: fp16 is CUDA's default and bf16 is allowed (torch.autocast refuses bf16 only where
//   torch.cuda.is_bf16_supported() is false; with emulation it holds before sm_80 too). oomguard
//   always names the dtype.
// cached_cast's weight cache and promote's rule (prioritize) are one function for every device.
// tests/card_autocast_test.cpp checks the table against the operators with an AutocastCUDA kernel and
// the bytes each difference the catalog's models hit costs; Python.CardAutocastMatchesFakeCuda checks
// dtypes and saved tensors against PyTorch's own AutocastCUDA over fake CUDA tensors.

namespace oomguard {
namespace {

constexpr c10::DispatchKey kMetaAutocastKey = c10::DispatchKey::AutocastPrivateUse1;

c10::OperatorName OperatorNameOf(const std::string& op) {
  const size_t dot = op.find('.');
  return dot == std::string::npos ? c10::OperatorName("aten::" + op, "")
                                  : c10::OperatorName("aten::" + op.substr(0, dot), op.substr(dot + 1));
}

using Table = std::unordered_map<c10::OperatorName, AutocastPolicy>;

const Table* MakeTable(std::span<const AutocastRow> rows) {
  auto* table = new Table();
  for (const AutocastRow& row : rows) table->emplace(OperatorNameOf(row.op), row.policy);
  return table;
}

std::span<const AutocastRow> RowsOf(c10::DeviceType mirrors) {
  OOMGUARD_CHECK(mirrors == c10::kCPU || mirrors == c10::kCUDA)
      << "meta autocast mirrors " << mirrors << "'s autocast: cpu or cuda only";
  return mirrors == c10::kCUDA ? AutocastCudaTable() : AutocastCpuTable();
}

const Table& TableOf(c10::DeviceType mirrors) {
  static const Table* cpu = MakeTable(AutocastCpuTable());
  static const Table* cuda = MakeTable(AutocastCudaTable());
  return mirrors == c10::kCUDA ? *cuda : *cpu;
}

// The cache of lower-precision casts of fp32 leaves (weights), keyed like ATen's by the source's
// TensorImpl, which the weak reference keeps from being reused while the entry lives.
using WeakRef = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
struct ThreadState {
  std::optional<at::ScalarType> dtype;  // the lower-precision type; none outside every scope
  c10::DeviceType mirrors = c10::kCPU;  // whose table the innermost scope casts by
  int nesting = 0;
  std::unordered_map<c10::TensorImpl*, std::tuple<WeakRef, at::Tensor>> cache;
};
thread_local ThreadState state;

// at::autocast::is_eligible, a meta tensor standing for the device's own.
bool Eligible(const at::Tensor& t) {
  return t.defined() && t.is_meta() && t.is_floating_point() && t.scalar_type() != at::kDouble;
}

// at::autocast::cached_cast for meta tensors.
at::Tensor CachedCast(at::ScalarType to, const at::Tensor& arg) {
  if (!Eligible(arg) || arg.scalar_type() == to) return arg;
  const bool can_cache = to == *state.dtype && arg.scalar_type() == at::kFloat && arg.requires_grad() &&
                         arg.is_leaf() && !arg.is_view() && at::autocast::is_autocast_cache_enabled() &&
                         !at::caching::is_cached_tensor(arg);
  if (!can_cache) return arg.to(to);
  auto it = state.cache.find(arg.unsafeGetTensorImpl());
  if (it != state.cache.end()) return std::get<1>(it->second);
  at::Tensor cast = arg.to(to);
  state.cache.emplace(arg.unsafeGetTensorImpl(), std::make_tuple(WeakRef(arg.getIntrusivePtr()), cast));
  return cast;
}

// at::autocast::prioritize over the arguments, from the lower-precision type: float wins, double is
// ignored, and a lower type other than the autocast one is an error, as in ATen.
at::ScalarType PromotedType(const torch::jit::Stack& stack, size_t first) {
  const at::ScalarType lower = *state.dtype;
  at::ScalarType type = lower;
  const auto widen = [&](const at::Tensor& t) {
    if (!Eligible(t)) return;
    if (type == at::kFloat || t.scalar_type() == at::kFloat) {
      type = at::kFloat;
    } else {
      TORCH_CHECK(t.scalar_type() == lower, "Unexpected floating ScalarType in at::autocast::prioritize");
    }
  };
  for (size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) widen(v.toTensor());
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) widen(t);
    }
  }
  return type;
}

void CastArguments(AutocastPolicy policy, torch::jit::Stack* stack, size_t first) {
  const at::ScalarType to = policy == AutocastPolicy::kLowerPrecision ? *state.dtype
                            : policy == AutocastPolicy::kFloat32      ? at::kFloat
                                                                      : PromotedType(*stack, first);
  // Note [Autocast casts the last argument first]: ATen's WrapFunction_ calls the kernel as
  // (*F)(cached_cast(to_type, args, device_type)...), and GCC, which builds PyTorch's wheels, evaluates a
  // call's arguments right to left: a linear's bias is cast, then its weight, then its input (the
  // profiler's and the snapshot's allocation order on cpu). Cast in ATen's order, the backward's ToCopy
  // nodes run in another order too, and a bf16 step's backward peak differed from cpu's (a Linear(64, 128):
  // 256 bytes; a 1x1 convolution with a bias: 64,640 of 150,856).
  for (size_t i = stack->size(); i-- > first;) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = CachedCast(to, v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> cast;
      for (const at::Tensor& t : v.toTensorList()) cast.push_back(CachedCast(to, t));
      v = std::move(cast);
    }
  }
}

bool FirstArgumentEligible(const torch::jit::Stack& stack, size_t first) {
  return stack[first].isTensor() && Eligible(stack[first].toTensor());
}

// fp32_set_opt_dtype: an unset `dtype` argument becomes float when the first argument is eligible.
void SetOptDtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t first) {
  if (!FirstArgumentEligible(*stack, first)) return;
  const std::vector<c10::Argument>& arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "dtype" && (*stack)[first + i].isNone()) (*stack)[first + i] = at::kFloat;
  }
}

// softmax.int and log_softmax.int of a half CUDA input asked for float (SoftMax.cpp): _softmax with
// half_to_float, no fp32 copy of the input (Note [AutocastCUDA on meta]). False: not that case.
bool HalfToFloatSoftmax(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t first) {
  const std::string& name = op.schema().name();
  if ((name != "aten::softmax" && name != "aten::log_softmax") || op.schema().overload_name() != "int") return false;
  const at::Tensor input = (*stack)[first].toTensor();
  const c10::IValue& dtype = (*stack)[first + 2];
  if (!input.is_meta() || input.scalar_type() != at::kHalf || dtype.isNone() || dtype.toScalarType() != at::kFloat)
    return false;
  const int64_t dim = (*stack)[first + 1].toInt();
  at::Tensor out = name == "aten::softmax" ? at::_softmax(input, dim, true) : at::_log_softmax(input, dim, true);
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(out));
  return true;
}

// fp32_append_dtype: norm without a dtype runs the overload with one, float for an eligible input.
void NormWithDtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t first) {
  const at::Tensor self = (*stack)[first].toTensor();
  const at::ScalarType to = Eligible(self) ? at::kFloat : self.scalar_type();
  const std::string& overload = op.schema().overload_name();
  at::Tensor out;
  if (overload == "Scalar") {
    out = at::norm(self, std::optional<at::Scalar>((*stack)[first + 1].toScalar()), to);
  } else {
    TORCH_CHECK(overload == "ScalarOpt_dim", "aten::norm.", overload,
                " under autocast on meta: named tensors are not modelled");
    const c10::IValue& p = (*stack)[first + 1];
    const std::optional<at::Scalar> order = p.isNone() ? std::nullopt : std::optional<at::Scalar>(p.toScalar());
    out = at::norm(self, order, (*stack)[first + 2].toIntVector(), (*stack)[first + 3].toBool(), to);
  }
  torch::jit::drop(*stack, op.schema().arguments().size());
  torch::jit::push(*stack, std::move(out));
}

void MetaAutocastFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const c10::DispatchKeySet below = keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kMetaAutocastKey);
  const Table& table = TableOf(state.mirrors);
  const auto it = state.dtype ? table.find(op.operator_name()) : table.end();
  if (it == table.end()) {
    op.redispatchBoxed(below, stack);
    return;
  }
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kMetaAutocastKey);
  const size_t first = stack->size() - op.schema().arguments().size();
  switch (it->second) {
    case AutocastPolicy::kLowerPrecision:
    case AutocastPolicy::kFloat32:
    case AutocastPolicy::kPromote:
      CastArguments(it->second, stack, first);
      break;
    case AutocastPolicy::kFloat32SetOptDtype:
      SetOptDtype(op, stack, first);
      if (HalfToFloatSoftmax(op, stack, first)) return;
      break;
    case AutocastPolicy::kFloat32AppendDtype:
      NormWithDtype(op, stack, first);
      return;
    case AutocastPolicy::kBanned:
      TORCH_CHECK(false, op.operator_name(),
                  " is unsafe to autocast on CUDA (AutocastCUDA refuses it: a sigmoid before "
                  "it underflows in lower precision); use binary_cross_entropy_with_logits");
    case AutocastPolicy::kCudnnRnn:
      TORCH_CHECK(false, op.operator_name(),
                  " under autocast (fp16 weights reflattened by cuDNN's wrapper) is not "
                  "modelled on meta");
  }
  op.redispatchBoxed(below, stack);
}

void RegisterFallback() {
  // Function-local, as RegisterMetaKernels (a static initializer in a static library may be dropped).
  static torch::Library* library = [] {
    auto* lib = new torch::Library(torch::Library::IMPL, "_", kMetaAutocastKey, __FILE__, __LINE__);
    lib->fallback(torch::CppFunction::makeFromBoxedFunction<&MetaAutocastFallback>());
    return lib;
  }();
  (void)library;
}

}  // namespace

std::optional<AutocastPolicy> MetaAutocastPolicyOf(c10::DeviceType mirrors, const std::string& op) {
  RowsOf(mirrors);  // checks mirrors
  const Table& table = TableOf(mirrors);
  const auto it = table.find(OperatorNameOf(op));
  if (it == table.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> MetaAutocastOperators(c10::DeviceType mirrors) {
  std::vector<std::string> ops;
  for (const AutocastRow& row : RowsOf(mirrors)) ops.push_back(std::string("aten::") + row.op);
  return ops;
}

MetaAutocastScope::MetaAutocastScope(at::ScalarType dtype, c10::DeviceType mirrors)
    : previous_keys_(c10::impl::tls_local_dispatch_key_set()),
      previous_dtype_(state.dtype),
      previous_mirrors_(state.mirrors) {
  OOMGUARD_CHECK(at::isFloatingType(dtype)) << "autocast to " << dtype << ", not a floating type";
  RowsOf(mirrors);  // checks mirrors
  RegisterFallback();
  state.dtype = dtype;
  state.mirrors = mirrors;
  ++state.nesting;
  c10::impl::tls_set_dispatch_key_included(kMetaAutocastKey, true);
  c10::impl::tls_set_dispatch_key_excluded(kMetaAutocastKey, false);
}

MetaAutocastScope::~MetaAutocastScope() {
  if (--state.nesting == 0) {
    Ledger::ReleaseBatch one_event;  // Note [Autocast cache frees] (nn/autocast/autocast.cpp)
    state.cache.clear();
  }
  state.dtype = previous_dtype_;
  state.mirrors = previous_mirrors_;
  c10::impl::tls_set_dispatch_key_included(kMetaAutocastKey, previous_keys_.included_.has(kMetaAutocastKey));
  c10::impl::tls_set_dispatch_key_excluded(kMetaAutocastKey, previous_keys_.excluded_.has(kMetaAutocastKey));
}

std::optional<at::ScalarType> MetaAutocastDtype() { return state.dtype; }

c10::DeviceType MetaAutocastMirrors() { return state.mirrors; }

}  // namespace oomguard
