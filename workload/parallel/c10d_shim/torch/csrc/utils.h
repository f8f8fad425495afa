// Note [FakeProcessGroup without Python]: c10d's FakeProcessGroup.hpp includes <torch/csrc/utils.h>
// and uses nothing from it, but that header includes <Python.h> (through torch/csrc/Storage.h), which a
// LibTorch C++ program neither has nor needs. This empty stand-in comes first on the include path of
// workload/parallel/data_parallel.cpp and tests/parallel_reducer_test.cpp alone (their CMakeLists.txt), so the
// fake group's header compiles without Python; every other file sees torch's own.
#pragma once
