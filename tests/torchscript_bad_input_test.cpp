// TorchScript files and scenarios a user gets wrong, or an attacker makes: each is the variant's
// input error (UNRESOLVED, exit 2) with a message naming the file and what is wrong, never an abort
// (issue 35: D19, D20, D21, D33). The files come from tests/torchscript/make_fixtures.py.
#include <gtest/gtest.h>

#include <string>

#include "tests/same_bytes.h"
#include "tests/torchscript_fixtures.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the fixtures, torchscript_fixtures.h

// The first mistake with a language model: the default float32 data fed to its embedding. The error
// says which data it needs.
TEST(TorchScript, FloatDataIntoAnEmbeddingSaysTheDataNeedsTokenIds) {
  const VariantMeasurement m = Measured(Module("lstm.pt"), Backend::kCpu);  // data: [8, 16] float32
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_NE(m.error.find("Expected tensor for argument #1 'indices'"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find("(in the forward of module LstmTagger, at make_fixtures.py:"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find(R"(needs "data": {"dtype": "int64", "vocab": N})"), std::string::npos) << m.error;
}

TEST(TorchScript, AFileThatIsNoModuleOrAForwardWithoutATensorIsBadInput) {
  const VariantMeasurement unreadable = Measured(Module("not_a_module.pt"), Backend::kCpu);
  EXPECT_EQ(Name(unreadable.outcome), "error:error");
  EXPECT_TRUE(unreadable.input_error.starts_with(Fixture("not_a_module.pt") +
                                                 ": not a TorchScript module torch::jit::load can read ("))
      << unreadable.input_error;
  const VariantMeasurement no_tensor = Measured(Module("no_tensor.pt"), Backend::kCpu);
  EXPECT_EQ(no_tensor.input_error, Fixture("no_tensor.pt") +
                                       ": the forward returned GenericList holding no tensor: the loss needs a tensor, "
                                       "or a tuple, list or dict whose first tensor is the output");
}

// The message of a module file that is bad input (its variant UNRESOLVED: outcome error:error).
std::string InputErrorOf(const std::string& file, Backend backend) {
  const VariantMeasurement m = Measured(Module(file), backend);
  EXPECT_EQ(Name(m.outcome), "error:error") << file;
  return m.input_error;
}

// D20: code LibTorch cannot compile, or a class data.pkl names that it does not know, made
// torch::jit::load throw std::runtime_error, not c10::Error: the child ended in std::terminate (fit, in
// process, died whole). Now bad input, with LibTorch's message bounded to its first lines.
TEST(TorchScript, CodeOrAClassLibTorchCannotCompileIsBadInputWithItsMessage) {
  const std::string prefix = ": not a TorchScript module torch::jit::load can read (";
  EXPECT_EQ(InputErrorOf("syntax_error.pt", Backend::kCpu),
            Fixture("syntax_error.pt") + prefix +
                "expected ) but found 'arrow' here:\n"
                "Serialized   File \"code/__torch__/torch/nn/modules/container.py\", line 10\n"
                "  __annotations__[\"2\"] = __torch__.torch.nn.modules.linear.___torch_mangle_0.Linear\n"
                "  def forward(self: __torch__.torch.nn.modules.container.Sequential,\n"
                "    input: Tensor -> Tensor:\n"
                "                  ~~ <--- HERE [...])");
  EXPECT_EQ(InputErrorOf("unknown_op.pt", Backend::kMeta),
            Fixture("unknown_op.pt") + prefix +
                "Unknown builtin op: aten::no_such_op.\n"
                "Could not find any similar ops to aten::no_such_op. This op may not exist or may not be currently "
                "supported in TorchScript.\n"
                ":\n"
                "  File \"code/__torch__/torch/nn/modules/container.py\", line 16\n"
                "    input0 = (_0).forward(input, )\n"
                "    input1 = (_1).forward(input0, ) [...])");
  EXPECT_EQ(InputErrorOf("global_os_system.pt", Backend::kCpu),
            Fixture("global_os_system.pt") + prefix + "Unknown type name 'os.system':\nos.system)");
}

// D19: a list that holds itself, or lists nested 100000 deep, in an attribute overflowed the stack of
// the walk that makes attribute tensors on the device (Note [Containers in a module's attributes]).
TEST(TorchScript, AListThatHoldsItselfRunsAndListsNestedPastTheLimitAreBadInput) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    SCOPED_TRACE(Name(backend));
    const VariantMeasurement self_list = Measured(Module("self_list.pt"), backend);
    ASSERT_EQ(Name(self_list.outcome), "pass") << self_list.error;
    ExpectSameBytes(self_list, Measured(Module("keeps_history.pt"), backend));
    EXPECT_EQ(InputErrorOf("deep_list.pt", backend),
              Fixture("deep_list.pt") +
                  ": attribute \"history\" holds lists, tuples, dicts or objects nested more than 64 "
                  "deep (the limit for a TorchScript module's attributes)");
  }
}

// D33: a weight's record cut to 10 bytes loaded, and the weight read 2038 bytes past it; a byteorder
// record "big" was ignored (Note [A storage longer than its record], Note [Byte order]).
TEST(TorchScript, ARecordShorterThanItsStorageOrAnotherByteOrderIsBadInput) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    SCOPED_TRACE(Name(backend));
    EXPECT_EQ(InputErrorOf("short_record.pt", backend),
              Fixture("short_record.pt") +
                  ": the storage of tensor \"weight\" is 2048 bytes, but its record in the archive "
                  "holds 10 (the file was cut short or altered: save the module again)");
    EXPECT_EQ(InputErrorOf("big_endian.pt", backend),
              Fixture("big_endian.pt") +
                  ": its byteorder record is \"big\": oomguard reads tensors as little-endian, the "
                  "byte order of the machines it runs on (save the module on one)");
  }
}

// D21: a number LibTorch refuses (beyond float's range) threw std::runtime_error out of the measured
// loop, and the child ended in std::terminate. The loader refuses such numbers now; the child's backstop
// (Note [A value LibTorch refuses], workload/loop/variant_run.cpp) is checked here with a spec the loader never
// saw. Beside the TorchScript cases: this binary is the small one that measures.
TEST(TorchScript, ANumberLibTorchRefusesIsTheScenariosInputErrorNotAnAbort) {
  VariantSpec clip = LayerList();
  clip.loop.clip_grad_norm = 1e308;
  VariantSpec sgd = LayerList();
  sgd.loop.optimizer.kind = "sgd";
  sgd.loop.optimizer.lr = 1e308;
  for (const VariantSpec& spec : {clip, sgd}) {
    const VariantMeasurement m = Measured(spec, Backend::kCpu);
    EXPECT_EQ(Name(m.outcome), "error:error");
    EXPECT_EQ(m.input_error,
              "LibTorch refused a value of the scenario: value cannot be converted to type float without overflow "
              "(oomguard's loader accepted it and should not have: please report it)");
  }
}

}  // namespace
}  // namespace oomguard
