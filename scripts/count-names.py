#!/usr/bin/env python3
"""Prints the share of one-letter names among the bindings and parameters declared in the
non-test code of src/, overall and per folder.

What counts as a declared name. The script reads each file's tokens (comments, strings and
char literals dropped) and takes the names that these declare:
- `let` patterns, also in `if let`, `while let` and `let … else`;
- the parameters of every `fn` (`self` left out), and of every closure (`|a, b|`) that
  spans more than two lines: a closure of one or two lines is the place the style allows a
  one-letter name, so it is left out (`--all-closures` counts those too);
- the patterns of `for` loops and of `match` arms (a guard's `if …` left out);
- in all of these, each name a pattern binds: `x`, `mut x`, `ref x`, `x @ …`, the names inside
  tuples, slices and tuple structs, and the shorthand fields of struct patterns. Paths,
  enum variants, constants (a name that starts upper case), a struct pattern's field names
  written `field: pattern` and `_` are not bindings and are not counted.
A one-letter name is a binding of exactly one character (`i`, `n`, `x`); `_` is none.

What counts as test code, left out: a file declared by a `#[cfg(test)] mod …;` (with or
without `#[path = …]`), and every item under a `#[cfg(test)]` attribute inside a file
(`mod tests { … }`, a test-only function).

Folders are the first part of a file's path under src/ (`report`, `bpfinfo`, …); the files at
the top of src/ count as `(top)`. `--list` prints each one-letter declaration with its place,
`--limit P` exits 1 when the overall share is above P percent, `--src DIR` reads another
crate's source folder (its `lib.rs` and `main.rs`) instead.
"""
import argparse
import pathlib
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEYWORDS = {
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "async", "await", "dyn", "box",
}
MULTI = ["..=", "...", "::", "=>", "->", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=", "*=",
         "/=", "%=", "^=", "&=", "|=", "<<", ">>", ".."]
OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = {")", "]", "}"}
# Tokens after which a `|` starts a closure, not a bitwise or.
CLOSURE_BEFORE = {"(", ",", "=", "{", ";", "=>", "return", "move", "[", ":", "||", "&&", "!",
                  "in", "else", "+=", "-=", "|=", "&", "*"}


