// The batches of a catalog variant's data (scenario.h's DataSpec): each input drawn on the host and
// copied to the device, now or later (inside the first checkpointed segment, the h2d-in-checkpoint
// pitfall), or drawn on the device when data.on_host is false; cross_entropy targets on the device.
//
//   BatchMaker batches(spec, device_options, backend.traits().has_data);
//   Batch batch = batches.Next(/*transfer_now=*/true);
//   int64_t on_device = batches.DeviceBytes(batch, /*transfer_now=*/true);
//
// Host draws go through HostAllocationScope (allocators/cpu_tracking_allocator.h): the ledger books
// the device's memory only. Nothing here fails but LibTorch's own errors.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

struct Batch {
  at::Tensor input;              // on the host when the transfer happens inside the first checkpoint segment
  at::Tensor target;             // on the device (cross_entropy of a layer list; a TorchScript module's are drawn
                                 // by the loop from its output's shape)
  std::vector<at::Tensor> more;  // data.inputs[1:], on the device
};

class BatchMaker {
 public:
  // has_data: the device's tensors hold values (not meta), so host batches are drawn, not left empty.
  BatchMaker(const VariantSpec& spec, at::TensorOptions device_options, bool has_data)
      : spec_(spec), device_options_(std::move(device_options)), has_data_(has_data) {}

  // The next batch; with transfer_now false its host inputs stay on the host (ToDevice them later).
  Batch Next(bool transfer_now) const;

  // What the batch holds on the device: its inputs once copied, and the targets.
  int64_t DeviceBytes(const Batch& batch, bool transfer_now) const;

  // A host tensor's copy on the device: the transfer the catalog counts (aten::copy_).
  at::Tensor ToDevice(const at::Tensor& host) const;

 private:
  at::Tensor NextInput(const std::vector<int64_t>& shape, DType dtype, int64_t vocab, bool transfer_now) const;

  const VariantSpec& spec_;
  at::TensorOptions device_options_;
  bool has_data_;
};

}  // namespace oomguard
