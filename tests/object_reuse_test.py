"""tests/object_reuse.py on a two-file project built twice with Ninja: a "main" build, then "other"
builds one folder deeper that take its objects only where the compile would be the same. Run by
CTest (ObjectReuse.*); each case asserts the launcher's whole log.

    object_reuse_test.py CMAKE NINJA CXX SCRATCH
"""
import os
import shutil
import subprocess
import sys

CMAKE, NINJA, CXX, SCRATCH = sys.argv[1:5]
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "object_reuse.py")
SOURCE = os.path.join(SCRATCH, "src")
MAIN = os.path.join(SCRATCH, "main")

PROJECT = """cmake_minimum_required(VERSION 3.25)
project(reuse CXX)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(VALUE 1 CACHE STRING "")
set(B_DEFINE "" CACHE STRING "")
configure_file(value.h.in generated/value.h)
add_library(parts STATIC a.cpp b.cpp)
target_include_directories(parts PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
if(B_DEFINE)
  set_source_files_properties(b.cpp PROPERTIES COMPILE_DEFINITIONS ${B_DEFINE})
endif()
"""
FILES = {"CMakeLists.txt": PROJECT, "value.h.in": "#define VALUE @VALUE@\n",
         "a.cpp": '#include "value.h"\nint a() { return VALUE; }\n', "b.cpp": "int b() { return 2; }\n"}
OBJ = {name: f"CMakeFiles/parts.dir/{name}.o" for name in ("a.cpp", "b.cpp")}


def run(*command, cwd=None):
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAILED: `{' '.join(command)}` exited with {out.returncode}:\n{out.stdout}{out.stderr}")


def build_other(name, *defines):
    """Configures and builds SCRATCH/other/NAME through the launcher; returns its log's lines."""
    other = os.path.join(SCRATCH, "other", name)
    log = os.path.join(other, "reuse.log")
    os.makedirs(other)
    with open(os.path.join(other, "reuse.cmake"), "w") as f:
        f.write(f'set(CMAKE_CXX_COMPILER_LAUNCHER [[{sys.executable};{LAUNCHER};{MAIN};{NINJA};{other};{log};none]] '
                'CACHE STRING "")\n')
    run(CMAKE, "-C", os.path.join(other, "reuse.cmake"), "-S", SOURCE, "-B", other, "-G", "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={NINJA}", f"-DCMAKE_CXX_COMPILER={CXX}", *defines)
    run(NINJA, "-C", other)
    with open(log) as f:
        return other, sorted(f.read().splitlines())


def expect(case, got, expected):
    if got != expected:
        sys.exit(f"FAILED: {case}: the log is\n  " + "\n  ".join(got) + "\nexpected\n  " + "\n  ".join(expected))
    print(f"{case}: as expected")


shutil.rmtree(SCRATCH, ignore_errors=True)
os.makedirs(SOURCE)
for name, text in FILES.items():
    with open(os.path.join(SOURCE, name), "w") as f:
        f.write(text)
run(CMAKE, "-S", SOURCE, "-B", MAIN, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}", f"-DCMAKE_CXX_COMPILER={CXX}")
run(NINJA, "-C", MAIN)

other, log = build_other("same")
expect("the same compiles", log, [f"reused {OBJ['a.cpp']}", f"reused {OBJ['b.cpp']}"])
for name in OBJ.values():
    with open(os.path.join(MAIN, name), "rb") as mine, open(os.path.join(other, name), "rb") as theirs:
        if mine.read() != theirs.read():
            sys.exit(f"FAILED: the same compiles: {name} is not a copy of the main build's")
# Ninja took the depfile: the reused object depends on the generated header in the other build.
deps = subprocess.run([NINJA, "-C", other, "-t", "deps", OBJ["a.cpp"]], capture_output=True, text=True).stdout
if os.path.join(other, "generated", "value.h") not in deps or "(VALID)" not in deps:
    sys.exit(f"FAILED: the same compiles: the depfile Ninja read for a.cpp is not the other build's:\n{deps}")

_, log = build_other("generated", "-DVALUE=7")
expect("another generated header", log, [
    f"compiled {OBJ['a.cpp']}: {SCRATCH}/other/generated/generated/value.h differs from the main build's",
    f"reused {OBJ['b.cpp']}"])

_, log = build_other("define", "-DB_DEFINE=EXTRA=1")
expect("another define", log, [
    f"compiled {OBJ['b.cpp']}: its command differs from the main build's at argument 1: "
    "['-DEXTRA=1', '-I<build>/generated'] against ['-I<build>/generated']",
    f"reused {OBJ['a.cpp']}"])

# A source edited after the main build compiled it: the main build's object is stale.
later = os.stat(os.path.join(MAIN, OBJ["b.cpp"])).st_mtime_ns + 1_000_000_000
os.utime(os.path.join(SOURCE, "b.cpp"), ns=(later, later))
_, log = build_other("stale")
expect("a source newer than the main build's object", log, [
    f"compiled {OBJ['b.cpp']}: the main build's object is older than {SOURCE}/b.cpp",
    f"reused {OBJ['a.cpp']}"])
