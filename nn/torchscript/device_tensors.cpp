#include "nn/torchscript/device_tensors.h"

#include <ATen/core/class_type.h>

#include <utility>

#include "allocators/cpu_tracking_allocator.h"
#include "base/input_limits.h"
#include "nn/torchscript/torchscript_net.h"

namespace oomguard {
namespace {

// Note [Weights of a module saved from meta]: such a file holds shapes only. On a backend with data
// its tensors are drawn from the seed as a fresh model would start: matrices and kernels N(0, 0.02)
// (GPT-2's initialisation), 1-d "weight"s and running variances ones, everything else zeros. The
// values change no allocation; they keep the numbers finite.
void Seed(const std::string& name, at::Tensor& t) {
  if (!at::isFloatingType(t.scalar_type())) {
    t.zero_();
  } else if (t.dim() >= 2) {
    t.normal_(0.0, 0.02);
  } else if (name == "weight" || name == "running_var") {
    t.fill_(1.0);
  } else {
    t.zero_();
  }
}

}  // namespace

// Note [Tensors a module holds beyond its parameters]: a module may keep tensors in attributes that
// are neither parameters nor buffers, and read them in its forward: nn.LSTM keeps its own parameters
// in `_flat_weights` (a List[Tensor]), a module may assign a plain tensor in __init__. Each is re-made
// as the parameters are: a tensor that is a parameter or buffer (the same storage, offset, sizes and
// strides) becomes that same fresh tensor, any other is made anew as a buffer is. Left as loaded, the
// forward would read the loader's host tensors: on meta a device mismatch; on cpu a forward through
// weights the optimizer never updates, with gradients nobody zeroes (the fixture lstm.pt's gradients
// were 3344 of its 8976 bytes; a 2-layer LSTM of 256 units peaked 3.7 MiB under eager PyTorch's).

at::Tensor DeviceTensors::For(const std::string& name, const at::Tensor& old, bool trainable) {
  const Key key{old.storage().unsafeGetStorageImpl(), old.storage_offset(), old.sizes().vec(), old.strides().vec()};
  auto it = made_.find(key);
  if (it != made_.end()) return it->second;
  if (!old.is_meta()) CheckRecordHolds(name, old);
  at::Tensor fresh = at::empty(old.sizes(), options_.dtype(old.scalar_type()));
  if (old.is_meta()) {
    any_meta_ = true;
    if (has_data_) Seed(name, fresh);
  } else {
    any_saved_ = true;
    if (has_data_) fresh.copy_(old);
  }
  fresh.requires_grad_(trainable);
  return made_.emplace(key, fresh).first->second;
}

// Note [A storage longer than its record]: LibTorch makes each storage as long as data.pkl says, over
// the buffer it read the storage's record into, without comparing the two: a record cut short leaves
// the tensor reading memory past its buffer. The loader reads records through c10's CPU allocator,
// the tracking allocator, which knows each buffer's size (a record of 0 bytes is no buffer at all).
void DeviceTensors::CheckRecordHolds(const std::string& name, const at::Tensor& old) const {
  const c10::Storage& storage = old.storage();
  const auto needs = static_cast<int64_t>(storage.nbytes());
  const int64_t holds = storage.data_ptr().get() == nullptr ? 0 : AllocatedBytes(storage.data_ptr()).value_or(needs);
  if (holds >= needs) return;
  throw ModelFileError(file_ + ": the storage of tensor \"" + name + "\" is " + std::to_string(needs) +
                       " bytes, but its record in the archive holds " + std::to_string(holds) +
                       " (the file was cut short or altered: save the module again)");
}

// Note [Containers in a module's attributes] (torchscript_archive.cpp).
void DeviceTensors::ReplaceInAttributes(c10::ivalue::Object& object, int depth) {
  const c10::ClassTypePtr& type = object.type();
  for (size_t i = 0; i < type->numAttributes(); ++i) {
    if (type->is_parameter(i) || type->is_buffer(i)) continue;
    const c10::IValue& value = object.getSlot(i);
    if (value.isObject() && value.toObjectRef().type()->is_module()) continue;  // walked as a module
    object.setSlot(i, Replaced(type->getAttributeName(i), value, depth + 1));
  }
}

c10::IValue DeviceTensors::Replaced(const std::string& name, const c10::IValue& value, int depth) {
  if (value.isTensor()) {
    const at::Tensor& old = value.toTensor();
    return old.defined() ? c10::IValue(For(name, old, old.requires_grad())) : value;
  }
  const bool container = value.isList() || value.isTuple() || value.isGenericDict() || value.isObject();
  if (!container || !visited_.insert(value.internalToPointer()).second) return value;
  if (depth > limits::kMaxAttributeNesting) {
    throw ModelFileError(
        file_ + ": attribute \"" + name + "\" holds lists, tuples, dicts or objects nested more than " +
        std::to_string(limits::kMaxAttributeNesting) + " deep (the limit for a TorchScript module's attributes)");
  }
  if (value.isList()) {
    c10::List<c10::IValue> list = value.toList();  // a handle: set() edits the module's list
    for (size_t i = 0; i < list.size(); ++i) list.set(i, Replaced(name, list.get(i), depth + 1));
  } else if (value.isTuple()) {
    c10::ivalue::Tuple& tuple = value.toTupleRef();
    for (size_t i = 0; i < tuple.size(); ++i) {
      tuple.unsafeSetElement(i, Replaced(name, tuple.elements()[i], depth + 1));
    }
  } else if (value.isGenericDict()) {
    c10::Dict<c10::IValue, c10::IValue> dict = value.toGenericDict();
    std::vector<std::pair<c10::IValue, c10::IValue>> entries;
    for (const auto& entry : dict) entries.emplace_back(entry.key(), Replaced(name, entry.value(), depth + 1));
    for (auto& [key, fresh] : entries) dict.insert_or_assign(key, std::move(fresh));
  } else {
    ReplaceInAttributes(value.toObjectRef(), depth);
  }
  return value;
}

}  // namespace oomguard
