#include "nn/meta_autocast.h"

#include <ATen/ATen.h>
#include <ATen/CachedTensorUtils.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/library.h>

#include <tuple>
#include <unordered_map>

#include "allocators/ledger.h"
#include "base/check.h"

// Note [Autocast on meta]
// at::autocast works through a dispatch key per device type (AutocastCPU, AutocastCUDA, ...) that a
// tensor carries when it is made for that backend. Meta has none, and AutocastCPU's kernels check that
// an argument is a cpu tensor before they cast it, so under at::autocast a meta run would cast
// nothing and save fp32 activations where the cpu run saves bf16. MetaAutocastScope puts a key of its
// own into the thread's included set: AutocastPrivateUse1, which no LibTorch kernel uses (no private
// backend is loaded in oomguard) and which sits, like every autocast key, above Autograd, so that the
// casts are recorded by autograd and the cast tensors are what backward saves. Its one boxed fallback
// looks the operator up in the table below, copied from AutocastCPU's registrations in the pinned
// torch (aten/src/ATen/autocast_mode.cpp), and casts as AutocastCPU's WrapFunction_ does:
// - an operator in the table: its floating-point meta arguments (not double) are cast to the policy's
//   type, with the autocast key excluded while the operator runs (its inner operators are not cast
//   again), and a lower-precision cast of an fp32 leaf that requires grad is cached until the
//   outermost scope exits, exactly as cached_cast caches weights;
// - any other operator passes below the key unchanged, and the operators it calls are dispatched
//   again (a composite such as einsum reaches bmm, which casts), as AutocastCPU's fallthrough does.
// tests/meta_autocast_test.cpp checks the table against the operators that have an AutocastCPU kernel,
// so an upgrade that changes the list fails there, and that cpu and meta allocate the same bytes.

