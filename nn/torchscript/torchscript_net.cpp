#include "nn/torchscript/torchscript_net.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/codegen/fuser/interface.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/meta_tracking_allocator.h"
#include "base/check.h"
#include "base/input_limits.h"
#include "nn/torchscript/device_tensors.h"
#include "nn/torchscript/meta_fast_path.h"
#include "nn/torchscript/torchscript_archive.h"
#include "model/meta_not_mirrored.h"

namespace oomguard {
namespace {

// Note [Eager autograd for TorchScript] (torchscript_net.h): called before every forward, on its
// thread; cheap (a thread-local flag and three globals).
void UseEagerAutograd() {
  torch::jit::setGraphExecutorOptimize(false);
  torch::jit::setTensorExprFuserEnabled(false);
  torch::jit::overrideCanFuseOnCPU(false);
  torch::jit::overrideCanFuseOnGPU(false);
}

// "__torch__.torch.nn.modules.container.___torch_mangle_3.Sequential" -> the same without the
// mangling component, which TorchScript adds when two classes of a file share a name.
std::string UnmangledTypeName(const torch::jit::Module& m) {
  const std::string name = m.type()->name() ? m.type()->name()->qualifiedName() : "";
  std::string out;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t dot = std::min(name.find('.', start), name.size());
    const std::string part = name.substr(start, dot - start);
    if (!part.starts_with("___torch_mangle_")) out += (out.empty() ? "" : ".") + part;
    start = dot + 1;
  }
  return out;
}

// LibTorch's message bounded: the compiler quotes the source around an error, with markers, and the
// variant's error travels into every report.
std::string FirstLines(std::string text) {
  constexpr size_t kMaxLines = 6, kMaxChars = 600;
  text.erase(0, std::min(text.find_first_not_of(" \n"), text.size()));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t end = 0;
  for (size_t line = 0; line < kMaxLines && end != std::string::npos; ++line) {
    end = text.find('\n', end);
    if (end != std::string::npos) ++end;
  }
  std::string out = text.substr(0, std::min({end, text.size(), kMaxChars}));
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out.size() < text.size() ? out + " [...]" : out;
}

std::string ShortTypeName(const torch::jit::Module& m) {
  const std::string name = UnmangledTypeName(m);
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// Ops whose train/eval behaviour the graph fixes when their flag is a constant (torch.jit.trace
// records it so): the op and the index of that flag.
const std::vector<std::pair<std::string, size_t>>& ModeOps() {
  static const auto* ops = new std::vector<std::pair<std::string, size_t>>{
      {"aten::dropout", 2},       {"aten::dropout_", 2},   {"aten::feature_dropout", 2},
      {"aten::alpha_dropout", 2}, {"aten::batch_norm", 5}, {"aten::instance_norm", 5}};
  return *ops;
}

void FindFixedModes(const torch::jit::Block* block, const std::string& where, std::set<std::string>* found) {
  for (const torch::jit::Node* node : block->nodes()) {
    for (const torch::jit::Block* inner : node->blocks()) FindFixedModes(inner, where, found);
    for (const auto& [op, index] : ModeOps()) {
      if (node->kind().toQualString() != op || node->inputs().size() <= index) continue;
      const std::optional<c10::IValue> flag = torch::jit::toIValue(node->input(index));
      if (!flag || !flag->isBool()) continue;
      found->insert(op + " in " + where + " (train=" + (flag->toBool() ? "true" : "false") + ")");
    }
  }
}

// Whether a graph (or a block nested in it) calls `op`.
bool Calls(const torch::jit::Block* block, const std::string& op) {
  for (const torch::jit::Node* node : block->nodes()) {
    if (node->kind().toQualString() == op) return true;
    for (const torch::jit::Block* inner : node->blocks()) {
      if (Calls(inner, op)) return true;
    }
  }
  return false;
}

}  // namespace

struct TorchScriptNet::Loaded {
  ~Loaded() {
    if (loaded) TakeApartAttributes(module);  // Note [Containers in a module's attributes]
  }

