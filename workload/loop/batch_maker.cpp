#include "workload/loop/batch_maker.h"

#include "allocators/cpu_tracking_allocator.h"
#include "nn/scalar_type.h"

namespace oomguard {
namespace {

int64_t Bytes(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// One input's values: ids in [0, vocab), masks all true (a mask that hides nothing), floats normal.
at::Tensor Draw(const std::vector<int64_t>& sizes, at::ScalarType dtype, int64_t vocab, const at::TensorOptions& o) {
  if (dtype == at::kLong) return at::randint(0, vocab, sizes, o.dtype(at::kLong));
  if (dtype == at::kBool) return at::ones(sizes, o.dtype(at::kBool));
  return at::randn(sizes, o.dtype(dtype));
}

}  // namespace

Batch BatchMaker::Next(bool transfer_now) const {
  const DataSpec& d = spec_.data;
  Batch batch;
  batch.input = NextInput(d.shape, d.dtype, d.vocab, transfer_now);
  for (const InputSpec& more : d.extra_inputs) {
    batch.more.push_back(NextInput(more.shape, more.dtype, more.vocab, transfer_now));
  }
  if (spec_.loop.loss == "cross_entropy" && spec_.model.torchscript.empty()) {
    std::vector<int64_t> target_sizes = {d.batch};
    target_sizes.insert(target_sizes.end(), d.shape.begin(), d.shape.end());
    if (d.dtype != DType::kInt64) target_sizes.pop_back();
    batch.target = at::randint(0, d.classes, target_sizes, device_options_.dtype(at::kLong));
  }
  return batch;
}

int64_t BatchMaker::DeviceBytes(const Batch& batch, bool transfer_now) const {
  const auto on_device = [&](const at::Tensor& t) {
    return t.is_cpu() && spec_.data.on_host && !transfer_now ? 0 : Bytes(t);
  };
  int64_t bytes = on_device(batch.input) + Bytes(batch.target);
  for (const at::Tensor& t : batch.more) bytes += on_device(t);
  return bytes;
}

at::Tensor BatchMaker::ToDevice(const at::Tensor& host) const {
  return at::empty(host.sizes(), device_options_.dtype(host.scalar_type())).copy_(host);
}

at::Tensor BatchMaker::NextInput(const std::vector<int64_t>& shape, DType dtype, int64_t vocab,
                                 bool transfer_now) const {
  std::vector<int64_t> sizes = {spec_.data.batch};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  const at::ScalarType type = ScalarTypeOf(dtype);
  if (!spec_.data.on_host) return Draw(sizes, type, vocab, device_options_);
  at::Tensor host;
  {
    HostAllocationScope scope;
    const at::TensorOptions cpu = at::TensorOptions().device(at::kCPU);
    // Without data (meta) nothing reads the values, and drawing a large batch costs seconds: leave it
    // unfilled.
    host = has_data_ ? Draw(sizes, type, vocab, cpu) : at::empty(sizes, cpu.dtype(type));
  }
  return transfer_now ? ToDevice(host) : host;
}

}  // namespace oomguard
