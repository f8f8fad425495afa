#include "nn/torchscript/torchscript_archive.h"

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <vector>

#include "nn/torchscript/torchscript_net.h"

namespace oomguard {

// Note [Byte order]: torch::jit::load reads tensor records in this machine's byte order without
// looking at the archive's `byteorder` record, so a file from a big-endian machine would load with
// every value's bytes reversed. Files without the record (torch before 1.13) are little-endian.
static_assert(std::endian::native == std::endian::little, "oomguard reads TorchScript files as little-endian");
void CheckByteOrder(const std::string& file) {
  caffe2::serialize::PyTorchStreamReader reader(file);  // the zip's directory: not the records
  if (!reader.hasRecord("byteorder")) return;
  const auto [data, size] = reader.getRecord("byteorder");
  const std::string order(static_cast<const char*>(data.get()), size);
  if (order == "little") return;
  const bool plain = order.size() <= 16 && std::all_of(order.begin(), order.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c));
                     });
  throw ModelFileError(file + ": its byteorder record is " + (plain ? "\"" + order + "\"" : "not \"little\"") +
                       ": oomguard reads tensors as little-endian, the byte order of the machines it runs on (save "
                       "the module on one)");
}

// Note [Containers in a module's attributes]: data.pkl may hold a list that contains itself, or
// containers nested as deep as the file likes (LibTorch's unpickler and its type-tag pass loop, they
// do not recurse). TorchScriptNet's walk (DeviceTensors in torchscript_net.cpp) takes each container once (edits are in
// place, so once is enough; a cycle ends there), and nesting deeper than the limit is bad input. When the module goes,
// its attributes are taken apart iteratively first: LibTorch frees nested containers recursively, a frame or more per
// level (a million levels overflow the stack, in Python too), and a cycle would never be freed (fit measures trial
// after trial in one process, and sees what a trial leaves behind).
//
// TakeApart empties `value` and every container inside it, holding each until its own contents are
// out, so that no destructor meets more than one level.
void TakeApart(const c10::IValue& value) {
  std::vector<c10::IValue> pending{value};
  while (!pending.empty()) {
    const c10::IValue held = std::move(pending.back());
    pending.pop_back();
    if (held.isList()) {
      c10::List<c10::IValue> list = held.toList();
      for (size_t i = 0; i < list.size(); ++i) pending.push_back(list.get(i));
      list.clear();
    } else if (held.isTuple()) {
      c10::ivalue::Tuple& tuple = held.toTupleRef();
      for (size_t i = 0; i < tuple.size(); ++i) {
        pending.push_back(tuple.elements()[i]);
        tuple.unsafeSetElement(i, c10::IValue());
      }
    } else if (held.isGenericDict()) {
      c10::Dict<c10::IValue, c10::IValue> dict = held.toGenericDict();
      for (const auto& entry : dict) pending.push_back(entry.value());
      dict.clear();
    } else if (held.isObject() && !held.toObjectRef().type()->is_module()) {
      c10::ivalue::Object& object = held.toObjectRef();
      for (size_t i = 0; i < object.slots().size(); ++i) {
        pending.push_back(object.getSlot(i));
        object.setSlot(i, c10::IValue());
      }
    }
  }
}

// Every attribute of `module` and of its submodules other than parameters, buffers and submodules.
void TakeApartAttributes(const torch::jit::Module& module) {
  for (const torch::jit::Module& m : module.modules()) {
    c10::ivalue::Object& object = *m._ivalue();
    const c10::ClassTypePtr& type = object.type();
    for (size_t i = 0; i < type->numAttributes() && i < object.slots().size(); ++i) {
      const c10::IValue& value = object.getSlot(i);
      if (type->is_parameter(i) || type->is_buffer(i) ||
          (value.isObject() && value.toObjectRef().type()->is_module())) {
        continue;
      }
      TakeApart(value);
    }
  }
}

}  // namespace oomguard
