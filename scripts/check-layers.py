#!/usr/bin/env python3
"""Checks that the modules of src/ are layered: no cycle between folders, none between siblings.

Builds the graph of which module uses which (`use crate::…`, `use super::…`, `self::…`, a child
module's name, and the same paths written inline in code), then, at every level of the module
tree, looks at the children of one module (the top-level folders and files of src/ under
`lib.rs`; the files of one folder; …): module X depends on its sibling Y when anything in X
(X's files and folders, inline `mod tests` included) names anything in Y. That graph must have
no cycle. A parent and its own children may use each other (`mod.rs` re-exports, `super::`),
but a name a parent re-exports (`pub use child::Item`) counts as the child it comes from, so a
cycle cannot hide behind a re-export.

Prints each cycle with the line that makes each of its edges and exits 1 when there is one.
`--self-test` checks the checker on small trees it writes to a temp directory.
"""
import pathlib
import re
import sys
import tempfile

MOD_DECL = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
INLINE_MOD = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")
USE = re.compile(r"\buse\s+([^;]+);")
PATH = re.compile(r"(?<![\w:])((?:crate|super|self)(?:\s*::\s*\w+)+)")


def blank(text):
    """The source with comments, strings and char literals replaced by spaces (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif m := re.match(r'b?r(#*)"', text[i:]):
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"' or text.startswith('b"', i):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif m := re.match(r"b?'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:]):
            j = i + len(m.group(0))
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def load_tree(src):
    """Module path (a tuple) → (file, blanked text), walking `mod` declarations from lib.rs."""
    files = {}

    def visit(mod, path, owns_dir):
        raw = path.read_text()
        text = blank(raw)  # same length: positions in one are positions in the other
        files[mod] = (path, text)
        here = path.parent if owns_dir else path.parent / path.stem
        for m in MOD_DECL.finditer(text):
            attr, name = PATH_ATTR.search(raw[m.start(1) : m.end(1)]), m.group(2)
            if attr:
                child, child_owns = path.parent / attr.group(1), True
            elif (here / f"{name}.rs").is_file():
                child, child_owns = here / f"{name}.rs", False
            else:
                child, child_owns = here / name / "mod.rs", True
            if child.is_file():
                visit(mod + (name,), child, child_owns)

    visit((), src / "lib.rs", True)
    return files


def inline_scopes(text):
    """(start, end, names) of each inline `mod name { … }` block, by brace matching."""
    scopes = []
    for m in INLINE_MOD.finditer(text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        scopes.append((m.start(), j, m.group(1)))
    return scopes


def scope_at(scopes, pos):
    return tuple(name for start, end, name in scopes if start <= pos < end)


def expand_use(tree):
    """`a::{b, c::{self, d}}` → [[a, b], [a, c], [a, c, d]]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    m = re.match(r"^(.*?)::\{(.*)\}$", tree)
    if not m:
        segs = [s for s in tree.split("::") if s and s != "*"]
        return [segs[:-1]] if segs and segs[-1] == "self" else [segs]
    head, body = [s for s in m.group(1).split("::") if s], m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [head + sub for p in parts if p for sub in expand_use(p)]


