// TorchScript modules as scenario models (nn/torchscript/torchscript_net.h), trained by the catalog's loop: an
// nn.Sequential scripted in Python gives the bytes of the same layer list to the byte, on cpu and
// meta, from real or meta-saved weights; knobs act between its children; the mistakes a user makes
// get messages that say what to change. The files come from tests/torchscript/make_fixtures.py (a
// CTest fixture), in $OOMGUARD_TORCHSCRIPT_FIXTURES.
#include <gtest/gtest.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/meta_ops_harness.h"
#include "tests/pickle_reader.h"
#include "tests/same_bytes.h"
#include "tests/scratch_folder.h"
#include "tests/torchscript_fixtures.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the fixtures, torchscript_fixtures.h

// Linear(16, 32): 512 + 32 floats; Linear(32, 4): 128 + 4 floats.
constexpr int64_t kParamBytes = (16 * 32 + 32 + 32 * 4 + 4) * 4;

TEST(TorchScript, AScriptedSequentialHasTheBytesOfTheSameLayerList) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    SCOPED_TRACE(Name(backend));
    const VariantMeasurement module = Measured(Module("seq_mlp.pt"), backend);
    const VariantMeasurement layers = Measured(LayerList(), backend);
    ASSERT_EQ(Name(module.outcome), "pass") << module.error;
    ASSERT_EQ(Name(layers.outcome), "pass") << layers.error;
    EXPECT_EQ(module.param_bytes, kParamBytes);
    EXPECT_EQ(module.grad_bytes, kParamBytes);
    EXPECT_EQ(module.optimizer_state_bytes, 2 * kParamBytes);  // AdamW: two moments
    ExpectSameBytes(module, layers);
    ASSERT_TRUE(module.module.has_value());
    EXPECT_EQ(module.module->file, Fixture("seq_mlp.pt"));
    EXPECT_EQ(module.module->weights, backend == Backend::kCpu ? "saved" : "shapes");
    EXPECT_FALSE(module.module->graph_optimization);
    EXPECT_EQ(module.module->segments, 3);
    EXPECT_EQ(module.module->output, "tensor");
    EXPECT_TRUE(module.warnings.empty());
  }
  EXPECT_FALSE(torch::jit::getGraphExecutorOptimize());  // Note [Eager autograd for TorchScript]
}

TEST(TorchScript, AModuleSavedFromMetaRunsOnCpuWithSeededWeightsAndTheSameBytes) {
  const VariantMeasurement meta_file = Measured(Module("meta_mlp.pt"), Backend::kCpu);
  ASSERT_EQ(Name(meta_file.outcome), "pass") << meta_file.error;
  EXPECT_EQ(meta_file.module->weights, "seeded");
  EXPECT_NE(meta_file.grad_digest, "");
  ExpectSameBytes(meta_file, Measured(Module("seq_mlp.pt"), Backend::kCpu));
  const VariantMeasurement on_meta = Measured(Module("meta_mlp.pt"), Backend::kMeta);
  ASSERT_EQ(Name(on_meta.outcome), "pass") << on_meta.error;
  ExpectSameBytes(on_meta, meta_file);
}

TEST(TorchScript, TheKnobsThatNeedStructureActBetweenASequentialsChildren) {
  VariantSpec retain = Module("seq_mlp.pt");
  retain.pitfalls.retain_grad = true;
  const VariantMeasurement m = Measured(retain, Backend::kCpu);
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  // The outputs of children 0 and 1 (Linear, ReLU) keep their gradients: [8, 32] floats each.
  EXPECT_EQ(m.retained_grad_bytes, 2 * 8 * 32 * 4);

  VariantSpec checkpointed = Module("seq_mlp.pt");
  checkpointed.pitfalls.checkpoint.segments = 3;
  VariantSpec layers = LayerList();
  layers.pitfalls.checkpoint.segments = 3;
  ExpectSameBytes(Measured(checkpointed, Backend::kCpu), Measured(layers, Backend::kCpu));

  VariantSpec too_many = Module("seq_mlp.pt");
  too_many.pitfalls.checkpoint.segments = 4;
  EXPECT_EQ(
      Measured(too_many, Backend::kCpu).input_error,
      "pitfalls.checkpoint.segments = 4 asks for more checkpointed segments than the model has 3 segments (0-2): a "
      "checkpointed segment holds at least one");
  VariantSpec no_parameter = Module("seq_mlp.pt");
  no_parameter.pitfalls.inplace.target = "parameter";
  no_parameter.pitfalls.inplace.layer = 1;
  EXPECT_EQ(Measured(no_parameter, Backend::kCpu).input_error,
            "pitfalls.inplace.target \"parameter\" needs a segment with parameters; segment 1:ReLU has none");
}

