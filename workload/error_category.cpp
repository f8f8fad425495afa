#include "workload/error_category.h"

#include <c10/util/Exception.h>

#include <optional>

#include "allocators/install.h"
#include "model/meta_not_mirrored.h"

namespace oomguard {

ErrorCategory CategorizeError(std::string_view message) {
  if (message.find("modified by an inplace operation") != std::string_view::npos) {
    return ErrorCategory::kInplaceSavedTensor;
  }
  if (message.find("leaf Variable that requires grad") != std::string_view::npos) return ErrorCategory::kInplaceLeaf;
  if (message.find("with Meta tensors") != std::string_view::npos ||
      message.find(kNotMirroredMarker) != std::string_view::npos ||
      message.find("Meta kernel") != std::string_view::npos) {
    return ErrorCategory::kMetaKernelMissing;
  }
  return ErrorCategory::kError;
}

std::string ErrorMessage(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

namespace {

// Note [TorchScript interpreter errors]: an op failing inside a TorchScript module reaches us as the
// interpreter's message: two tracebacks (serialized code, then the original Python) and, last, the
// op's own error as "RuntimeError: <message>". The measurement keeps that message and the innermost
// frame of the original code: the user's line, which is what they will edit.
struct ScriptError {
  std::string message;          // the op's error
  std::string frame;            // "make_models.py:70: y = F.scaled_dot_product_attention(q, k, v, is_causal=True)"
  bool frame_is_torch = false;  // the frame is in torch's own Python files (no user frame was found)
};

// One "File \"PATH\", line N, in NAME" frame at `at`, as "name.py:N: code".
std::string FrameAt(const std::string& m, size_t at, size_t* marker) {
  const size_t path_begin = at + 10;
  const size_t path_end = m.find('"', path_begin);
  const size_t line_at = path_end == std::string::npos ? path_end : m.find(", line ", path_end);
  *marker = path_end == std::string::npos ? path_end : m.find("<--- HERE", path_end);
  if (line_at == std::string::npos || *marker == std::string::npos) return "";
  std::string path = m.substr(path_begin, path_end - path_begin);
  if (path.rfind('/') != std::string::npos) path = path.substr(path.rfind('/') + 1);
  const size_t digits = m.find_first_not_of("0123456789", line_at + 7);
  const std::string line = m.substr(line_at + 7, digits - line_at - 7);
  const size_t marker_line = m.rfind('\n', *marker);  // the code line is the one above the marker's
  const size_t code_begin = m.rfind('\n', marker_line - 1) + 1;
  std::string code = m.substr(code_begin, marker_line - code_begin);
  code.erase(0, code.find_first_not_of(' '));
  return path + ":" + line + ": " + code;
}

std::optional<ScriptError> ParseScriptError(const std::string& m) {
  if (!m.starts_with("The following operation failed in the TorchScript interpreter.")) return std::nullopt;
  ScriptError out;
  const size_t original = m.find("Traceback of TorchScript, original code");
  size_t end_of_trace = std::string::npos;
  // The innermost frame outside torch's own files (the user's line), else the innermost.
  for (size_t at = m.find("\n  File \"", original == std::string::npos ? 0 : original); at != std::string::npos;
       at = m.find("\n  File \"", at + 1)) {
    size_t marker = std::string::npos;
    const std::string frame = FrameAt(m, at, &marker);
    if (frame.empty()) continue;
    const std::string path = m.substr(at + 10, m.find('"', at + 10) - at - 10);
    const bool torch_file = path.find("-packages/torch/") != std::string::npos;
    if (!torch_file || out.frame.empty() || out.frame_is_torch) {
      out.frame = frame;
      out.frame_is_torch = torch_file;
    }
    end_of_trace = m.find('\n', marker);
  }
  // The op's error follows the last frame: "RuntimeError: ..." (or another exception's name).
  const std::string rest = end_of_trace == std::string::npos ? "" : m.substr(end_of_trace);
  const size_t error_line = rest.find("Error: ");
  out.message = error_line == std::string::npos ? rest : rest.substr(error_line + 7);
  while (!out.message.empty() && (out.message.back() == '\n' || out.message.back() == ' ')) out.message.pop_back();
  if (out.message.empty()) out.message = m;
  return out;
}

}  // namespace

std::string DescribeError(const std::exception& e, const std::string& location) {
  std::string message = ErrorMessage(e);
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return message;  // the OOM report says where
  std::string place = location;
  if (std::optional<ScriptError> script = ParseScriptError(message)) {
    if (script->message.find(" out of memory") != std::string::npos) return script->message;
    message = script->message;
    if (!script->frame.empty()) place += (place.empty() ? "at " : ", at ") + script->frame;
  }
  const std::string where = place.empty() ? "" : " (" + place + ")";
  // A Meta kernel's own words for what it does not mirror (model/meta_not_mirrored.h) say it all.
  if (const size_t marker = message.find(kNotMirroredMarker); marker != std::string::npos) {
    return message.substr(0, marker) + where + message.substr(marker);
  }
  if (CategorizeError(message) == ErrorCategory::kMetaKernelMissing) {
    const size_t colon = message.find(": ");
    const std::string op = colon == std::string::npos ? "an operator" : message.substr(0, colon);
    return op + " has no Meta kernel" + where +
           ": LibTorch ships none and oomguard registers none, so meta does not mirror it. " + NotMirroredAdvice() +
           ".";
  }
  // An embedding fed the default float32 data: the scenario's data, not the model, is what to change.
  if (message.find("argument #1 'indices'") != std::string::npos &&
      message.find("for embedding") != std::string::npos) {
    return message + where +
           ". A model whose first layer takes token ids needs \"data\": {\"dtype\": \"int64\", \"vocab\": N} "
           "(scenarios/FORMAT.md, data)";
  }
  // Note [One oneDNN ISA on every machine] (allocators/install.h): PyTorch may send an op to oneDNN that
  // has no kernel for it under the cap (bf16 autocast lowers an LSTM's oneDNN RNN to bf16), as on an AVX2
  // machine. Say so: the error is the cpu's, not the model's.
  if (message.find("could not create a primitive descriptor") != std::string::npos && OneDnnIsaCap() == "AVX2") {
    return message + where +
           ". oomguard caps oneDNN at AVX2 so that cpu's bytes are the same on every machine (Note [One oneDNN ISA "
           "on every machine]), and at that level oneDNN has no kernel for this op, as on an AVX2 cpu; a GPU runs "
           "its own. ONEDNN_MAX_CPU_ISA=ALL lifts the cap, with this machine's bytes";
  }
  return message + where;
}

VariantOutcome OutcomeOfException(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return VariantOutcome::Oom();
  const std::string message = ErrorMessage(e);
  if (std::optional<ScriptError> script = ParseScriptError(message)) {
    // The interpreter rethrows an OutOfMemoryError as a plain error: the allocator's words tell it.
    if (script->message.find(" out of memory") != std::string::npos) return VariantOutcome::Oom();
    return VariantOutcome::Error(CategorizeError(script->message));
  }
  return VariantOutcome::Error(CategorizeError(message));
}

bool IsScriptInterpreterError(const std::exception& e) { return ParseScriptError(ErrorMessage(e)).has_value(); }

}  // namespace oomguard
