// nn/torchscript/meta_fast_path.h on modules defined here: a forward that calls a fused op behind a list of device
// types gains "meta" there and takes the fused op on meta; a device check of another form is reported;
// lists elsewhere are left alone.
#include "nn/torchscript/meta_fast_path.h"

#include <ATen/ops/empty.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>

#include <string>

#include "backends/meta/kernels/meta_kernels.h"

namespace oomguard {
namespace {

// The fused op when `condition` holds, a 0-dim sum otherwise: the result's dim says which ran.
std::string FusedWhen(const std::string& condition) {
  const std::string head =
      "def forward(self, x: Tensor, w: Tensor, b: Tensor, pw: Tensor, pb: Tensor) -> Tensor:\n    if ";
  const std::string body = R"(:
        out, _ = torch._native_multi_head_attention(x, x, x, 16, 2, w, b, pw, pb, None, False)
        return out
    return x.sum()
)";
  return head + condition + body;
}
const std::string kListed = FusedWhen(R"(x.device.type in ["cpu", "cuda", "privateuseone"])");
const std::string kOtherCheck = FusedWhen(R"(x.is_cuda or x.device.type == "cpu")");

constexpr const char* kNoFusedOp = R"(
def forward(self, x: Tensor, w: Tensor, b: Tensor, pw: Tensor, pb: Tensor) -> Tensor:
    if x.device.type in ["cpu", "cuda"]:
        return x
    return x.sum()
)";

torch::jit::Module Defined(const std::string& source) {
  torch::jit::Module m("M");
  m.define(source);
  return m;
}

int64_t ResultDimOnMeta(torch::jit::Module& m) {
  RegisterMetaKernels();
  const auto meta = at::TensorOptions().device(at::kMeta);
  const at::Tensor out = m.forward({at::empty({3, 5, 16}, meta), at::empty({48, 16}, meta), at::empty({48}, meta),
                                    at::empty({16, 16}, meta), at::empty({16}, meta)})
                             .toTensor();
  EXPECT_TRUE(out.is_meta());
  return out.dim();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(MetaFastPath, AListOfDeviceTypesGainsMetaAndTheFusedOpRunsOnMeta) {
  torch::jit::Module m = Defined(kListed);
  EXPECT_TRUE(LetMetaTakeTheFastPath(m).empty());
  EXPECT_TRUE(LetMetaTakeTheFastPath(m).empty());  // idempotent: "meta" once
  EXPECT_EQ(Count(m.get_method("forward").graph()->toString(), "value=\"meta\""), 1u);
  EXPECT_EQ(ResultDimOnMeta(m), 3);
}

TEST(MetaFastPath, ADeviceCheckOfAnotherFormIsReported) {
  torch::jit::Module m = Defined(kOtherCheck);
  const std::vector<FastPathNotFound> not_found = LetMetaTakeTheFastPath(m);
  ASSERT_EQ(not_found.size(), 1u);
  EXPECT_EQ(not_found[0].op, "aten::_native_multi_head_attention");
  EXPECT_EQ(not_found[0].module, "");
  EXPECT_EQ(ResultDimOnMeta(m), 0);
}

TEST(MetaFastPath, AGraphWithoutAFusedOpIsLeftAlone) {
  torch::jit::Module m = Defined(kNoFusedOp);
  EXPECT_TRUE(LetMetaTakeTheFastPath(m).empty());
  EXPECT_EQ(Count(m.get_method("forward").graph()->toString(), "\"meta\""), 0u);
  EXPECT_EQ(ResultDimOnMeta(m), 0);
}

}  // namespace
}  // namespace oomguard