TEST(TorchScript, AKnobThatNeedsStructureOnAnotherModuleSaysWhyAndWhatToDo) {
  VariantSpec spec = Module("not_sequential.pt");
  spec.pitfalls.retain_grad = true;
  const VariantMeasurement m = Measured(spec, Backend::kCpu);
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_EQ(m.input_error,
            "the TorchScript module in " + Fixture("not_sequential.pt") +
                " is a __torch__.MLP, not an nn.Sequential: the knobs that need its structure act on an "
                "nn.Sequential's top-level children, in order (script nn.Sequential(...) of your blocks to use them), "
                "and pitfalls.retain_grad = true needs them (checkpointing and the per-layer knobs act between "
                "segments)");
  // Without the knob it trains whole, with the bytes of the same layers.
  ExpectSameBytes(Measured(Module("not_sequential.pt"), Backend::kCpu), Measured(LayerList(), Backend::kCpu));
}

TEST(TorchScript, ATracedModuleWithFixedDropoutIsWarnedAbout) {
  const VariantMeasurement m = Measured(Module("traced_dropout.pt"), Backend::kCpu);
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_EQ(m.warnings[0],
            Fixture("traced_dropout.pt") +
                ": 1 op(s) have their train/eval flag fixed in the graph, as torch.jit.trace records it: "
                "aten::dropout in module 1 (train=true). They run that way in training and in "
                "evaluation alike, whatever train()/eval() says; script the model with torch.jit.script "
                "for them to follow the mode");
}

TEST(TorchScript, TheLossReadsTheFirstTensorOfADictAndOfSeveralInputs) {
  const VariantMeasurement dict = Measured(Module("dict_output.pt"), Backend::kCpu);
  ASSERT_EQ(Name(dict.outcome), "pass") << dict.error;
  EXPECT_EQ(dict.module->output, "dict[logits]");
  EXPECT_EQ(dict.param_bytes, (16 * 4 + 4) * 4);

  VariantSpec two = Module("two_inputs.pt");
  two.data.shape = {6};
  two.data.dtype = DType::kInt64;
  two.data.vocab = 50;
  two.data.classes = 8;
  two.loop.loss = "cross_entropy";  // targets [8, 6], shaped like the output without its class axis
  InputSpec mask;
  mask.shape = {6};
  mask.dtype = DType::kBool;
  two.data.extra_inputs = {mask};
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    const VariantMeasurement m = Measured(two, backend);
    ASSERT_EQ(Name(m.outcome), "pass") << m.error;
    EXPECT_EQ(m.param_bytes, (50 * 8 + 8 * 8 + 8) * 4);
    // Per step: ids [8, 6] int64 and the mask [8, 6] bool, copied to the device.
    EXPECT_EQ(m.transfer_bytes, m.iterations.size() * 2 * (8 * 6 * 8 + 8 * 6));
  }
}

