#include "backends/cuda_transfer_timer.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAEvent.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/check.h"
#include "ops/op_stream.h"

namespace oomguard {
namespace {

using Event = c10::cuda::CUDAEvent;

struct TimedCopy : at::ObserverContext {
  std::unique_ptr<Event> start;
  c10::DeviceIndex device = 0;
};

std::mutex g_mutex;
std::vector<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>> g_copies;  // guarded by g_mutex
bool g_active = false;

std::unique_ptr<at::ObserverContext> TimeCopy(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (name == nullptr || std::strcmp(name, "aten::copy_") != 0) return nullptr;
  const auto inputs = fn.inputs();
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isTensor()) return nullptr;
  const at::Tensor& dst = inputs[0].toTensor();
  const at::Tensor& src = inputs[1].toTensor();
  if (!dst.is_cuda() || !src.is_cpu() || src.unsafeGetTensorImpl()->is_wrapped_number()) return nullptr;
  auto copy = std::make_unique<TimedCopy>();
  copy->device = dst.device().index();
  copy->start = std::make_unique<Event>(cudaEventDefault);  // the default flags disable timing
  copy->start->record(at::cuda::getCurrentCUDAStream(copy->device));
  return copy;
}

void CopyEnded(at::ObserverContext* context) {
  auto* copy = static_cast<TimedCopy*>(context);
  if (copy == nullptr || !copy->start) return;
  auto end = std::make_unique<Event>(cudaEventDefault);
  end->record(at::cuda::getCurrentCUDAStream(copy->device));
  std::lock_guard<std::mutex> lock(g_mutex);
  g_copies.emplace_back(std::move(copy->start), std::move(end));
}

}  // namespace

struct CudaTransferTimer::Watch final : OpObserver {
  Watch() : subscription(this, {.op_starts = true, .op_ends = true, .inputs = true}) {}
  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override { return TimeCopy(fn); }
  void OnOpEnd(const at::RecordFunction&, at::ObserverContext* context) override { CopyEnded(context); }
  OpSubscription subscription;
};

CudaTransferTimer::CudaTransferTimer() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    OOMGUARD_CHECK(!g_active) << "only one CudaTransferTimer may exist at a time";
    g_active = true;
    g_copies.clear();
  }
  watch_ = std::make_unique<Watch>();
}

CudaTransferTimer::~CudaTransferTimer() {
  watch_.reset();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_copies.clear();
  g_active = false;
}

int64_t CudaTransferTimer::copies() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return static_cast<int64_t>(g_copies.size());
}

double CudaTransferTimer::TotalMilliseconds() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  double total = 0;
  for (const auto& [start, end] : g_copies) {
    end->synchronize();
    total += start->elapsed_time(*end);
  }
  return total;
}

}  // namespace oomguard
