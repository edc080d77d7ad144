#!/usr/bin/env python3
"""Benchmark: how much the p50 of an openat round drifts with time on this machine, the figure
behind `overhead`'s short rounds in one process (docs/overhead-method.md, "Why short rounds").

Runs the built-in bench as `overhead` does (`bench --serve`, pinned, SCHED_FIFO 99), asks for
rounds back to back, and prints, per round size, the robust spread (1.4826 x MAD) of the
difference between the p50s of two rounds `lag` rounds apart. A pair's difference cancels what
its two rounds share; what it cannot cancel grows with the time between them.

Usage: sudo scripts/drift-by-lag.py [SECONDS_PER_SIZE=10] [CPU=1]   (build with cargo build --release first)
"""
import bisect, os, struct, subprocess, sys, time
from statistics import median

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "ebpf-prof")
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
cpu = sys.argv[2] if len(sys.argv) > 2 else "1"


def rounds(n, seconds):
    p = subprocess.Popen(["taskset", "-c", cpu, "chrt", "-f", "99", BIN, "bench", "--serve", "-n", str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out, start = [], time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            p.stdin.write(b"r")
            p.stdin.flush()
            (k,) = struct.unpack("<I", p.stdout.read(4))
            s = sorted(struct.unpack(f"<{k}I", p.stdout.read(4 * k)))
            out.append(mid_p50(s))
    finally:
        p.stdin.close()
        p.wait()
    return out, (time.monotonic() - start) / max(len(out), 1)


def mid_p50(s):
    """The p50 mid-quantile as `overhead` reads it (src/stats/compare.rs: mid_quantile): the
    nearest rank read mid-rank, a run of tied readings spread over the half-gaps to its
    neighbours, so that the clock's step does not quantise it."""
    n = len(s)
    x = max(1, min(n, -(-n // 2))) - 0.5
    i = min(int(x), n - 1)
    v = s[i]
    a = bisect.bisect_left(s, v)
    b = bisect.bisect_right(s, v)
    down = v - s[a - 1] if a > 0 else None
    up = s[b] - v if b < n else None
    if down is None and up is None:
        down = up = 0
    elif down is None:
        down = up
    elif up is None:
        up = down
    frac = min(1.0, max(0.0, (x - a) / (b - a)))
    return v - down / 2 + (down + up) / 2 * frac


def spread(v):
    m = median(v)
    return 1.4826 * median(abs(x - m) for x in v)


print(f"robust sd (ns) of p50(round i+lag) - p50(round i) (mid-quantiles), {secs:.0f} s of rounds back to back per size, CPU {cpu}")
print(f"{'round':>6} {'ms/round':>9} {'rounds':>7}  " + "  ".join(f"lag {l:>2}" for l in (1, 2, 4, 16)))
for n in (250, 1000, 5000):
    p50s, per = rounds(n, secs)
    cells = []
    for lag in (1, 2, 4, 16):
        d = [p50s[i + lag] - p50s[i] for i in range(0, len(p50s) - lag, lag)]
        cells.append(f"{spread(d):6.1f}" if len(d) > 10 else "     -")
    print(f"{n:>6} {per * 1e3:>9.2f} {len(p50s):>7}  " + "  ".join(cells))
