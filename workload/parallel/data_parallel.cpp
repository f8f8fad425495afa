#include "workload/parallel/data_parallel.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <optional>
#include <torch/csrc/distributed/c10d/FakeProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <utility>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/meta_tracking_allocator.h"
#include "base/check.h"
#include "workload/parallel/data_parallel_state.h"
#include "workload/parallel/rank_group.h"

namespace oomguard {
namespace {

constexpr int64_t kDdpFirstBucketBytes = 1024 * 1024;  // dist._DEFAULT_FIRST_BUCKET_BYTES
constexpr double kDdpDefaultBucketCapMb = 25;

// The parameters in reverse order (their gradients' order of readiness), a bucket closed once its bytes
// reach its limit: limits[i] for the i-th bucket, the last for the rest. c10d's own
// compute_bucket_assignment_by_size, called as the Reducer's rebuild_buckets calls it.
std::vector<std::vector<size_t>> AssignBuckets(const std::vector<at::Tensor>& params,
                                               const std::vector<size_t>& limits) {
  std::vector<at::Tensor> ready;  // as the Reducer's rebuilt_params_: the tensors in that order, and
  std::vector<int64_t> indices;   // rebuilt_param_indices_: their indices among the parameters
  for (size_t k = params.size(); k-- > 0;) {
    ready.push_back(params[k]);
    indices.push_back(static_cast<int64_t>(k));
  }
  return std::get<0>(c10d::compute_bucket_assignment_by_size(ready, limits, {}, indices));
}

// The Reducer's communication through the rank's group (workload/parallel/rank_group.h: FakeProcessGroup, or
// gloo for real ranks on cpu). Its default hook reads the all-reduce's future value, which FakeWork
// leaves None ("expected the hook result is either a Tensor or a TensorList found None", comm.cpp's
// parseCppCommHookResult), and it reaches the group through the dispatcher's
// c10d::allreduce_, which has no Meta kernel in a C++ process (Python registers one). This hook averages
// the bucket in place, all-reduces it on the rank's backend itself, and returns it, as DDP's
// allreduce_hook returns the reduced bucket.
class FakeAllReduceHook final : public c10d::CommHookInterface {
 public:
  explicit FakeAllReduceHook(c10::intrusive_ptr<c10d::Backend> group) : group_(std::move(group)) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    std::vector<at::Tensor> tensors = {bucket.getBufferRef()};
    tensors[0].div_(static_cast<double>(group_->getSize()));
    group_->allreduce(tensors)->wait();
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future->markCompleted(c10::IValue(tensors));
    return future;
  }
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensorVector()[0]; }

 private:
  c10::intrusive_ptr<c10d::Backend> group_;
};

// Runs after AccumulateGrad stored a parameter's gradient (the hook Python's
// register_post_accumulate_grad_hook installs; DDP's Reducer uses the same point).
class GradReadyHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  GradReadyHook(DataParallel::State* state, size_t index) : state_(state), index_(index) {}
  void operator()(const torch::autograd::Variable& /*tensor*/) override { state_->GradReady(index_); }

 private:
  DataParallel::State* state_;
  size_t index_;
};

}  // namespace

void DataParallel::State::GradReady(size_t index) {
  at::NoGradGuard no_grad;
  ZeroBucket& bucket = buckets[where[index]];
  OOMGUARD_CHECK(bucket.pending > 0);
  if (spec.strategy == "zero2") {  // the gradient into the bucket's staging, and freed
    if (!bucket.staging.defined()) bucket.staging = at::empty({bucket.numel}, params[index].options());
    int64_t at = 0;
    for (size_t k : bucket.params) {
      if (k == index) break;
      at += params[k].numel();
    }
    bucket.staging.narrow(0, at, params[index].numel()).copy_(params[index].grad().reshape(-1));
    params[index].mutable_grad().reset();
  }
  if (--bucket.pending == 0 && spec.strategy == "zero2") ReduceToOwners(bucket);
}

