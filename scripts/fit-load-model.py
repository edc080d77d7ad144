#!/usr/bin/env python3
"""Fit the load model of examples/stats_coverage.rs to rounds kept on this machine.

Usage, as root:
    ebpf-prof overhead --aa --load OBJ.bpf.o --loads 40 --max-time 40s --keep DIR
    scripts/fit-load-model.py DIR [DIR ...]

`--aa --load` loads one object on each arm, afresh for each load, half the loads in each
order, so a difference between the arms is made of where the two loads were placed and which
came first, nothing else. `--keep DIR` leaves every round's samples (`base-N.samples`,
`treat-N.samples`, one latency in ns per line) and `loads.json` (the pairs each load held and
its order). Per load this takes the median of the pair differences of the rounds' p50s (plain
medians: the fit needs no sub-step resolution) and prints:
- the order effect: half the difference between the loads made base first and treat first;
- the spread of the loads' medians within an order, less what the rounds of a load explain
  (the sampling variance of a median of its pair differences): the placement effect of two
  loads, whose sd over sqrt(2) is the sd of one object's placement;
- a pair's time (s), for the simulation's clock.
"""

import json
import math
import os
import statistics
import sys


def p50(path):
    with open(path) as f:
        values = sorted(int(line) for line in f if line.strip())
    return values[(len(values) + 1) // 2 - 1] if values else math.nan


def robust_sd(xs):
    mid = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - mid) for x in xs)


def fit(directory):
    with open(os.path.join(directory, "loads.json")) as f:
        loads = json.load(f)
    by_order = {"base_first": [], "treat_first": [], "one_object": []}
    sampling = []
    for load in loads:
        deltas = []
        for pair in range(load["first_pair"], load["first_pair"] + load["pairs"]):
            base = p50(os.path.join(directory, f"base-{pair + 1}.samples"))
            treat = p50(os.path.join(directory, f"treat-{pair + 1}.samples"))
            deltas.append(treat - base)
        if len(deltas) < 3:
            continue
        by_order[load["order"]].append(statistics.median(deltas))
        sampling.append(math.pi / 2 * robust_sd(deltas) ** 2 / len(deltas))
    return by_order, sampling


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    first, second, sampling = [], [], []
    for directory in sys.argv[1:]:
        by_order, s = fit(directory)
        first += by_order["base_first"]
        second += by_order["treat_first"]
        sampling += s
    if len(first) < 2 or len(second) < 2:
        sys.exit("need at least two loads in each order (run with --aa --load or --compare)")
    order_effect = (statistics.mean(first) - statistics.mean(second)) / 2
    within = [x - statistics.mean(first) for x in first] + [x - statistics.mean(second) for x in second]
    residual = sum(x * x for x in within) / (len(within) - 2)
    from_rounds = statistics.mean(sampling)
    between = max(0.0, residual - from_rounds)
    print(f"loads: {len(first)} made base first, {len(second)} treat first")
    print(f"order effect: {order_effect:+.2f} ns (the treatment's cost when the base is loaded first, minus the mean)")
    print(f"spread of a load's median within an order: sd {math.sqrt(residual):.2f} ns")
    print(f"  of which the rounds of a load explain: sd {math.sqrt(from_rounds):.2f} ns")
    print(f"  from load to load: sd {math.sqrt(between):.2f} ns, so one object's placement sd {math.sqrt(between / 2):.2f} ns")


if __name__ == "__main__":
    main()
