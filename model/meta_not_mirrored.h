// What the meta backend does not mirror of cpu, in one place: the ops whose cpu kernel allocates in a
// way meta's does not follow, with what cpu does instead. A run that meets one says so; meta never
// differs from cpu in silence (tests/meta_corpus.py runs real models on both and fails on any
// difference no warning announces).
//
//   for (const NotMirroredOp& op : NotMirroredOps()) if (graph calls op.op) warn(op.op + " " + op.differs);
//   TORCH_CHECK(k != 5, NotMirroredMessage("a 3-d convolution (aten::convolution)", "..."));
//
// Two kinds: an op that runs on meta with other bytes (the table: TorchScriptNet warns when a module's
// graph calls one, nn/torchscript/torchscript_net.cpp), and one that cannot run on meta at all (a Meta kernel
// throws NotMirroredMessage; workload/error_category.cpp keeps that text as it is, and an op with no
// Meta kernel gets the same advice).
#pragma once

#include <string>
#include <vector>

namespace oomguard {

struct NotMirroredOp {
  std::string op;       // "aten::lstm": a TorchScript graph's node kind
  std::string differs;  // what meta and cpu do: "runs on meta through ..., while cpu ..."
  std::string card_differs;  // what meta and a card's CUDA kernels do: "runs on meta through ..., while a card ..."
};

// Every op that runs on meta with bytes other than cpu's (and a card's).
const std::vector<NotMirroredOp>& NotMirroredOps();

// The sentence that says a run's bytes are not cpu's, after an op's `differs`.
std::string NotMirroredConsequence();
// The sentence that says a card-mode run's bytes are not the card's, after an op's `card_differs`.
std::string NotMirroredOnACard();

// The error of a Meta kernel for what it cannot mirror: "<what> is not mirrored on meta: <why>. Run it
// with --backend cpu ...". ErrorCategory kMetaKernelMissing.
std::string NotMirroredMessage(const std::string& what, const std::string& why);

// The marker of NotMirroredMessage's text ("is not mirrored on meta").
inline constexpr const char* kNotMirroredMarker = " is not mirrored on meta: ";

// The advice for an op without a Meta kernel, or any NotMirroredMessage.
std::string NotMirroredAdvice();

}  // namespace oomguard