// zero2: a full bucket's parts each reduced to the rank that owns it, the whole gradient of each
// parameter the slice crosses kept (Note [Gradients between backward and step]), the staging freed.
void DataParallel::State::ReduceToOwners(ZeroBucket& bucket) {
  const at::Tensor staging = std::move(bucket.staging);
  bucket.staging = at::Tensor();
  int64_t at = 0;
  for (size_t k : bucket.params) {
    const int64_t n = params[k].numel();
    for (int64_t owner = 0; owner < spec.world; ++owner) {
      const int64_t lo = std::max(offsets[k], owner * shard), hi = std::min(offsets[k] + n, (owner + 1) * shard);
      if (lo >= hi) continue;
      std::vector<at::Tensor> part = {staging.narrow(0, at + lo - offsets[k], hi - lo)};
      c10d::ReduceOptions options;
      options.rootRank = owner;
      group->reduce(part, options)->wait();
    }
    if (InSlice(k)) KeepInPartition(k, staging.narrow(0, at, n));
    at += n;
  }
}

void DataParallel::State::KeepInPartition(size_t param, const at::Tensor& grad) {
  const size_t i = static_cast<size_t>(piece_of[param]);
  if (!grads_in_partition.defined()) {
    const int64_t total = slots.back() + params[pieces.back().param].numel();
    grads_in_partition = at::zeros({total}, flat.options());
  }
  grads_in_partition.narrow(0, slots[i], params[param].numel()).add_(grad);
}

at::Tensor DataParallel::State::PieceGradient(size_t i) const {
  const Piece& piece = pieces[i];
  const at::Tensor whole = grads_in_partition.defined()
                               ? grads_in_partition.narrow(0, slots[i], params[piece.param].numel())
                               : at::zeros({params[piece.param].numel()}, flat.options());
  return whole.narrow(0, piece.begin, piece.length);
}

