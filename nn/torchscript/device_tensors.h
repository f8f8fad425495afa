// The tensors a TorchScript module's attributes hold beyond its parameters and buffers, made anew on
// the run's device (Note [Tensors a module holds beyond its parameters], device_tensors.cpp), and
// the parameters and buffers themselves: one fresh tensor for each distinct loaded one.
//
//   DeviceTensors device("m.pt", options, /*has_data=*/true);
//   at::Tensor w = device.For("weight", loaded_weight, /*trainable=*/true);
//   device.ReplaceInAttributes(*module._ivalue());  // lists, tuples, dicts and objects, in place
//
// Throws ModelFileError (nn/torchscript/torchscript_net.h) for a storage longer than its record in the archive and
// for attributes nested past limits::kMaxAttributeNesting.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace oomguard {

class DeviceTensors {
 public:
  DeviceTensors(std::string file, const at::TensorOptions& options, bool has_data)
      : file_(std::move(file)), options_(options), has_data_(has_data) {}

  // The tensor on the device for `old`, made at its first request; `trainable`: it requires grad.
  at::Tensor For(const std::string& name, const at::Tensor& old, bool trainable);

  // Replaces, in place, every tensor the attributes of `object` (a module) hold that are not its
  // parameters, buffers or submodules: directly, or inside lists, tuples, dicts and objects.
  void ReplaceInAttributes(c10::ivalue::Object& object) { ReplaceInAttributes(object, 0); }

  bool any_meta() const { return any_meta_; }    // a tensor saved from meta (shapes only) was seen
  bool any_saved() const { return any_saved_; }  // a tensor with saved data was seen

 private:
  void CheckRecordHolds(const std::string& name, const at::Tensor& old) const;
  void ReplaceInAttributes(c10::ivalue::Object& object, int depth);
  // `name`: the attribute that holds `value`; depth: the containers around it, it included.
  c10::IValue Replaced(const std::string& name, const c10::IValue& value, int depth);

  using Key = std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>>;
  const std::string file_;
  const at::TensorOptions options_;
  const bool has_data_;
  std::map<Key, at::Tensor> made_;
  std::set<const void*> visited_;  // lists, tuples, dicts and objects other than modules, once each
  bool any_meta_ = false, any_saved_ = false;
};

}  // namespace oomguard
