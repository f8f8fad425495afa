"""Builds the Python package's extension module oomguard._core for another Python version than the build's,
from the build's own compile and link commands (ci/gpu_bundle.sh, for a GPU machine whose python3 differs).

Note [A _core per Python]: _core is a pybind11 module, compiled against one Python's headers and named for
it (_core.cpython-311-x86_64-linux-gnu.so); another minor version cannot import it. The lent GPU machines'
python3 is 3.12 and this machine's build uses 3.11. Everything else in the module is the same: torch's
headers do not depend on the Python version, and libtorch_python.so, which it links, exports the same C++
symbols in every wheel of one torch version (the one the GPU machine's torch has loaded is the one it binds
to). So the module's three sources are compiled again with the other Python's include folder (the build's
compile_commands.json, that one flag swapped) and linked as the build links it (its build.ninja), named with
that Python's EXT_SUFFIX. Needs the Ninja generator (ci/build.sh's when ninja is installed).

    python3 ci/gpu_core_for_python.py BUILD_DIR PYTHON OUT_DIR   # writes OUT_DIR/_core<EXT_SUFFIX>
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

TARGET = "oomguard_python"


def ask(python, expression):
    return subprocess.run([python, "-c", f"import sysconfig; print({expression})"], check=True,
                          capture_output=True, text=True).stdout.strip()


def compile_commands(build):
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = [e for e in json.load(f) if f"/CMakeFiles/{TARGET}.dir/" in e.get("output", e["command"])]
    if not entries:
        sys.exit(f"gpu_core_for_python: no {TARGET} sources in {build}/compile_commands.json")
    return entries


def link_block(build):
    """The build.ninja variables of the module's link edge: LINK_FLAGS, LINK_PATH, LINK_LIBRARIES."""
    try:
        text = open(os.path.join(build, "build.ninja")).read()
    except OSError:
        sys.exit(f"gpu_core_for_python: {build}/build.ninja is missing: the build must use Ninja")
    match = re.search(r"^build python/oomguard/_core[^:]*\.so: CXX_MODULE_LIBRARY_LINKER__\S+ .*?\n((?:  .*\n)+)", text, re.M)
    if match is None:
        sys.exit(f"gpu_core_for_python: no _core link edge in {build}/build.ninja")
    return dict(re.findall(r"^  (\w+) = (.*)$", match.group(1), re.M))


def main():
    build, python, out = (os.path.abspath(a) if i != 1 else a for i, a in enumerate(sys.argv[1:4]))
    include, suffix = ask(python, "sysconfig.get_paths()['include']"), ask(python, "sysconfig.get_config_var('EXT_SUFFIX')")
    entries = compile_commands(build)
    scratch = tempfile.mkdtemp(prefix="oomguard-core-")
    objects, commands = [], []
    for e in entries:
        args = shlex.split(e["command"])
        swapped = 0
        for i, arg in enumerate(args[:-1]):
            if arg == "-isystem" and re.search(r"/include/python3\.\d+$", args[i + 1]):
                args[i + 1], swapped = include, swapped + 1
        if swapped != 1:
            sys.exit(f"gpu_core_for_python: {e['file']}: expected one Python include folder, found {swapped}")
        obj = os.path.join(scratch, os.path.basename(e["file"]) + ".o")
        args[args.index("-o") + 1] = obj
        objects.append(obj)
        commands.append((args, e["directory"]))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for done in pool.map(lambda c: subprocess.run(c[0], cwd=c[1]), commands):
            if done.returncode != 0:
                sys.exit(f"gpu_core_for_python: compiling for {python} failed")
    v = link_block(build)
    target = os.path.join(out, "_core" + suffix)
    link = (f"c++ -fPIC {v.get('LANGUAGE_COMPILE_FLAGS', '')} {v.get('LINK_FLAGS', '')} -shared -o {shlex.quote(target)} "
            f"{' '.join(map(shlex.quote, objects))} {v.get('LINK_PATH', '')} {v.get('LINK_LIBRARIES', '')}")
    subprocess.run(link, shell=True, cwd=build, check=True)
    print(target)


if __name__ == "__main__":
    main()