namespace oomguard {
namespace {

constexpr c10::DispatchKey kMetaAutocastKey = c10::DispatchKey::AutocastPrivateUse1;

struct PolicyRow {
  const char* op;
  AutocastPolicy policy;
};

constexpr AutocastPolicy kLow = AutocastPolicy::kLowerPrecision;
constexpr AutocastPolicy kFp32 = AutocastPolicy::kFloat32;
constexpr AutocastPolicy kPromote = AutocastPolicy::kPromote;

// AutocastCPU's table in torch 2.11, in its order.
constexpr PolicyRow kCpuPolicies[] = {
    {"conv1d", kLow},
    {"conv1d.padding", kLow},
    {"conv2d", kLow},
    {"conv2d.padding", kLow},
    {"conv3d", kLow},
    {"conv3d.padding", kLow},
    {"bmm", kLow},
    {"mm", kLow},
    {"linalg_vecdot", kLow},
    {"baddbmm", kLow},
    {"addmm", kLow},
    {"_addmm_activation", kLow},
    {"addbmm", kLow},
    {"linear", kLow},
    {"_convolution.deprecated", kLow},
    {"matmul", kLow},
    {"conv_tbc", kLow},
    {"mkldnn_rnn_layer", kLow},
    {"conv_transpose1d", kLow},
    {"conv_transpose2d.input", kLow},
    {"conv_transpose3d.input", kLow},
    {"prelu", kLow},
    {"scaled_dot_product_attention", kLow},
    {"_native_multi_head_attention", kLow},
    {"avg_pool3d", kFp32},
    {"binary_cross_entropy", kFp32},
    {"grid_sampler", kFp32},
    {"polar", kFp32},
    {"prod", kFp32},
    {"prod.dim_int", kFp32},
    {"prod.dim_Dimname", kFp32},
    {"quantile", kFp32},
    {"quantile.scalar", kFp32},
    {"nanquantile", kFp32},
    {"nanquantile.scalar", kFp32},
    {"stft", kFp32},
    {"stft.center", kFp32},
    {"cdist", kFp32},
    {"grid_sampler_2d", kFp32},
    {"_grid_sampler_2d_cpu_fallback", kFp32},
    {"grid_sampler_3d", kFp32},
    {"trace", kFp32},
    {"view_as_complex", kFp32},
    {"cholesky", kFp32},
    {"cholesky_inverse", kFp32},
    {"cholesky_solve", kFp32},
    {"inverse", kFp32},
    {"lu_solve", kFp32},
    {"orgqr", kFp32},
    {"ormqr", kFp32},
    {"pinverse", kFp32},
    {"max_pool3d", kFp32},
    {"max_unpool2d", kFp32},
    {"max_unpool3d", kFp32},
    {"adaptive_avg_pool3d", kFp32},
    {"reflection_pad1d", kFp32},
    {"reflection_pad2d", kFp32},
    {"replication_pad1d", kFp32},
    {"replication_pad2d", kFp32},
    {"replication_pad3d", kFp32},
    {"mse_loss", kFp32},
    {"cosine_embedding_loss", kFp32},
    {"nll_loss", kFp32},
    {"nll_loss2d", kFp32},
    {"hinge_embedding_loss", kFp32},
    {"poisson_nll_loss", kFp32},
    {"smooth_l1_loss", kFp32},
    {"cross_entropy_loss", kFp32},
    {"l1_loss", kFp32},
    {"huber_loss", kFp32},
    {"margin_ranking_loss", kFp32},
    {"soft_margin_loss", kFp32},
    {"triplet_margin_loss", kFp32},
    {"multi_margin_loss", kFp32},
    {"ctc_loss.IntList", kFp32},
    {"ctc_loss.Tensor", kFp32},
    {"kl_div", kFp32},
    {"multilabel_margin_loss", kFp32},
    {"binary_cross_entropy_with_logits", kFp32},
    {"fft_fft", kFp32},
    {"fft_ifft", kFp32},
    {"fft_fft2", kFp32},
    {"fft_ifft2", kFp32},
    {"fft_fftn", kFp32},
    {"fft_ifftn", kFp32},
    {"fft_rfft", kFp32},
    {"fft_irfft", kFp32},
    {"fft_rfft2", kFp32},
    {"fft_irfft2", kFp32},
    {"fft_rfftn", kFp32},
    {"fft_irfftn", kFp32},
    {"fft_hfft", kFp32},
    {"fft_ihfft", kFp32},
    {"linalg_cond", kFp32},
    {"linalg_cond.p_str", kFp32},
    {"linalg_matrix_rank", kFp32},
    {"linalg_matrix_rank.tol_tensor", kFp32},
    {"linalg_matrix_rank.atol_rtol_tensor", kFp32},
    {"linalg_matrix_rank.atol_rtol_float", kFp32},
    {"linalg_solve", kFp32},
    {"linalg_cholesky", kFp32},
    {"linalg_svdvals", kFp32},
    {"linalg_eigvals", kFp32},
    {"linalg_eigvalsh", kFp32},
    {"linalg_inv", kFp32},
    {"linalg_householder_product", kFp32},
    {"linalg_tensorinv", kFp32},
    {"linalg_tensorsolve", kFp32},
    {"fake_quantize_per_tensor_affine", kFp32},
    {"geqrf", kFp32},
    {"_lu_with_info", kFp32},
    {"qr", kFp32},
    {"svd", kFp32},
    {"triangular_solve", kFp32},
    {"fractional_max_pool2d", kFp32},
    {"fractional_max_pool3d", kFp32},
    {"adaptive_max_pool3d", kFp32},
    {"multilabel_margin_loss_forward", kFp32},
    {"linalg_qr", kFp32},
    {"linalg_cholesky_ex", kFp32},
    {"linalg_svd", kFp32},
    {"linalg_eig", kFp32},
    {"linalg_eigh", kFp32},
    {"linalg_lstsq", kFp32},
    {"linalg_inv_ex", kFp32},
    {"stack", kPromote},
    {"cat", kPromote},
    {"index_copy", kPromote},
    {"index_copy.dimname", kPromote},
};

c10::OperatorName OperatorNameOf(const std::string& op) {
  const size_t dot = op.find('.');
  return dot == std::string::npos ? c10::OperatorName("aten::" + op, "")
                                  : c10::OperatorName("aten::" + op.substr(0, dot), op.substr(dot + 1));
}

const std::unordered_map<c10::OperatorName, AutocastPolicy>& Policies() {
  static const auto* policies = [] {
    auto* map = new std::unordered_map<c10::OperatorName, AutocastPolicy>();
    for (const PolicyRow& row : kCpuPolicies) map->emplace(OperatorNameOf(row.op), row.policy);
    return map;
  }();
  return *policies;
}

// The cache of lower-precision casts of fp32 leaves (weights), keyed like ATen's by the source's
// TensorImpl, which the weak reference keeps from being reused while the entry lives.
using WeakRef = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
struct ThreadState {
  std::optional<at::ScalarType> dtype;  // the lower-precision type; none outside every scope
  int nesting = 0;
  std::unordered_map<c10::TensorImpl*, std::tuple<WeakRef, at::Tensor>> cache;
};
thread_local ThreadState state;

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

// The widest floating type among the eligible arguments, starting from the lower-precision type.
at::ScalarType PromotedType(const torch::jit::Stack& stack, size_t first) {
  at::ScalarType type = *state.dtype;
  const auto widen = [&](const at::Tensor& t) {
    if (Eligible(t)) type = at::promote_types(type, t.scalar_type());
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

void CastArguments(const c10::OperatorHandle& op, AutocastPolicy policy, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  const at::ScalarType to = policy == AutocastPolicy::kLowerPrecision ? *state.dtype
                            : policy == AutocastPolicy::kFloat32      ? at::kFloat
                                                                      : PromotedType(*stack, first);
  for (size_t i = first; i < stack->size(); ++i) {
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

void MetaAutocastFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const c10::DispatchKeySet below = keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kMetaAutocastKey);
  const auto it = state.dtype ? Policies().find(op.operator_name()) : Policies().end();
  if (it == Policies().end()) {
    op.redispatchBoxed(below, stack);
    return;
  }
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kMetaAutocastKey);
  CastArguments(op, it->second, stack);
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

std::optional<AutocastPolicy> MetaAutocastPolicyOf(const std::string& op) {
  const auto it = Policies().find(OperatorNameOf(op));
  if (it == Policies().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> MetaAutocastOperators() {
  std::vector<std::string> ops;
  for (const PolicyRow& row : kCpuPolicies) ops.push_back(std::string("aten::") + row.op);
  return ops;
}

MetaAutocastScope::MetaAutocastScope(at::ScalarType dtype)
    : previous_keys_(c10::impl::tls_local_dispatch_key_set()), previous_dtype_(state.dtype) {
  OOMGUARD_CHECK(at::isFloatingType(dtype)) << "autocast to " << dtype << ", not a floating type";
  RegisterFallback();
  state.dtype = dtype;
  ++state.nesting;
  c10::impl::tls_set_dispatch_key_included(kMetaAutocastKey, true);
  c10::impl::tls_set_dispatch_key_excluded(kMetaAutocastKey, false);
}

MetaAutocastScope::~MetaAutocastScope() {
  if (--state.nesting == 0) {
    Ledger::ReleaseBatch one_event;  // Note [Autocast cache frees] (nn/autocast.cpp)
    state.cache.clear();
  }
  state.dtype = previous_dtype_;
  c10::impl::tls_set_dispatch_key_included(kMetaAutocastKey, previous_keys_.included_.has(kMetaAutocastKey));
  c10::impl::tls_set_dispatch_key_excluded(kMetaAutocastKey, previous_keys_.excluded_.has(kMetaAutocastKey));
}

std::optional<at::ScalarType> MetaAutocastDtype() { return state.dtype; }

}  // namespace oomguard