  torch::jit::Module module;
  bool loaded = false;                       // module holds what torch::jit::load returned
  std::vector<torch::jit::Module> children;  // an nn.Sequential's, in order; empty otherwise
  std::string type_name;
  std::vector<at::Tensor> parameters;  // each once, in the module's order
  ModuleMeasurement facts;
  std::vector<std::string> warnings;
};

TorchScriptNet::TorchScriptNet(const ModelSpec& spec, const at::TensorOptions& options, bool has_data)
    : loaded_(std::make_unique<Loaded>()) {
  Loaded& l = *loaded_;
  l.facts.file = spec.torchscript;
  UseEagerAutograd();
  {
    // The loader's buffers are not the run's: host memory, and a meta file's meta tensors.
    HostAllocationScope host;
    UncountedMetaScope uncounted;
    try {
      // map_location cpu: a file saved on cuda loads anywhere; one saved from meta stays on meta.
      l.module = torch::jit::load(spec.torchscript, c10::Device(c10::kCPU));
      l.loaded = true;
      CheckByteOrder(spec.torchscript);
    } catch (const ModelFileError&) {
      throw;
    } catch (const std::exception& e) {
      // Note [What torch::jit::load throws]: c10::Error for an archive it cannot read, std::runtime_error
      // (the compiler's ErrorReport, the unpickler's checks) for code it cannot compile or a class it
      // does not know. Both are the file's fault.
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      throw ModelFileError(spec.torchscript + ": not a TorchScript module torch::jit::load can read (" +
                           FirstLines(c10_error ? c10_error->what_without_backtrace() : e.what()) + ")");
    }
  }
  std::vector<FastPathNotFound> fast_path_not_found;
  if (options.device().is_meta()) fast_path_not_found = LetMetaTakeTheFastPath(l.module);
  l.type_name = UnmangledTypeName(l.module);
  if (l.type_name == "__torch__.torch.nn.modules.container.Sequential") {
    for (const torch::jit::NameModule& child : l.module.named_children()) l.children.push_back(child.value);
  }
  l.facts.segments = static_cast<int64_t>(l.children.size());

  // Every parameter and buffer made anew on the device, then every tensor other attributes hold
  // (Note [Tensors a module holds beyond its parameters]); inside the measurement, as the run's own.
  // Not transfers: the record-function callbacks (the transfer counter's) are off.
  at::DisableRecordFunctionGuard no_callbacks;
  at::NoGradGuard no_grad;
  DeviceTensors device(spec.torchscript, options, has_data);
  std::set<const void*> listed;
  for (const torch::jit::NameModule& item : l.module.named_modules()) {
    torch::jit::Module m = item.value;
    for (const torch::jit::NameTensor& p : m.named_parameters(/*recurse=*/false)) {
      if (!p.value.defined()) continue;
      const at::Tensor fresh = device.For(p.name, p.value, /*trainable=*/p.value.requires_grad());
      m.setattr(p.name, fresh);
      if (listed.insert(fresh.unsafeGetTensorImpl()).second) l.parameters.push_back(fresh);
    }
    for (const torch::jit::NameTensor& b : m.named_buffers(/*recurse=*/false)) {
      if (b.value.defined()) m.setattr(b.name, device.For(b.name, b.value, /*trainable=*/false));
    }
  }
  for (const torch::jit::NameModule& item : l.module.named_modules()) device.ReplaceInAttributes(*item.value._ivalue());
  const bool any_meta = device.any_meta(), any_saved = device.any_saved();
  l.facts.weights = !has_data ? "shapes" : any_meta && !any_saved ? "seeded" : any_meta ? "saved+seeded" : "saved";

  std::set<std::string> fixed;
  std::map<std::string, std::set<std::string>> unmirrored;  // op -> the modules that call it
  for (const torch::jit::NameModule& item : l.module.named_modules()) {
    const std::string where = item.name.empty() ? "the top module" : "module " + item.name;
    for (const torch::jit::Method& method : item.value.get_methods()) {
      FindFixedModes(method.graph()->block(), where, &fixed);
      for (const NotMirroredOp& op : NotMirroredOps()) {
        if (options.device().is_meta() && Calls(method.graph()->block(), op.op)) unmirrored[op.op].insert(where);
      }
    }
  }
  for (const NotMirroredOp& op : NotMirroredOps()) {  // in the table's order
    if (!unmirrored.contains(op.op)) continue;
    std::string where;
    for (const std::string& w : unmirrored.at(op.op)) where += (where.empty() ? "" : ", ") + w;
    l.warnings.push_back(spec.torchscript + ": " + op.op + " (in " + where + ") " + op.differs + ", " +
                         NotMirroredConsequence());
  }
  for (const FastPathNotFound& f : fast_path_not_found) {
    l.warnings.push_back(spec.torchscript + ": " + f.op + " (in " +
                         (f.module.empty() ? "the top module" : "module " + f.module) +
                         ") is a fused fast path behind a device check oomguard does not recognise (no list of device "
                         "types naming \"cpu\" and \"cuda\"): meta may run the module's other path where cpu runs "
                         "the fused kernel (evaluation under no_grad), so its bytes on meta may not be cpu's. Run it "
                         "on cpu for exact bytes");
  }
  if (!fixed.empty()) {
    std::string ops;
    for (const std::string& f : fixed) ops += (ops.empty() ? "" : ", ") + f;
    l.warnings.push_back(spec.torchscript + ": " + std::to_string(fixed.size()) +
                         " op(s) have their train/eval flag fixed in the graph, as torch.jit.trace records it: " + ops +
                         ". They run that way in training and in evaluation alike, whatever train()/eval() says; "
                         "script the model with torch.jit.script for them to follow the mode");
  }
}

TorchScriptNet::~TorchScriptNet() = default;

std::vector<at::Tensor> TorchScriptNet::parameters() const { return loaded_->parameters; }

std::string TorchScriptNet::WhyNoSegments() const {
  return "the TorchScript module in " + loaded_->facts.file + " is a " + loaded_->type_name +
         ", not an nn.Sequential: the knobs that need its structure act on an nn.Sequential's top-level children, in "
         "order (script nn.Sequential(...) of your blocks to use them)";
}

namespace {

// The tensor the loss reads: the result itself, or the first tensor of a tuple, list or dict (in its
// order); *how says which.
at::Tensor OutputTensor(const c10::IValue& out, const std::string& file, std::string* how) {
  if (out.isTensor()) {
    *how = "tensor";
    return out.toTensor();
  }
  if (out.isTuple()) {
    const auto& elements = out.toTupleRef().elements();
    for (size_t i = 0; i < elements.size(); ++i) {
      if (elements[i].isTensor()) {
        *how = "tuple[" + std::to_string(i) + "]";
        return elements[i].toTensor();
      }
    }
  } else if (out.isList()) {
    const c10::List<c10::IValue> list = out.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      if (list.get(i).isTensor()) {
        *how = "list[" + std::to_string(i) + "]";
        return list.get(i).toTensor();
      }
    }
  } else if (out.isGenericDict()) {
    for (const auto& entry : out.toGenericDict()) {
      if (entry.value().isTensor()) {
        *how = "dict[" + (entry.key().isString() ? entry.key().toStringRef() : entry.key().tagKind()) + "]";
        return entry.value().toTensor();
      }
    }
  }
  throw ModelFileError(file + ": the forward returned " + out.tagKind() +
                       " holding no tensor: the loss needs a tensor, or a tuple, list or dict whose first tensor is "
                       "the output");
}

}  // namespace