def tokenize(text):
    """Tokens as (text, line): comments, strings and char literals dropped, lifetimes kept."""
    tokens, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c.isspace():
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += text.count("\n", i, j)
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 40])
        if m:
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(1))
            tokens.append(('""', line))
            line += text.count("\n", i, j)
            i = j
            continue
        if c == '"' or text.startswith('b"', i):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            tokens.append(('""', line))
            line += text.count("\n", i, j)
            i = j
            continue
        m = re.match(r"b?'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])
        if m:
            tokens.append(("''", line))
            i += len(m.group(0))
            continue
        if c == "'":
            m = IDENT.match(text, i + 1)
            if m:
                tokens.append(("'" + m.group(0), line))
                i = m.end()
                continue
        m = IDENT.match(text, i)
        if m:
            tokens.append((m.group(0), line))
            i = m.end()
            continue
        if c.isdigit():
            m = re.match(r"[0-9][0-9A-Za-z_.]*", text[i:])
            word = m.group(0)
            if ".." in word:
                word = word[: word.index("..")]
            word = word.rstrip(".") if not re.match(r"^[0-9_]+\.[0-9]", word) else word
            tokens.append(("0", line))
            i += len(word)
            continue
        for op in MULTI:
            if text.startswith(op, i):
                tokens.append((op, line))
                i += len(op)
                break
        else:
            tokens.append((c, line))
            i += 1
    return tokens


def matching(tokens, start):
    """The index of the token that closes the bracket at `start`."""
    want, depth = OPEN[tokens[start][0]], 0
    for k in range(start, len(tokens)):
        t = tokens[k][0]
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
            if depth == 0:
                return k
    return len(tokens) - 1


def drop_test_items(tokens):
    """The tokens without the items under `#[cfg(test)]`."""
    out, k = [], 0
    while k < len(tokens):
        if [t for t, _ in tokens[k:k + 7]] == ["#", "[", "cfg", "(", "test", ")", "]"]:
            j = k + 7
            # Skip to the end of the item: its `;` or its closing brace.
            while j < len(tokens) and tokens[j][0] not in ("{", ";"):
                if tokens[j][0] in ("(", "["):
                    j = matching(tokens, j)
                j += 1
            k = (matching(tokens, j) if j < len(tokens) and tokens[j][0] == "{" else j) + 1
            continue
        out.append(tokens[k])
        k += 1
    return out


def pattern_names(toks):
    """The (name, line) pairs a pattern binds."""
    names, k = [], 0
    depth_kinds = []
    while k < len(toks):
        t, line = toks[k]
        if t in OPEN:
            depth_kinds.append(t)
        elif t in CLOSE:
            if depth_kinds:
                depth_kinds.pop()
        elif IDENT.fullmatch(t) and t not in KEYWORDS and t != "_":
            prev = toks[k - 1][0] if k else ""
            nxt = toks[k + 1][0] if k + 1 < len(toks) else ""
            in_struct = bool(depth_kinds) and depth_kinds[-1] == "{"
            if prev == "::" or nxt in ("::", "(", "{", "!") or t[0].isupper():
                pass
            elif in_struct and nxt == ":":
                pass  # a field name in `Struct { field: pattern }`
            elif prev in ("'",) or t[0] == "'":
                pass
            else:
                names.append((t, line))
        k += 1
    return names


def split_top(toks, sep):
    """`toks` split at the tokens equal to `sep` outside brackets."""
    parts, cur, depth = [], [], 0
    for tok in toks:
        if tok[0] in OPEN:
            depth += 1
        elif tok[0] in CLOSE:
            depth -= 1
        if tok[0] == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(tok)
    parts.append(cur)
    return [p for p in parts if p]


def before_top(toks, stops):
    """The tokens before the first of `stops` outside brackets (and outside `<…>`)."""
    depth, angle = 0, 0
    for k, tok in enumerate(toks):
        t = tok[0]
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
        if depth == 0 and t in stops:
            return toks[:k]
    return toks


def param_patterns(toks):
    """The patterns of a parameter list (without brackets): each before its `:`."""
    pats = []
    for part in split_top(toks, ","):
        pat = before_top(part, {":"})
        if [t for t, _ in pat][-1:] == ["self"]:
            continue
        pats.append(pat)
    return pats


def let_pattern(tokens, k):
    """The pattern after the `let` at `k`: up to `=`, `;` or a type's `:` outside brackets."""
    depth, j = 0, k + 1
    while j < len(tokens):
        t = tokens[j][0]
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
        if depth == 0 and t in ("=", ";", ":", "else"):
            break
        if depth < 0:
            break
        j += 1
    return tokens[k + 1:j]


def fn_params(tokens, k):
    """The parameter tokens of the `fn` at `k` (between its parentheses)."""
    j = k + 2
    if j < len(tokens) and tokens[j][0] == "<":
        depth = 0
        while j < len(tokens):
            t = tokens[j][0]
            depth += {"<": 1, ">": -1, ">>": -2, "->": 0}.get(t, 0)
            j += 1
            if depth <= 0:
                break
    if j >= len(tokens) or tokens[j][0] != "(":
        return []
    end = matching(tokens, j)
    return tokens[j + 1:end]


def closure_params(tokens, k):
    """The parameter tokens of a closure whose opening `|` is at `k`, or None."""
    j = k + 1
    depth = 0
    while j < len(tokens):
        t = tokens[j][0]
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif t == "|" and depth == 0:
            return tokens[k + 1:j]
        elif t in (";", "{", "=>") and depth == 0:
            return None
        j += 1
    return None


def closure_lines(tokens, k, params_end):
    """How many lines the closure whose opening `|` is at `k` spans, to the end of its body."""
    j, depth = params_end + 1, 0
    if j < len(tokens) and tokens[j][0] == "->":
        while j < len(tokens) and tokens[j][0] != "{":
            j += 1
    if j < len(tokens) and tokens[j][0] == "{":
        end = matching(tokens, j)
    else:
        end = j
        while end < len(tokens):
            t = tokens[end][0]
            if t in OPEN:
                depth += 1
            elif t in CLOSE:
                depth -= 1
                if depth < 0:
                    break
            elif depth == 0 and t in (",", ";"):
                break
            end += 1
        end -= 1
    return tokens[min(end, len(tokens) - 1)][1] - tokens[k][1] + 1


def arm_pattern(tokens, k):
    """The pattern of the match arm whose `=>` is at `k`, its guard left out."""
    depth, j = 0, k - 1
    while j >= 0:
        t = tokens[j][0]
        if t in CLOSE:
            if depth == 0 and t == "}":
                # The end of the previous arm's block body, or a struct pattern's brace.
                opener = open_of(tokens, j)
                before = tokens[opener - 1][0] if opener > 0 else ""
                if not (IDENT.fullmatch(before) and before not in KEYWORDS):
                    break
            depth += 1
        elif t in OPEN:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and t in (",", ";"):
            break
        j -= 1
    pat = tokens[j + 1:k]
    return before_top(pat, {"if"})


def open_of(tokens, close):
    """The index of the bracket that `close` closes."""
    depth = 0
    for j in range(close, -1, -1):
        t = tokens[j][0]
        if t in CLOSE:
            depth += 1
        elif t in OPEN:
            depth -= 1
            if depth == 0:
                return j
    return 0


def declarations(tokens, all_closures=False):
    """Every (name, line) a let, fn, closure, for or match arm declares."""
    out = []
    for k, (t, _) in enumerate(tokens):
        prev = tokens[k - 1][0] if k else ";"
        if t == "let":
            out += pattern_names(let_pattern(tokens, k))
        elif t == "fn" and k + 1 < len(tokens) and IDENT.fullmatch(tokens[k + 1][0]):
            for pat in param_patterns(fn_params(tokens, k)):
                out += pattern_names(pat)
        elif t == "|" and prev in CLOSURE_BEFORE:
            params = closure_params(tokens, k)
            if params and (all_closures or closure_lines(tokens, k, k + len(params) + 1) > 2):
                for pat in param_patterns(params):
                    out += pattern_names(pat)
        elif t == "for" and prev != "impl" and not (k + 1 < len(tokens) and tokens[k + 1][0] == "<"):
            j = k + 1
            while j < len(tokens) and tokens[j][0] not in ("in", "{", ";"):
                j += 1
            if j < len(tokens) and tokens[j][0] == "in":
                out += pattern_names(tokens[k + 1:j])
        elif t == "=>":
            out += pattern_names(arm_pattern(tokens, k))
    return out


MOD_DECL = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')


def walk_modules(src):
    """(file, is_test) for each module file reachable from lib.rs and main.rs."""
    seen = {}

    def visit(path, owns_dir, is_test):
        if path in seen:
            return
        seen[path] = is_test
        text = path.read_text()
        here = path.parent if owns_dir else path.parent / path.stem
        for m in MOD_DECL.finditer(text):
            attrs, name = m.group(1), m.group(2)
            test = is_test or "cfg(test)" in attrs.replace(" ", "")
            attr = PATH_ATTR.search(attrs)
            if attr:
                child, child_owns = path.parent / attr.group(1), True
            elif (here / f"{name}.rs").is_file():
                child, child_owns = here / f"{name}.rs", False
            else:
                child, child_owns = here / name / "mod.rs", True
            if child.is_file():
                visit(child, child_owns, test)

    for root in ("lib.rs", "main.rs"):
        if (src / root).is_file():
            visit(src / root, True, False)
    return seen


def folder_of(src, path):
    rel = path.relative_to(src)
    return rel.parts[0] if len(rel.parts) > 1 else "(top)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true", help="print each one-letter declaration")
    parser.add_argument("--limit", type=float, help="exit 1 above this share, in percent")
    parser.add_argument("--src", type=pathlib.Path, help="another crate's source folder")
    parser.add_argument("--all-closures", action="store_true", help="count short closures too")
    args = parser.parse_args()
    src = (args.src or pathlib.Path(__file__).resolve().parent.parent / "src").resolve()
    root = src.parent
    per_folder = {}
    for path, is_test in sorted(walk_modules(src).items()):
        if is_test:
            continue
        decls = declarations(drop_test_items(tokenize(path.read_text())), args.all_closures)
        short = [(name, line) for name, line in decls if len(name) == 1]
        total, one = per_folder.get(folder_of(src, path), (0, 0))
        per_folder[folder_of(src, path)] = (total + len(decls), one + len(short))
        if args.list:
            for name, line in short:
                print(f"{path.relative_to(root)}:{line}: {name}")
    all_total = sum(t for t, _ in per_folder.values())
    all_one = sum(o for _, o in per_folder.values())
    print(f"{'folder':<12} {'names':>6} {'1-letter':>8} {'share':>6}")
    for folder, (total, one) in sorted(per_folder.items()):
        print(f"{folder:<12} {total:>6} {one:>8} {100 * one / max(total, 1):>5.1f}%")
    share = 100 * all_one / max(all_total, 1)
    print(f"{'src/':<12} {all_total:>6} {all_one:>8} {share:>5.1f}%")
    if args.limit is not None and share > args.limit:
        sys.exit(1)


if __name__ == "__main__":
    main()