class Graph:
    def __init__(self, files, root):
        self.files, self.root = files, root
        self.reexports = {m: {} for m in files}  # module -> {name: the `pub use` path}
        self.edges = {}  # (from, to) -> "file:line: path"
        for m, (_, text) in files.items():
            for u in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
                for segs in expand_use(u.group(1)):
                    if len(segs) > 1:
                        self.reexports[m][segs[-1]] = segs

    def resolve(self, cur, segs, seen=()):
        """The module a path names (the deepest one it reaches), re-exports followed."""
        if not segs:
            return None
        first, rest = segs[0], list(segs[1:])
        if first in ("crate", "ebpf_prof"):
            base = ()
        elif first == "self":
            base = cur
        elif first == "super":
            base = cur[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        elif cur + (first,) in self.files:
            base, rest = cur + (first,), rest
        else:
            return None
        while base not in self.files and base:
            base = base[:-1]  # an inline module: its file's module
        for i, s in enumerate(rest):
            if base + (s,) in self.files:
                base = base + (s,)
            elif s in self.reexports.get(base, {}) and (base, s) not in seen:
                via = self.resolve(base, self.reexports[base][s], seen + ((base, s),))
                return via if via is not None else base
            else:
                break
        return base

    def add_file(self, mod):
        path, text = self.files[mod]
        scopes = inline_scopes(text)
        refs = [(u.start(), segs) for u in USE.finditer(text) for segs in expand_use(u.group(1))]
        refs += [(p.start(), re.sub(r"\s+", "", p.group(1)).split("::")) for p in PATH.finditer(text)]
        for pos, segs in refs:
            target = self.resolve(mod + scope_at(scopes, pos), segs)
            if target is None or target == mod:
                continue
            where = f"{path.relative_to(self.root)}:{line_of(text, pos)}: {'::'.join(segs)}"
            self.edges.setdefault((mod, target), where)


def sibling_graphs(edges):
    """For each module, the graph of its children: child → {child: the line behind it}."""
    levels = {}
    for (a, b), where in edges.items():
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        if k == len(a) or k == len(b):
            continue  # a module and its own descendant
        levels.setdefault(a[:k], {}).setdefault(a[: k + 1], {}).setdefault(b[: k + 1], where)
    return levels


def find_cycles(graph):
    """One cycle (a list of nodes, first repeated last) per strongly connected component."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(cycle_in(graph, comp, min(comp)))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def cycle_in(graph, comp, start):
    """A shortest path start → … → start inside one component."""
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in comp and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]


def check(src):
    """Every cycle found under `src`: (level, [module, …, module], [line behind each edge])."""
    files = load_tree(src)
    g = Graph(files, src.parent)
    for m in files:
        g.add_file(m)
    found = []
    for level, graph in sorted(sibling_graphs(g.edges).items()):
        for cyc in find_cycles(graph):
            found.append((level, cyc, [graph[a][b] for a, b in zip(cyc, cyc[1:])]))
    return found, len(files)


def name(mod):
    return "/".join(mod) or "src"


def self_test():
    trees = {
        "folder cycle": ({"lib.rs": "mod a; mod b;", "a/mod.rs": "use crate::b::X;",
                          "b.rs": "pub fn f() { crate::a::g() }"}, 1),
        "sibling cycle in a folder": ({"lib.rs": "pub mod d;", "d/mod.rs": "mod x; mod y;",
                                       "d/x.rs": "use super::y::Y;", "d/y.rs": "use super::x::{self, X};"}, 1),
        "cycle behind a re-export": ({"lib.rs": "mod d;", "d/mod.rs": "mod x; mod y; pub use y::Y;",
                                      "d/x.rs": "use super::Y;", "d/y.rs": "fn f() { super::x::g() }"}, 1),
        "parent and child, tests by #[path], strings and comments": ({
            "lib.rs": "mod d; mod e;", "d/mod.rs": "mod x; pub use x::X;",
            "d/x.rs": "use super::*;\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;",
            "d/x_tests.rs": "use super::super::X; // crate::e::Z\nconst S: &str = \"crate::e::Z\";",
            "e.rs": "use crate::d::X;\n#[cfg(test)]\nmod tests { use super::Z; }"}, 0),
    }
    bad = 0
    for what, (tree, want) in trees.items():
        with tempfile.TemporaryDirectory() as d:
            for rel, text in tree.items():
                p = pathlib.Path(d, rel)
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
            got = len(check(pathlib.Path(d))[0])
        if got != want:
            print(f"self-test failed: {what}: {got} cycles found, {want} expected")
            bad += 1
    return bad


def main():
    if self_test():
        sys.exit(2)
    if sys.argv[1:] == ["--self-test"]:
        print("check-layers self-test passed")
        return
    root = pathlib.Path(__file__).resolve().parent.parent
    found, modules = check(root / "src")
    for level, cyc, lines in found:
        print(f"cycle among the modules of {name(level)}: {' -> '.join(name(m) for m in cyc)}")
        for line in lines:
            print(f"    {line}")
    if found:
        print("cut each cycle: move what both sides need below them, or pass it in")
        sys.exit(1)
    print(f"no cycle between folders or sibling files in src/ ({modules} modules)")


if __name__ == "__main__":
    main()