// Note [Tensors a module holds beyond its parameters] (nn/torchscript/torchscript_net.cpp): nn.LSTM's forward reads
// its weights from `_flat_weights`, a list attribute. They are the parameters made on the device, so
// the optimizer trains what the forward reads: every parameter has its gradient and its two AdamW
// moments (left as loaded, the LSTM's seven had neither on cpu, and meta refused host weights).
TEST(TorchScript, TheTensorsAModulesAttributesHoldAreMadeOnTheDeviceAsItsParametersAre) {
  const VariantSpec lstm = Tagger("lstm.pt");
  // Embedding(50, 16); LSTM(16, 8, 2 layers): per layer 4x8 rows of input and hidden weights and two
  // biases; Linear(8, 4).
  constexpr int64_t kLstmBytes = (50 * 16 + (32 * 16 + 32 * 8 + 2 * 32) + (32 * 8 + 32 * 8 + 2 * 32) + 8 * 4 + 4) * 4;
  // A plain tensor [4] and a tensor [4] in a tuple in a dict, beside Linear(16, 4).
  constexpr int64_t kAttributeBytes = (16 * 4 + 4) * 4;
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    SCOPED_TRACE(Name(backend));
    const VariantMeasurement m = Measured(lstm, backend);
    ASSERT_EQ(Name(m.outcome), "pass") << m.error;
    EXPECT_EQ(m.param_bytes, kLstmBytes);
    EXPECT_EQ(m.grad_bytes, kLstmBytes);
    EXPECT_EQ(m.optimizer_state_bytes, 2 * kLstmBytes);
    ASSERT_FALSE(m.ledger.phase_peaks.empty());
    EXPECT_EQ(m.ledger.phase_peaks[0].phase, "setup");
    EXPECT_EQ(m.ledger.phase_peaks[0].peak_bytes, kLstmBytes);  // the list holds the parameters: made once
    if (backend == Backend::kMeta) {                            // not mirrored yet: said, with the numbers
      ASSERT_EQ(m.warnings.size(), 1u);
      EXPECT_NE(m.warnings[0].find("aten::lstm (in module lstm) runs on meta through PyTorch's native per-step "
                                   "path, while cpu runs oneDNN's LSTM"),
                std::string::npos)
          << m.warnings[0];
    } else {
      EXPECT_TRUE(m.warnings.empty());
    }

    const VariantMeasurement attributes = Measured(Module("tensor_attributes.pt"), backend);
    ASSERT_EQ(Name(attributes.outcome), "pass") << attributes.error;
    EXPECT_EQ(attributes.param_bytes, kAttributeBytes);
    ASSERT_FALSE(attributes.ledger.phase_peaks.empty());
    EXPECT_EQ(attributes.ledger.phase_peaks[0].peak_bytes, kAttributeBytes + 2 * 4 * 4);  // made as buffers are
  }
}

// A GRU's cpu kernel computes every step's input projection at once (a cpu tensor's path in RNN.cpp),
// meta's per step: the bytes differ, and the meta run says so. When meta mirrors it, the peaks agree
// and this test asks for the warning to go.
TEST(TorchScript, AnRnnThatMetaDoesNotMirrorIsWarnedAboutOnMeta) {
  const VariantSpec gru = Tagger("gru.pt");
  const VariantMeasurement cpu = Measured(gru, Backend::kCpu), meta = Measured(gru, Backend::kMeta);
  ASSERT_EQ(Name(cpu.outcome), "pass") << cpu.error;
  ASSERT_EQ(Name(meta.outcome), "pass") << meta.error;
  EXPECT_TRUE(cpu.warnings.empty());
  ASSERT_EQ(meta.warnings.size(), 1u);
  EXPECT_NE(meta.warnings[0].find("aten::gru (in module gru) runs on meta through PyTorch's native per-step path, "
                                  "while cpu computes every step's input projection at once"),
            std::string::npos)
      << meta.warnings[0];
  EXPECT_NE(cpu.ledger.peak_bytes, meta.ledger.peak_bytes) << "meta mirrors cpu's GRU now: drop the warning";
  EXPECT_EQ(cpu.param_bytes, meta.param_bytes);
}

