// The element types a scenario's model and data can have, with their sizes.
//
//   DType d;
//   if (Parse("bfloat16", &d)) BytesPerElement(d);  // 2
//   AllNames<DType>(kModelDTypes);                  // {"float32", "bfloat16", "float16"}
//
// The workload maps these to at::ScalarType (workload/workload.cpp); nothing here needs LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/enum_names.h"

namespace oomguard {

enum class DType { kFloat32, kBFloat16, kFloat16, kInt64, kBool };

template <>
struct EnumNames<DType> {
  static constexpr std::array<std::string_view, 5> kNames = {"float32", "bfloat16", "float16", "int64", "bool"};
};

// model.dtype: the floating types parameters can have. data.dtype takes every DType (int64: token ids;
// bool: masks).
inline const std::vector<DType> kModelDTypes = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

constexpr int64_t BytesPerElement(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat16:
      return 2;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

}  // namespace oomguard
