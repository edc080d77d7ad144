#!/usr/bin/env python3
"""rust-version in Cargo.toml must equal the highest rust-version among the locked dependencies
built for this platform (`cargo metadata --filter-platform` of the lock file, every dependency
kind: the tests are built too): a lower one promises builds that fail, a higher one refuses
toolchains that would work. Prints the packages that set the bar."""
import json
import subprocess
import sys


def version(v):
    return tuple(int(x) for x in v.split(".")) + (0,) * (3 - len(v.split(".")))


host = next(
    line.split(": ", 1)[1]
    for line in subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout.splitlines()
    if line.startswith("host: ")
)
meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", host],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
root = meta["resolve"]["root"]
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
seen, todo = set(), [root]
while todo:
    i = todo.pop()
    if i in seen:
        continue
    seen.add(i)
    todo.extend(d["pkg"] for d in nodes[i]["deps"])
ours = next(p for p in meta["packages"] if p["id"] == root)
declared = ours.get("rust_version")
deps = [(p["rust_version"], p["name"], p["version"]) for p in meta["packages"]
        if p["id"] in seen and p["id"] != root and p.get("rust_version")]
need = max(version(d[0]) for d in deps)
bar = sorted({f"{n} {v} ({rv})" for rv, n, v in deps if version(rv) == need})
need_text = ".".join(str(x) for x in need).removesuffix(".0")
if declared is None or version(declared) != need:
    print(f"check-msrv: Cargo.toml says rust-version = {declared!r}, the locked dependencies need {need_text}: {', '.join(bar)}", file=sys.stderr)
    sys.exit(1)
print(f"check-msrv: rust-version {declared} = what the locked dependencies need ({', '.join(bar)})")