at::Tensor TorchScriptNet::ForwardInputs(const std::vector<at::Tensor>& inputs, bool training) {
  UseEagerAutograd();
  Loaded& l = *loaded_;
  if (l.module.is_training() != training) l.module.train(training);
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  if (trace()) trace()->EnterForward("module " + ShortTypeName(l.module));
  at::Tensor out = OutputTensor(l.module.forward(std::move(args)), l.facts.file, &l.facts.output);
  if (trace()) trace()->Exit();
  return out;
}

size_t TorchScriptNet::segments() const { return loaded_->children.size(); }

std::string TorchScriptNet::segment_name(size_t i) const {
  OOMGUARD_CHECK(i < loaded_->children.size()) << "segment " << i << " of " << loaded_->children.size();
  return std::to_string(i) + ":" + ShortTypeName(loaded_->children[i]);
}

std::vector<at::Tensor> TorchScriptNet::segment_parameters(size_t begin, size_t end) const {
  OOMGUARD_CHECK(begin <= end && end <= loaded_->children.size())
      << "segments [" << begin << ", " << end << ") of " << loaded_->children.size();
  std::vector<at::Tensor> out;
  for (size_t i = begin; i < end; ++i) {
    for (const at::Tensor& p : loaded_->children[i].parameters()) out.push_back(p);
  }
  return out;
}

at::Tensor TorchScriptNet::ForwardSegments(at::Tensor x, size_t begin, size_t end, bool training,
                                           const AfterSegment& after_segment) {
  OOMGUARD_CHECK(begin <= end && end <= loaded_->children.size())
      << "segments [" << begin << ", " << end << ") of " << loaded_->children.size();
  UseEagerAutograd();
  Loaded& l = *loaded_;
  if (l.module.is_training() != training) l.module.train(training);
  for (size_t i = begin; i < end; ++i) {
    if (trace()) trace()->EnterLayer(segment_name(i));
    std::string how;
    x = OutputTensor(l.children[i].forward({x}), l.facts.file, &how);
    if (trace()) trace()->Exit();
    if (after_segment) x = after_segment(i, std::move(x));
  }
  l.facts.output = "tensor";
  return x;
}

std::optional<ModuleMeasurement> TorchScriptNet::module_facts() const { return loaded_->facts; }

std::vector<std::string> TorchScriptNet::warnings() const { return loaded_->warnings; }

}  // namespace oomguard
