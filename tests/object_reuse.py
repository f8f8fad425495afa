"""A compiler launcher for the tests that build oomguard again in a folder of their own: a compile
that would be the main build's takes the main build's object, and the rest is compiled for real.
Package.AddSubdirectoryAndFetchContentBuildAConsumer (package/package_test.cmake: oomguard inside a
consumer's build) and LibTorchFree.LoaderAndWritersBuildAndPassWithoutLibTorch
(libtorch_free_build.cmake: the LibTorch-free floors and their tests) use it; ccache cannot serve
them, as their compiles run at another depth, and a fresh machine's cache is cold.

    CMAKE_CXX_COMPILER_LAUNCHER="python;object_reuse.py;MAIN_BUILD;NINJA;OTHER_BUILD;LOG;LAUNCHER"

MAIN_BUILD is oomguard's own Ninja build, already built; NINJA its make program; OTHER_BUILD the
folder where the test builds oomguard (a consumer's <build>/_deps/oomguard-build, or the LibTorch-free
build); LOG a file that gets one line per compile ("reused OBJECT" or "compiled OBJECT: why");
LAUNCHER the real launcher (ccache), or "none". The compile command follows, as Ninja runs it:
`c++ ARGS -MD -MT OBJ -MF DEPFILE -o OBJ -c SOURCE`.

Note [Why a reused object is the object the other build would compile]
A compile's output is a function of its command line, its working folder, the source and every
file it includes. An object is reused only when, with MAIN_BUILD and OTHER_BUILD both written as
<build> and every other path absolute:
  - the main build compiled the same source into the same <build>-relative object, with the same
    compiler and the same arguments (compile_commands.json; the depfile flags and -o aside);
  - the main build's record of what that compile included (`ninja -t deps`) is VALID, and no file
    it names is newer than the object (so the object is up to date);
  - every included file inside <build> (configure_file output: generated/build_info.h) has the same
    bytes in both builds; the ones outside are the same files.
The object is then copied (never linked: a later real compile must not write through into the main
build), and the depfile Ninja asks for lists the same includes, in OTHER_BUILD's folders. What
remains real is the test's configure, its build graph, the archives, every link and every test run:
a compile that would differ (another flag, a define, a generated header) runs for real.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys


def normalised(args, cwd, build):
    """(object, source, the rest) of a compile command, with `build` written as <build>."""
    rest, obj, source, skip = [], None, None, False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-MT", "-MF", "-o", "-c"):
            skip = True
            value = os.path.normpath(os.path.join(cwd, args[i + 1]))
            if arg == "-o":
                obj = value
            elif arg == "-c":
                source = value
            continue
        if arg == "-MD":
            continue
        rest.append(arg.replace(build, "<build>"))
    return obj, source, rest


def main_compile(main_build, source, relative_obj):
    with open(os.path.join(main_build, "compile_commands.json")) as f:
        entries = json.load(f)
    for entry in entries:
        if os.path.normpath(entry["file"]) != source:
            continue
        obj, _, rest = normalised(shlex.split(entry["command"]), entry["directory"], main_build)
        if obj == os.path.join(main_build, relative_obj):
            return obj, rest
    return None, None


def included_files(ninja, main_build, relative_obj):
    """The files the main build's compile of the object included, or (None, why)."""
    out = subprocess.run([ninja, "-C", main_build, "-t", "deps", relative_obj], capture_output=True, text=True)
    lines = out.stdout.splitlines()
    if out.returncode != 0 or not lines or not lines[0].endswith("(VALID)"):
        return None, f"the main build has no valid record of its includes ({lines[0] if lines else out.stderr.strip()})"
    return [os.path.normpath(os.path.join(main_build, line.strip())) for line in lines[1:] if line.strip()], None


def reuse(main_build, ninja, other_build, args):
    """The depfile text after copying the main build's object, or (None, why not)."""
    cwd = os.getcwd()
    obj, source, rest = normalised(args, cwd, other_build)
    if obj is None or not obj.startswith(other_build + os.sep):
        return None, "outside OTHER_BUILD (not oomguard's)"
    relative_obj = os.path.relpath(obj, other_build)
    main_obj, main_rest = main_compile(main_build, source, relative_obj)
    if main_obj is None:
        return None, "the main build does not compile it"
    if main_rest != rest:
        first = next((i for i, (a, b) in enumerate(zip(rest, main_rest)) if a != b), min(len(rest), len(main_rest)))
        return None, f"its command differs from the main build's at argument {first}: {rest[first:first + 3]} " \
                     f"against {main_rest[first:first + 3]}"
    includes, why = included_files(ninja, main_build, relative_obj)
    if includes is None:
        return None, why
    built = os.stat(main_obj).st_mtime_ns
    other_includes = []
    for path in includes:
        if not os.path.exists(path):
            return None, f"{path}, which the main build's object includes, is gone"
        if os.stat(path).st_mtime_ns > built:
            return None, f"the main build's object is older than {path}"
        if path.startswith(main_build + os.sep):
            mine = os.path.join(other_build, os.path.relpath(path, main_build))
            if not os.path.exists(mine):
                return None, f"{mine} is missing"
            with open(path, "rb") as a, open(mine, "rb") as b:
                if a.read() != b.read():
                    return None, f"{mine} differs from the main build's"
            path = mine
        other_includes.append(path)
    shutil.copyfile(main_obj, obj)
    return " ".join(p.replace(" ", "\\ ") for p in [args[args.index("-MT") + 1] + ":"] + other_includes), None


def main():
    main_build, ninja, other_build, log, launcher = sys.argv[1:6]
    command = sys.argv[6:]
    try:
        depfile, why = reuse(os.path.normpath(main_build), ninja, os.path.normpath(other_build), command)
    except Exception as e:  # anything this launcher did not foresee: the compile is real
        depfile, why = None, f"not checked ({type(e).__name__}: {e})"
    obj = command[command.index("-o") + 1] if "-o" in command else "?"
    with open(log, "a") as f:
        f.write(f"reused {obj}\n" if why is None else f"compiled {obj}: {why}\n")
    if why is None:
        with open(command[command.index("-MF") + 1], "w") as f:
            f.write(depfile + "\n")
        return 0
    return subprocess.run(([] if launcher == "none" else [launcher]) + command).returncode


if __name__ == "__main__":
    sys.exit(main())
