// What a TorchScript archive may hold that torch::jit::load does not check, for TorchScriptNet
// (nn/torchscript/torchscript_net.h): the byte order its tensors were saved in, and containers in a module's
// attributes that nest as deep as the file likes or hold themselves.
//
//   CheckByteOrder("m.pt");           // throws ModelFileError unless the archive is little-endian
//   TakeApartAttributes(module);      // before the module goes: no recursion, no cycle left behind
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <string>

namespace oomguard {

// Throws ModelFileError when the archive's `byteorder` record says other than "little" (Note [Byte
// order]).
void CheckByteOrder(const std::string& file);

// Empties `value` and every container inside it, iteratively (Note [Containers in a module's
// attributes]).
void TakeApart(const c10::IValue& value);

// Every attribute of `module` and of its submodules other than parameters, buffers and submodules.
void TakeApartAttributes(const torch::jit::Module& module);

}  // namespace oomguard
