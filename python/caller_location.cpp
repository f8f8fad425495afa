#include "python/caller_location.h"

#include <cstring>
#include <string>

namespace py = pybind11;

namespace oomguard::python {
namespace {

// torch's and oomguard's own frames, and the context managers between them and the user's line.
bool Internal(const std::string& module) {
  for (const char* prefix : {"torch", "oomguard", "contextlib"}) {
    const size_t n = std::strlen(prefix);
    if (module.compare(0, n, prefix) == 0 && (module.size() == n || module[n] == '.')) return true;
  }
  return false;
}

// The code object of the function that runs the measured loop (the caller of m.iterations() or
// m.phase()), or null: a code object, not the frame, which would keep the loop's tensors alive.
PyObject* loop_code = nullptr;

// The source line without a trailing comment: "history.append(loss)   # keeps the graph" -> "history.append(loss)".
std::string WithoutComment(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#') {
      const size_t end = i == 0 ? std::string::npos : line.find_last_not_of(" \t", i - 1);
      return end == std::string::npos ? "" : line.substr(0, end + 1);
    }
  }
  return line;
}

std::string Describe(const py::object& frame) {
  const std::string file = py::str(frame.attr("f_code").attr("co_filename"));
  const int line = frame.attr("f_lineno").cast<int>();
  const std::string text =
      WithoutComment(py::str(py::module_::import("linecache").attr("getline")(file, line).attr("strip")()));
  return file.substr(file.rfind('/') + 1) + ":" + std::to_string(line) + (text.empty() ? "" : " (" + text + ")");
}

}  // namespace

void SetLoopCode(py::object code) {
  Py_XDECREF(loop_code);
  loop_code = code.is_none() ? nullptr : code.release().ptr();
}

// The innermost Python frame outside them, with its source text: "train.py:41 (total += loss)", and
// when that is not the loop's own line, the loop's line it was called from ("model.py:30 (...), called
// from train.py:55 (history.append(model(x).loss))"); empty on a thread that runs no Python
// (MeasureScope::SetCallerLocation: asked once per outermost operator).
std::string PythonCallerLocation() {
  py::gil_scoped_acquire gil;  // torch's bindings release it around the operator
  try {
    py::object frame = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(PyEval_GetFrame()));
    std::string where;
    while (frame && !frame.is_none()) {
      const bool in_loop = loop_code != nullptr && frame.attr("f_code").ptr() == loop_code;
      if (!where.empty()) {
        if (in_loop) return where + ", called from " + Describe(frame);
      } else if (!Internal(py::str(frame.attr("f_globals").attr("get")("__name__", "")))) {
        where = Describe(frame);
        if (in_loop || loop_code == nullptr) return where;
      }
      frame = frame.attr("f_back");
    }
    return where;
  } catch (const py::error_already_set&) {  // a frame without the usual attributes: no place, not a failure
  }
  return "";
}

}  // namespace oomguard::python
