#!/usr/bin/env python3
"""Each C++ file includes the standard header of what it names, where newer
compilers no longer bring that header in through another one.

The GPU host builds with gcc 13, whose libstdc++ stopped including <cstdint>,
<cstdio> and <system_error> from its other headers (<thread> no longer brings
<system_error>); this machine has gcc 12, where the omission compiles. The first
build on a GPU host stopped at `catch (const std::system_error&)` in
src/cuda/nvml_sampler.cc for want of `#include <system_error>`, unseen by every
build here. This check reads the sources instead: a file that names one of the
symbols below must include one of its headers, itself or through the project's
own headers (which it includes with quotes), recursively.

    check_includes.py [ROOT]      exit 0 when every file holds, 1 with a line a miss
"""
import os
import re
import sys

# symbol pattern -> the headers that declare it (any one will do)
NEEDS = [
    (r"\bstd::(system_error|error_code|errc|generic_category|system_category)\b",
     ("system_error",)),
    (r"\bstd::(runtime_error|logic_error|invalid_argument|out_of_range|range_error|"
     r"overflow_error|length_error|domain_error)\b", ("stdexcept",)),
    (r"\b(std::)?u?int(8|16|32|64)_t\b|\b(std::)?u?intptr_t\b|\bu?intmax_t\b",
     ("cstdint", "stdint.h", "inttypes.h", "cinttypes")),
    (r"\b(std::)?(s?n?printf|fprintf|fopen|fclose|fgets|fputs|fflush|sscanf|fscanf|perror|"
     r"fread|fwrite|popen|pclose|fileno|setvbuf)\s*\(|\bFILE\s*\*",
     ("cstdio", "stdio.h")),
]
SOURCES = (".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh")
DIRS = ("src", "bench", "tests", "tools", "examples")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def sources(root):
    for d in DIRS:
        for here, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if f.endswith(SOURCES):
                    yield os.path.join(here, f)


class Includes:
    """The standard headers a file includes, itself and through the project's
    own headers (found beside the file or under any directory of the tree)."""

    def __init__(self, root, files):
        self.by_tail = {}
        for f in files:
            rel = os.path.relpath(f, root)
            parts = rel.split(os.sep)
            for i in range(len(parts)):
                self.by_tail.setdefault("/".join(parts[i:]), []).append(f)
        self.memo = {}

    def own(self, name, beside):
        local = os.path.join(os.path.dirname(beside), name)
        if os.path.exists(local):
            return [os.path.normpath(local)]
        return self.by_tail.get(name, [])

    def of(self, path, seen=None):
        if path in self.memo:
            return self.memo[path]
        seen = seen or set()
        if path in seen:
            return set()
        seen.add(path)
        with open(path, errors="replace") as f:
            text = f.read()
        found = set()
        for kind, name in INCLUDE.findall(text):
            if kind == "<":
                found.add(name)
            for dep in self.own(name, path):
                found |= self.of(dep, seen)
        self.memo[path] = found
        return found


def misses(root):
    files = sorted(sources(root))
    inc = Includes(root, files)
    out = []
    for path in files:
        with open(path, errors="replace") as f:
            code = STRING.sub('""', COMMENT.sub("", f.read()))
        have = inc.of(path)
        for pattern, headers in NEEDS:
            m = re.search(pattern, code)
            if m and not have.intersection(headers):
                line = code[:m.start()].count("\n") + 1
                out.append(f"{os.path.relpath(path, root)}:{line}: names {m.group(0).strip()} "
                           f"without #include <{headers[0]}>")
    return out


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    found = misses(root)
    for line in found:
        print(line)
    n = sum(1 for _ in sources(root))
    print(f"check_includes: {n} files, {len(found)} missing standard header(s)"
          + (" (gcc 13's libstdc++ no longer includes them transitively)" if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