// nn.MultiheadAttention's fused fast path (torch._native_multi_head_attention), which its forward takes
// in evaluation under no_grad for cpu and cuda tensors only: the meta run says so.
// In evaluation under no_grad nn.MultiheadAttention and nn.TransformerEncoderLayer take their fused fast
// path on meta as on cpu (Note [Meta takes the attention fast path], nn/torchscript/meta_fast_path.h): the same
// fused ops run, and every phase has cpu's bytes, with no warning.
TEST(TorchScript, AttentionsFastPathIsTakenOnMetaAsOnCpu) {
  at::set_num_threads(1);  // as in the runner's children: flash attention's backward scratch is per thread
  for (const std::string file : {"attention.pt", "encoder.pt"}) {
    SCOPED_TRACE(file);
    std::map<Backend, std::set<std::string>> ran;
    std::map<Backend, VariantMeasurement> m;
    for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
      KernelNames names;
      m[backend] = Measured(Tagger(file), backend);
      ran[backend] = names.names();
      ASSERT_EQ(Name(m[backend].outcome), "pass") << m[backend].error;
      EXPECT_TRUE(m[backend].warnings.empty()) << m[backend].warnings[0];
    }
    ExpectSameBytes(m[Backend::kCpu], m[Backend::kMeta]);
    for (const char* op : {"aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd",
                           "aten::_masked_softmax", "aten::scaled_dot_product_attention"}) {
      EXPECT_EQ(ran[Backend::kMeta].contains(op), ran[Backend::kCpu].contains(op)) << op;
    }
    EXPECT_TRUE(ran[Backend::kMeta].contains("aten::_native_multi_head_attention"));
    EXPECT_EQ(ran[Backend::kMeta].contains("aten::_transformer_encoder_layer_fwd"), file == "encoder.pt");
  }
}

TEST(TorchScript, AnOomInsideTheModuleIsAnOomWithTheUsersLine) {
  VariantSpec spec = Module("seq_mlp.pt");
  VariantMeasureOptions options;
  options.backend = Backend::kCpu;
  options.limits.cap_bytes = kParamBytes + 1024;  // the parameters fit, the first activation does not
  const VariantMeasurement m = MeasureVariant(spec, options);
  EXPECT_EQ(Name(m.outcome), "oom") << m.error;
  ASSERT_TRUE(m.oom.has_value());
  EXPECT_EQ(m.oom->phase, "forward");
}

// The pitfall is in the module's own code (keeps_history.pt appends each hidden activation to an attribute):
// the same detectors find it, and the kept bytes are the growth the ledger measures, one train and one
// eval activation (8 x 32 float32 each) per iteration.
TEST(TorchScript, APitfallInTheModulesOwnCodeIsDiagnosed) {
  for (Backend backend : {Backend::kCpu, Backend::kMeta}) {
    VariantMeasureOptions options;
    options.backend = backend;
    const VariantMeasurement m = MeasureVariant(Module("keeps_history.pt"), options);
    ASSERT_EQ(m.outcome.kind, Outcome::kPass) << m.error;
    ASSERT_EQ(m.diagnoses.size(), 1u) << Name(backend);
    const Diagnosis& d = m.diagnoses[0];
    EXPECT_EQ(d.kind, DiagnosisKind::kGraphKeptAcrossIterations);
    EXPECT_EQ(d.bytes, 2 * 8 * 32 * 4);
    EXPECT_EQ(static_cast<double>(d.bytes), *LiveGrowthPerIteration(m));
    EXPECT_NE(d.where.find("ReluBackward0"), std::string::npos) << d.where;
  }
}

