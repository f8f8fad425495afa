#include "nn/scalar_type.h"

#include "base/check.h"

namespace oomguard {

at::ScalarType ScalarTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return at::kFloat;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kInt64:
      return at::kLong;
    case DType::kBool:
      return at::kBool;
  }
  OOMGUARD_CHECK(false) << "unknown dtype " << static_cast<int>(dtype);
}

std::string DTypeName(at::ScalarType type) {
  for (const DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt64, DType::kBool}) {
    if (ScalarTypeOf(d) == type) return std::string(Name(d));
  }
  return c10::toString(type);
}

}  // namespace oomguard
