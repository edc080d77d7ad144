#!/usr/bin/env python3
"""Checks that no function is longer than 60 lines : in src/ (unit tests
included), tests/, examples/ and build.rs.

A function runs from its `fn` line to the line of its closing brace at the same indentation.
Prints each function over the limit with its file, line and length; exits 1 when there is one.
"""
import pathlib
import re
import sys

LIMIT = 60
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")


def long_functions(path):
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m or line.rstrip().endswith(";"):
            continue
        # A whole function on its line (`fn progress(&mut self) {}`) is one line long.
        if "{" in line and line.count("{") == line.count("}"):
            continue
        indent = m.group(1)
        for j in range(i, len(lines)):
            if lines[j].startswith(indent + "}") and not lines[j].startswith(indent + "} else"):
                length = j - i + 1
                if length > LIMIT:
                    out.append((path, i + 1, m.group(8), length))
                break
    return out


PLACES = ["src", "tests", "examples", "build.rs"]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = []
    for place in PLACES:
        p = root / place
        files += [p] if p.is_file() else sorted(p.rglob("*.rs"))
    bad = [f for p in files for f in long_functions(p)]
    for path, line, name, length in bad:
        print(f"{path.relative_to(root)}:{line}: fn {name} is {length} lines (limit {LIMIT})")
    if bad:
        sys.exit(1)
    print(f"no function over {LIMIT} lines in {', '.join(PLACES)} ({len(files)} files)")


if __name__ == "__main__":
    main()