DataParallel::DataParallel(const ParallelSpec& spec, std::vector<at::Tensor> parameters)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.spec = spec;
  s.params = std::move(parameters);
  s.group = MakeRankGroup(spec, s.params.empty() ? c10::kCPU : s.params.front().device().type());
  const int64_t cap = static_cast<int64_t>(spec.bucket_cap_mb * 1024 * 1024);
  if (s.params.empty()) return;
  const at::TensorOptions options = s.params.front().options();
  if (s.zero()) {
    at::NoGradGuard no_grad;
    int64_t total = 0;
    for (const at::Tensor& p : s.params) {
      s.offsets.push_back(total);
      total += p.numel();
    }
    const int64_t align = 2 * spec.world;
    const int64_t padded = (total + align - 1) / align * align;
    s.numel = total;
    s.shard = padded / spec.world;
    // Note [ZeRO flattens from host copies]: DeepSpeed's stage 1 and 2 (stage_1_and_2.py's __init__)
    // moves each parameter to the host first (param.cpu_data = param.data.cpu(); param.data =
    // torch.empty(1).to(device)), flattens the host copies and moves the flat buffer to the device, so
    // the device never holds the parameters twice: its setup peak is the flat buffer and a 4-byte
    // placeholder per parameter. The copies are host memory here too (left out on cpu, uncounted on
    // meta), and the placeholders are freed as the parameters become the flat buffer's views.
    std::vector<at::Tensor> host_copies;
    {
      std::optional<HostAllocationScope> host_cpu;
      std::optional<UncountedMetaScope> host_meta;
      if (options.device().is_meta()) host_meta.emplace(); else host_cpu.emplace();
      for (const at::Tensor& p : s.params) host_copies.push_back(p.clone());
    }
    for (at::Tensor& p : s.params) p.set_data(at::empty({1}, options.dtype(at::kFloat)));
    s.flat = at::zeros({padded}, options);
    // Putting the values back is the simulation's, not a transfer of the step's: on cpu a copy from a
    // host block would count as one (workload/transfer_counter.h), on meta nothing is counted.
    const at::RecordFunctionGuard unobserved(/*is_enabled=*/false);
    for (size_t k = 0; k < s.params.size(); ++k) {
      at::Tensor view = s.flat.narrow(0, s.offsets[k], host_copies[k].numel());
      view.copy_(host_copies[k].reshape(-1));
      s.params[k].set_data(view.view(host_copies[k].sizes()));
      host_copies[k].reset();
    }
    s.piece_of.assign(s.params.size(), -1);
    int64_t slot = 0;
    for (size_t k = 0; k < s.params.size(); ++k) {
      const int64_t lo = std::max(s.offsets[k], s.owned_begin());
      const int64_t hi = std::min(s.offsets[k] + s.params[k].numel(), s.owned_begin() + s.shard);
      if (lo >= hi) continue;
      s.piece_of[k] = static_cast<int>(s.pieces.size());
      s.pieces.push_back({k, lo - s.offsets[k], hi - lo});
      s.slots.push_back(slot);
      slot += s.params[k].numel();
      s.optimized.push_back(s.flat.narrow(0, lo, hi - lo));
    }
    for (std::vector<size_t>& indices : AssignBuckets(s.params, {static_cast<size_t>(cap)})) {
      ZeroBucket bucket;
      for (size_t k : indices) bucket.numel += s.params[k].numel();
      bucket.params = std::move(indices);
      s.buckets.push_back(std::move(bucket));
    }
    s.where.resize(s.params.size());
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      for (size_t k : s.buckets[b].params) s.where[k] = b;
    }
    for (size_t k = 0; k < s.params.size(); ++k) {
      torch::autograd::impl::set_post_acc_grad_hooks(s.params[k], std::make_unique<GradReadyHook>(&s, k));
    }
  } else {
    s.optimized = s.params;
    // DistributedDataParallel's Reducer over a ProcessGroup whose backend, for the parameters' device
    // and for the host (where the Reducer keeps its bookkeeping), is the fake group.
    auto process_group =
        c10::make_intrusive<c10d::ProcessGroup>(static_cast<int>(spec.rank), static_cast<int>(spec.world));
    process_group->setBackend(options.device().type(), c10d::ProcessGroup::CUSTOM, s.group);
    if (options.device().type() != c10::kCPU) {
      process_group->setBackend(c10::kCPU, c10d::ProcessGroup::CUSTOM, s.group);
    }
    process_group->setDefaultBackend(c10d::ProcessGroup::CUSTOM);
    const int64_t first = spec.bucket_cap_mb == kDdpDefaultBucketCapMb ? kDdpFirstBucketBytes : cap;
    s.reducer = std::make_unique<c10d::Reducer>(
        s.params, AssignBuckets(s.params, {static_cast<size_t>(first), static_cast<size_t>(cap)}), process_group,
        std::vector<bool>(s.params.size(), false), cap, /*find_unused_parameters=*/false, spec.gradient_as_bucket_view,
        std::unordered_map<size_t, std::string>(), first,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, std::vector<int64_t>());
    s.reducer->register_comm_hook(std::make_unique<FakeAllReduceHook>(s.group));
  }
}

DataParallel::~DataParallel() {
  if (!state_->zero()) return;  // the Reducer removes its own hooks
  for (const at::Tensor& p : state_->params) torch::autograd::impl::post_acc_grad_hooks(p).reset();
}

const std::vector<at::Tensor>& DataParallel::OptimizerParameters() const { return state_->optimized; }

FlatPartition* DataParallel::FlatPartitionForMasters() {
  State& s = *state_;
  if (!s.zero() || !s.flat.defined()) return nullptr;
  if (!s.lent) s.lent = MakeZeroPartition(&s);
  return s.lent.get();
}

void DataParallel::BeforeBackward() {
  if (state_->reducer) {  // what DDP's forward does around the module's forward
    state_->reducer->prepare_for_forward();
    state_->reducer->prepare_for_backward({});
  }
  for (ZeroBucket& bucket : state_->buckets) bucket.pending = bucket.params.size();
}

