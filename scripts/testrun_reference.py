#!/usr/bin/env python3
"""One run of the test-run accuracy target (scripts/testrun-targets.sh runs it): the tool's
`overhead --test-run --pcap` on one classifier, and bpftool's reference per class in rounds
over all classes, half before the tool's run and half after; then the table and the verdict.

Usage: testrun_reference.py BIN OBJECT PCAP PIN WORKDIR REF_RUNS REF_REPEAT CPU
"""
import json
import re
import statistics
import struct
import subprocess
import sys

BIN, OBJECT, PCAP, PIN, WORK, REF_RUNS, REF_REPEAT, CPU = sys.argv[1:9]
REF_RUNS, CPU_INDEX = int(REF_RUNS), int(CPU)


def frames(path):
    """The frames of a classic pcap capture, as captured."""
    data = open(path, "rb").read()
    offset = 24
    while offset < len(data):
        incl = struct.unpack_from("<I", data, offset + 8)[0]
        yield data[offset + 16 : offset + 16 + incl]
        offset += 16 + incl


def key(frame):
    """Where a frame goes, as the tool's classes tell it (the verdict aside)."""
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x0800:
        ihl = (frame[14] & 0x0F) * 4
        proto, transport, family = frame[23], 14 + ihl, "ipv4"
    elif ethertype == 0x86DD:
        proto, transport, family = frame[20], 54, "ipv6"
    else:
        return ("not_ip", None, None)
    port = struct.unpack_from("!H", frame, transport + 2)[0] if proto in (6, 17) else None
    return (family, port, {6: "TCP", 17: "UDP"}.get(proto))


def class_key(c):
    if c["family"] == "not_ip":
        return ("not_ip", None, None)
    return (c["family"], c["destination_port"], c["protocol"])


def cpu_times():
    """Per CPU other than the timing one: (busy, total) jiffies from /proc/stat."""
    times = {}
    for line in open("/proc/stat"):
        fields = line.split()
        if not re.fullmatch(r"cpu\d+", fields[0]) or int(fields[0][3:]) == CPU_INDEX:
            continue
        values = [int(v) for v in fields[1:9]]
        idle = values[3] + values[4]
        times[fields[0]] = (sum(values) - idle, sum(values))
    return times


def busy_share(before, after):
    """The share of the time the other CPUs were busy between two readings, in percent."""
    busy = sum(after[cpu][0] - before[cpu][0] for cpu in after)
    total = sum(after[cpu][1] - before[cpu][1] for cpu in after)
    return 100.0 * busy / total if total else 0.0


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def run_count():
    """The reference program's runs counted by run statistics (0 while they are off)."""
    out = subprocess.run(["bpftool", "prog", "show", "pinned", PIN, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out).get("run_cnt", 0)


def reference_once(path):
    out = subprocess.run(["taskset", "-c", CPU, "chrt", "-f", "99", "bpftool", "prog", "run",
                          "pinned", PIN, "data_in", path, "repeat", REF_REPEAT],
                         capture_output=True, text=True, check=True).stdout
    match = re.search(r"Return value: (\d+), duration \(average\): (\d+)ns", out)
    # bpftool prints the kernel's mean rounded down: on average half a ns low.
    return int(match.group(1)), int(match.group(2)) + 0.5


def reference_rounds(paths, rounds, means, retvals):
    """`rounds` rounds, each one bpftool run of every class in turn; the other CPUs' busy share."""
    before = cpu_times()
    for _ in range(rounds):
        for k, path in paths.items():
            retvals[k], mean = reference_once(path)
            means[k].append(mean)
    return busy_share(before, cpu_times())


def main():
    first = {}
    for frame in frames(PCAP):
        first.setdefault(key(frame), frame)
    paths = {}
    for index, (k, frame) in enumerate(first.items()):
        paths[k] = f"{WORK}/class{index}.bin"
        open(paths[k], "wb").write(frame)
    means, retvals = {k: [] for k in paths}, {}
    load_before, count_before = loadavg(), run_count()
    busy_ref_before = reference_rounds(paths, (REF_RUNS + 1) // 2, means, retvals)
    before = cpu_times()
    tool = subprocess.run([BIN, "overhead", "--test-run", "--cpu", CPU, "--load", OBJECT,
                           "--pcap", PCAP, "--json"], capture_output=True, text=True, check=True)
    busy_tool = busy_share(before, cpu_times())
    busy_ref_after = reference_rounds(paths, REF_RUNS // 2, means, retvals)
    counted = run_count() - count_before
    report = json.loads(tool.stdout)["test_run"]
    rows = []
    for c in report["classes"]:
        k = class_key(c)
        rows.append((c, statistics.median(means[k]), min(means[k]), max(means[k]), retvals[k]))
    print(f"\n{report['program']} ({report['kind']}), {report['packets']} packets of {PCAP}, "
          f"seed {report['seed']}; bpftool: median of {REF_RUNS} runs of repeat {REF_REPEAT} "
          f"on CPU {CPU}, {(REF_RUNS + 1) // 2} rounds before the tool's run and {REF_RUNS // 2} after")
    print(f"  load average {load_before} before, {loadavg()} after; other CPUs busy "
          f"{busy_ref_before:.0f}% (reference before), {busy_tool:.0f}% (tool), "
          f"{busy_ref_after:.0f}% (reference after)")
    for note in report["notes"]:
        print(f"  tool's note: {note}")
    if counted:
        print(f"  WARNING: run statistics counted {counted} runs of the reference: another process "
              "held them on (BPF_ENABLE_STATS), so each of its runs paid two clock readings more")
    print(f"  {'verdict':<13} {'p50 ns':>8} {'interval':>18} {'width%':>7} {'bpftool':>8} "
          f"{'range':>15} {'diff%':>7} {'ok':>3}  example")
    fails = []
    for c, ref, low, high, retval in rows:
        width = c["hi_ns"] - c["lo_ns"]
        diff = c["p50_ns"] - ref
        within = abs(diff) <= max(0.10 * ref, 5.0)
        narrow = width < max(0.20 * c["p50_ns"], 10.0)
        ok = within and narrow and retval == c["retval"]
        if not ok:
            fails.append(c["example"])
        print(f"  {c['verdict']:<13} {c['p50_ns']:8.1f} [{c['lo_ns']:7.1f}, {c['hi_ns']:7.1f}] "
              f"{100 * width / c['p50_ns']:6.1f}% {ref:8.1f} [{low:6.1f}, {high:6.1f}] "
              f"{100 * diff / ref:+6.1f}% {'yes' if ok else 'NO':>3}  {c['example']}")
    # Order: every pair of classes whose reference costs differ by more than 5 ns and 10% must
    # be ordered alike by the tool's p50.
    pairs = discordant = 0
    for i, (a, ra, *_) in enumerate(rows):
        for b, rb, *_ in rows[i + 1:]:
            if abs(ra - rb) > max(5.0, 0.10 * min(ra, rb)):
                pairs += 1
                discordant += (ra < rb) != (a["p50_ns"] < b["p50_ns"])
    print(f"  ordered as the reference: {pairs - discordant} of {pairs} pairs whose reference "
          "costs differ (> 5 ns and 10%)")
    print(f"  classes meeting every target: {len(rows) - len(fails)} of {len(rows)}"
          + (f"; not: {fails}" if fails else ""))


main()
