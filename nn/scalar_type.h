// The LibTorch scalar type of a scenario's dtype (model/dtype.h): what parameters and batches are made of.
//
//   at::TensorOptions options = at::TensorOptions().device(device).dtype(ScalarTypeOf(spec.model.dtype));
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "model/dtype.h"

namespace oomguard {

at::ScalarType ScalarTypeOf(DType dtype);
// The DType name of `type` ("bfloat16"), the inverse of ScalarTypeOf; c10's name for any other type.
std::string DTypeName(at::ScalarType type);

}  // namespace oomguard