// Note [Gradients between backward and step], data_parallel.h.
void DataParallel::AfterBackward() {
  State& s = *state_;
  at::NoGradGuard no_grad;
  if (s.reducer) return;             // its finalize_backward copied each bucket back into the gradients
  if (s.spec.strategy == "zero1") {  // reduce_gradients: each gradient all-reduced, the slice's kept
    for (size_t k = 0; k < s.params.size(); ++k) {
      std::vector<at::Tensor> tensors = {s.params[k].grad()};
      if (!tensors[0].defined()) continue;
      s.group->allreduce(tensors)->wait();
      if (s.InSlice(k)) s.KeepInPartition(k, tensors[0].reshape(-1));
      s.params[k].mutable_grad().reset();
    }
  }
  if (s.padding() > 0 && !s.grad_padding.defined()) s.grad_padding = at::zeros({s.padding()}, s.flat.options());
  if (s.lent || !s.grads_in_partition.defined()) return;  // a master steps the partition itself
  for (size_t i = 0; i < s.pieces.size(); ++i) s.optimized[i].mutable_grad() = s.PieceGradient(i);
}

void DataParallel::AfterStep() {
  State& s = *state_;
  if (!s.zero() || !s.flat.defined()) return;
  at::NoGradGuard no_grad;
  at::Tensor slice = s.flat.narrow(0, s.owned_begin(), s.shard);
  s.group->_allgather_base(s.flat, slice)->wait();
}

void DataParallel::ZeroGrad(bool to_none) {
  State& s = *state_;
  for (at::Tensor& t : s.optimized) {
    if (s.zero()) t.mutable_grad().reset();  // views of grads_in_partition
  }
  for (at::Tensor p : s.params) {
    if (!p.grad().defined()) continue;
    if (to_none) {
      p.mutable_grad().reset();
    } else {
      p.mutable_grad().zero_();
    }
  }
  for (at::Tensor* own : {&s.grads_in_partition, &s.grad_padding}) {
    if (!own->defined()) continue;
    if (to_none) {
      own->reset();
    } else {
      own->zero_();
    }
  }
}

int64_t DataParallel::ParameterBytes() const {
  const State& s = *state_;
  if (s.flat.defined()) return static_cast<int64_t>(s.flat.nbytes());
  int64_t bytes = 0;
  for (const at::Tensor& p : s.params) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

namespace {

// The gradients the rank holds beyond the model's: the slice's whole gradients, the padding's zeros.
int64_t OwnGradientBytes(const DataParallel::State& s) {
  int64_t bytes = 0;
  for (const at::Tensor* t : {&s.grads_in_partition, &s.grad_padding}) {
    bytes += t->defined() ? static_cast<int64_t>(t->nbytes()) : 0;
  }
  return bytes;
}

}  // namespace

int64_t DataParallel::GradientBytes() const {
  const State& s = *state_;
  int64_t bytes = OwnGradientBytes(s);
  for (const at::Tensor& p : s.params) bytes += p.grad().defined() ? static_cast<int64_t>(p.grad().nbytes()) : 0;
  return bytes;
}

void DataParallel::Attribute(LiveBreakdown* b) const {
  const State& s = *state_;
  const int64_t kept = OwnGradientBytes(s);
  int64_t communication = 0;
  for (const ZeroBucket& bucket : s.buckets) {
    if (bucket.staging.defined()) communication += static_cast<int64_t>(bucket.staging.nbytes());
  }
  if (s.reducer) {
    for (c10d::GradBucket& bucket : s.reducer->get_grad_buckets(/*return_zero_tensors=*/false)) {
      communication += static_cast<int64_t>(bucket.getBufferRef().nbytes());
      for (const at::Tensor& p : s.params) {
        if (p.grad().defined() && p.grad().is_alias_of(bucket.getBufferRef())) {
          communication -= static_cast<int64_t>(p.grad().nbytes());
        }
      }
    }
  }
  MoveIntoCategories(b, kept, communication);
}

ParallelMeasurement DataParallel::Facts() const {
  const State& s = *state_;
  ParallelMeasurement m = FactsOf(s.spec);
  if (!s.reducer) return m;
  m.buckets_are_gradients = s.spec.gradient_as_bucket_view;
  for (c10d::GradBucket& bucket : s.reducer->get_grad_buckets(/*return_zero_tensors=*/false)) {
    m.bucket_bytes.push_back(static_cast<int64_t>(bucket.getBufferRef().nbytes()));
    m.communication_bytes += m.bucket_bytes.back();
  }
  return m;
}

}  // namespace oomguard
