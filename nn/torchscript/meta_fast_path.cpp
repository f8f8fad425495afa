#include "nn/torchscript/meta_fast_path.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>

namespace oomguard {
namespace {

using torch::jit::Block;
using torch::jit::Node;

constexpr const char* kFusedOps[] = {"aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"};

std::optional<std::string> StringConstant(const torch::jit::Value* v) {
  const std::optional<c10::IValue> value = torch::jit::toIValue(v);
  if (!value || !value->isString()) return std::nullopt;
  return value->toStringRef();
}

// What one graph holds that the rewrite needs.
struct Found {
  std::string fused_op;                        // the fused op it calls, if any
  std::vector<Node*> device_lists;             // lists of string constants naming "cpu" and "cuda"
  std::vector<torch::jit::Function*> callees;  // the functions it calls (prim::CallFunction)
};

void Visit(Block* block, Found* found) {
  for (Node* node : block->nodes()) {
    for (Block* inner : node->blocks()) Visit(inner, found);
    for (const char* op : kFusedOps) {
      if (node->kind().toQualString() == std::string_view(op)) found->fused_op = op;
    }
    if (node->kind() == c10::prim::CallFunction) {
      if (const auto fn = node->input(0)->type()->cast<c10::FunctionType>()) found->callees.push_back(fn->function());
    }
    if (node->kind() != c10::prim::ListConstruct) continue;
    bool cpu = false, cuda = false, strings = true;
    for (const torch::jit::Value* input : node->inputs()) {
      const std::optional<std::string> s = StringConstant(input);
      strings = strings && s.has_value();
      cpu = cpu || s == "cpu";
      cuda = cuda || s == "cuda";
    }
    if (strings && cpu && cuda) found->device_lists.push_back(node);
  }
}

void AddMeta(Node* list) {
  for (const torch::jit::Value* input : list->inputs()) {
    if (StringConstant(input) == "meta") return;  // a graph two modules of one class share
  }
  torch::jit::WithInsertPoint here(list);
  list->addInput(list->owningGraph()->insertConstant(std::string("meta")));
}

}  // namespace

std::vector<FastPathNotFound> LetMetaTakeTheFastPath(const torch::jit::Module& module) {
  std::vector<FastPathNotFound> not_found;
  for (const torch::jit::NameModule& item : module.named_modules()) {
    for (const torch::jit::Method& method : item.value.get_methods()) {
      Found found;
      Visit(method.graph()->block(), &found);
      if (found.fused_op.empty()) continue;
      // One level down: MultiheadAttention checks each tensor in _check_arg_device.
      for (torch::jit::Function* callee : found.callees) {
        if (!callee->isGraphFunction()) continue;
        Found inner;
        Visit(torch::jit::toGraphFunction(*callee).graph()->block(), &inner);
        found.device_lists.insert(found.device_lists.end(), inner.device_lists.begin(), inner.device_lists.end());
      }
      if (found.device_lists.empty()) not_found.push_back({found.fused_op, item.name});
      for (Node* list : found.device_lists) AddMeta(list);
    }
  }
  return not_found;
}

}  // namespace oomguard