// The snapshot names what made each backward allocation in every iteration. A module that runs whole
// (not an nn.Sequential) is one bracket, "module MLP"; before, the nodes of its forward were nobody's
// in iteration 1 and, from iteration 2 on, "the optimizer step"'s: the last bracket entered before
// that forward (Note [Nodes made between brackets], nn/layer_trace.cpp).
TEST(TorchScript, TheSnapshotNamesTheModuleOfEveryBackwardAllocationInEveryIteration) {
  testing::ScratchFolder folder("torchscript-snapshot");
  VariantSpec spec = Module("not_sequential.pt");
  spec.loop.iterations = 3;
  VariantMeasureOptions options;
  options.backend = Backend::kCpu;
  options.snapshot.path = folder.path() + "/s.pickle";
  options.snapshot.always = true;
  options.snapshot.source = {"s.json", "s", "v", "cpu", 0};
  const VariantMeasurement m = MeasureVariant(spec, options);
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_EQ(m.snapshot, options.snapshot.path) << m.snapshot_error;
  std::ifstream in(options.snapshot.path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string text = testing::RenderPickle(bytes.str());
  // Each allocation's frames, innermost first: the layer or stage (when known), the phase, the variant.
  const std::regex alloc(R"(\{'action': 'alloc', [^\[]*'frames': \[([^\]]*)\])"), name(R"('name': '([^']*)')");
  std::map<std::string, int> backward;  // label -> allocations
  for (auto it = std::sregex_iterator(text.begin(), text.end(), alloc); it != std::sregex_iterator(); ++it) {
    const std::string frames = (*it)[1];
    std::vector<std::string> names;
    for (auto n = std::sregex_iterator(frames.begin(), frames.end(), name); n != std::sregex_iterator(); ++n) {
      names.push_back((*n)[1]);
    }
    ASSERT_GE(names.size(), 2u) << frames;
    if (names[names.size() - 2] == "phase backward") ++backward[names.size() == 3 ? names[0] : "(no label)"];
  }
  // Per iteration: the seed gradient of loss.backward(), made before any node runs; the loss's
  // gradient of the output; Linear(32, 4)'s and Linear(16, 32)'s gradients (Addmm: 5 in all), ReLU's.
  const std::map<std::string, int> expected = {
      {"(no label)", 3},
      {"the backward of the loss, node MseLossBackward0", 3},
      {"the backward of module MLP, node AddmmBackward0", 3 * 5},
      {"the backward of module MLP, node ReluBackward0", 3},
  };
  EXPECT_EQ(backward, expected) << text.substr(0, 4000);
}

// Note [The class axis] (workload/loop/cross_entropy.h): a segmentation model's logits [N, C, H, W] are read
// as PyTorch's F.cross_entropy reads them, with targets [N, H, W] (pytorch_eager_check.py compares the
// bytes with eager PyTorch's); a token model's [N, T, V] by their last dim. data.classes that is not the
// class axis' size is bad input, saying which axis was read.
TEST(TorchScript, CrossEntropyReadsTheClassAxisAsPyTorchDoesAndChecksDataClasses) {
  VariantSpec segmenter = Module("segmenter.pt");  // [8, 3, 8, 8] -> [8, 5, 8, 8]
  segmenter.data.shape = {3, 8, 8};
  segmenter.data.classes = 5;
  segmenter.loop.loss = "cross_entropy";
  VariantMeasurement m = Measured(segmenter, Backend::kCpu);
  EXPECT_EQ(Name(m.outcome), "pass") << m.error;
  // On meta, the same bytes: oomguard's nll_loss2d kernels (meta_kernels_loss.cpp) mirror cpu's.
  ExpectSameBytes(m, Measured(segmenter, Backend::kMeta));
  segmenter.data.classes = 8;  // the last dim's size: what was read before
  m = Measured(segmenter, Backend::kCpu);
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_EQ(m.input_error,
            "cross_entropy reads the output [8, 5, 8, 8] as PyTorch's F.cross_entropy does, [N, C, d1, ...] with "
            "targets [N, d1, ...]: dim 1 holds 5 classes, but data.classes is 8");

  VariantSpec tagger = Tagger("lstm.pt");  // [8, 12] ids -> [8, 12, 4]
  tagger.data.classes = 12;
  m = Measured(tagger, Backend::kMeta);
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_EQ(m.input_error,
            "cross_entropy reads the output [8, 12, 4] as a language model's logits [N, T, V] (the data are int64 "
            "token ids): the last dim holds 4 classes, but data.classes is 12");
}

}  // namespace
}  // namespace oomguard
