#!/usr/bin/env python3
"""Cut a kallsyms snapshot down to what one perf.data needs, for a fixture.

Usage: scripts/kallsyms-excerpt.py PERF.DATA FULL.kallsyms > EXCERPT

A recording's kernel frames are named from the snapshot of the machine that recorded it. A
whole snapshot is 5 MB; a fixture needs only the symbols its samples land in. perf (and the
built-in reader) ends each symbol where the next text or data symbol starts, so the excerpt
keeps, for every kernel address in the recording's call chains, every line at the start of the
symbol that holds it and every line at the start of the next symbol, plus `_text` and `_stext`
(the recording is relocated by `_text`). Read with the excerpt, every sampled kernel address
gets the name it gets with the whole snapshot.

It needs perf (to list the call-chain addresses) and is run by hand when a fixture is made.
"""

import bisect
import subprocess
import sys

# The types perf keeps from kallsyms (`symbol_type__filter`): text, weak, data, bss.
KEPT_TYPES = set("TtWwDdBb")


def kernel_addresses(data):
    out = subprocess.run(
        ["perf", "script", "-f", "-i", data, "-F", "ip,dso", "--kallsyms", "/dev/null"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == "([kernel.kallsyms])":
            found.add(int(fields[0], 16))
    return found


def parse(path):
    """The kept lines as (address, line), in the file's order: among symbols at one address
    perf keeps one, and on a tie the order decides."""
    lines = []
    with open(path) as f:
        for raw in f:
            parts = raw.split(None, 2)
            if len(parts) < 3 or parts[1] not in KEPT_TYPES or "\t[" in raw:
                continue
            lines.append((int(parts[0], 16), raw))
    return lines


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    data, full = sys.argv[1], sys.argv[2]
    symbols = parse(full)
    starts = sorted({start for start, _ in symbols})
    wanted = set()
    for address in kernel_addresses(data):
        at = bisect.bisect_right(starts, address) - 1
        if at < 0:
            continue
        wanted.add(starts[at])
        if at + 1 < len(starts):
            wanted.add(starts[at + 1])
    anchors = ("_text", "_stext")
    keep = [raw for start, raw in symbols if start in wanted or raw.split()[2] in anchors]
    sys.stdout.write("".join(keep))


if __name__ == "__main__":
    main()
