// Where the user's Python code is when an operator runs, for oomguard._core (core.cpp): the innermost
// frame outside torch, oomguard and contextlib, with its source line, and the line of the loop that
// called it (oomguard.measure's m.iterations() and m.phase() say which function the loop is).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace oomguard::python {

// The code object of the function that runs the measured loop; None forgets it.
void SetLoopCode(pybind11::object code);
// "train.py:41 (total += loss)", or "model.py:30 (...), called from train.py:55 (...)"; empty on a thread
// that runs no Python (MeasureScope::SetCallerLocation: asked once per outermost operator).
std::string PythonCallerLocation();

}  // namespace oomguard::python
