#!/usr/bin/env python3
"""How much could placing GPU jobs for their CPUs give? A Monte Carlo for issue 32.

Fills NODES servers of 8 GPUs and 24 CPUs with the jobs that share nodes on Philly's trace
(fewer than 8 GPUs; jobs of 8 or more have whole nodes and no neighbour to take a core
from), in the proportion of GPU-seconds each job size holds in the trace, each job's model
drawn from Synergy's mix (the curves of `sls/src/synergy.rs`). Each node's CPUs are split as
`adaptive` splits them: every job at the fewest cores of its proportional-share throughput
(within 2%), then core by core to the largest gain in log throughput, up to 12 per GPU.

It prints the mean throughput per GPU (1.0 is every job at its proportional share) for the
random fill, and after a local search that swaps jobs of one size between nodes while the
sum grows: what a placement that could also move running jobs would reach. A scheduler
places one freed slot at a time, so this is a bound on placement's gain, not a forecast.

Usage: scripts/cpu-pairing-mc.py [--trace CSV] [--nodes N] [--swaps N] [--seed S]
"""
import argparse
import csv
import math
import random

# (model, weight, throughput per GPU by CPUs per GPU): sls/src/synergy.rs's MODELS.
MODELS = [
    ("alexnet", 0.068, [(1, 0.40), (3, 1.0), (6, 1.90), (9, 2.55), (12, 2.94)]),
    ("shufflenet", 0.068, [(1, 0.40), (3, 1.0), (6, 1.88), (9, 2.50), (12, 2.89)]),
    ("resnet18", 0.068, [(1, 0.45), (3, 1.0), (6, 1.85), (9, 2.40)]),
    ("mobilenet", 0.068, [(1, 0.50), (3, 1.0), (6, 1.55)]),
    ("resnet50", 0.068, [(1, 0.60), (3, 1.0), (4, 1.15)]),
    ("deepspeech", 0.165, [(1, 0.60), (3, 1.0)]),
    ("m5", 0.165, [(1, 0.60), (3, 1.0), (6, 1.0)]),
    ("transformer", 0.11, [(1, 1.0)]),
    ("gnmt", 0.11, [(1, 1.0)]),
    ("lstm", 0.11, [(1, 1.0)]),
]
GPUS, CPUS, SHARE, MAX_PER_GPU, NOISE = 8, 24, 3, 12, 0.02


def at(curve, cpg):
    """Throughput per GPU at `cpg` CPUs per GPU, as `CpuCurve::at` reads a table."""
    k0, v0 = 0.0, 0.0
    for k, v in curve:
        v = max(v, v0)
        if cpg <= k:
            return v if k <= k0 else v0 + (v - v0) * (cpg - k0) / (k - k0)
        k0, v0 = k, v
    return v0


def node_throughput(jobs):
    """GPU-weighted throughput of one node's jobs, its CPUs split as `plan_node` does."""
    size = []
    for g, c in jobs:
        target = at(c, SHARE) * (1 - NOISE)
        floor = next((v for v in range(g, SHARE * g + 1) if at(c, v / g) >= target - 1e-9), SHARE * g)
        size.append(floor)
    free = CPUS - sum(size)
    while free > 0:
        best = None
        for i, (g, c) in enumerate(jobs):
            if size[i] >= MAX_PER_GPU * g:
                continue
            gain = math.log(at(c, (size[i] + 1) / g) / at(c, size[i] / g))
            if gain > 1e-9 and (best is None or gain > best[0]):
                best = (gain, i)
        if best is None:
            break
        size[best[1]] += 1
        free -= 1
    return sum(g * at(c, s / g) for (g, c), s in zip(jobs, size))


def slot_shares(trace):
    """GPU-seconds by job size, for the sizes that share nodes."""
    by = {}
    with open(trace) as f:
        for r in csv.DictReader(f):
            g = int(r["num_gpus"])
            if 0 < g < GPUS:
                by[g] = by.get(g, 0.0) + g * float(r["duration"])
    total = sum(by.values())
    return sorted((g, s / total) for g, s in by.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="docs/traces/philly-pollux.csv")
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--swaps", type=int, default=60000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    shares = slot_shares(a.trace)
    weights = sum(w for _, w, _ in MODELS)

    def model():
        r = rng.random() * weights
        for _, w, c in MODELS:
            r -= w
            if r <= 0:
                return c
        return MODELS[-1][2]

    def size():
        r = rng.random()
        for g, s in shares:
            r -= s
            if r <= 0:
                return g
        return shares[-1][0]

    nodes = []
    for _ in range(a.nodes):
        jobs, free = [], GPUS
        while free > 0:
            g = size()
            g = g if g <= free else 1
            jobs.append((g, model()))
            free -= g
        nodes.append(jobs)
    vals = [node_throughput(n) for n in nodes]
    print("job sizes by GPU-seconds: " + ", ".join(f"{g} GPU {s:.1%}" for g, s in shares))
    print(f"random fill: {sum(vals) / (GPUS * a.nodes):.4f} per GPU")
    for _ in range(a.swaps):
        x, y = rng.randrange(a.nodes), rng.randrange(a.nodes)
        if x == y:
            continue
        i, j = rng.randrange(len(nodes[x])), rng.randrange(len(nodes[y]))
        if nodes[x][i][0] != nodes[y][j][0]:
            continue
        nx, ny = list(nodes[x]), list(nodes[y])
        nx[i], ny[j] = ny[j], nx[i]
        vx, vy = node_throughput(nx), node_throughput(ny)
        if vx + vy > vals[x] + vals[y] + 1e-12:
            nodes[x], nodes[y], vals[x], vals[y] = nx, ny, vx, vy
    print(f"after swaps: {sum(vals) / (GPUS * a.nodes):.4f} per GPU")


if __name__ == "__main__":
    main()
