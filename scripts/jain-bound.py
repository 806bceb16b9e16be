#!/usr/bin/env python3
"""How fair could any schedule have been? A bound for `spindle sls`'s Jain index.

Reads a replay's `jobs.csv` (one leaf, every user's weight 1, as `--conf-dir conf --queue
default` runs) and, every PERIOD seconds where two or more users have a job waiting, computes:

- the run's Jain index of decayed GPU-seconds over the waiting users (as `summary.json`'s
  `fairness.jain_index`, approximately: a job is held from `start_s` to `finish_s` and waits
  from `submit_s` to `start_s`, so time lost to preemption is not modelled);
- the best Jain index any split of the same total decayed usage could give those users, each
  user capped by their demand (their decayed usage had every job started on submission):
  the users not waiting take at most their caps, the waiting users the rest, water-filled.

If the bound is below a target, no schedule that does the same work with the same users
waiting at those instants reaches it; a schedule where those users never wait could.

Usage: scripts/jain-bound.py RUN_DIR [--exclude USER,USER] [--half-life-s S] [--period-s S]
"""
import argparse
import collections
import csv
import math


def jain(x):
    sq = sum(v * v for v in x)
    return sum(x) ** 2 / (len(x) * sq) if sq > 0 else 1.0


def water_fill(total, caps):
    """The most even split of `total` with each value at most its cap."""
    lo, hi = 0.0, max(caps.values(), default=0.0) + 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(min(c, mid) for c in caps.values()) < total:
            lo = mid
        else:
            hi = mid
    return {u: min(c, hi) for u, c in caps.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--exclude", default="")
    ap.add_argument("--half-life-s", type=float, default=7 * 86400.0)
    ap.add_argument("--period-s", type=float, default=300.0)
    a = ap.parse_args()
    excluded = set(u for u in a.exclude.split(",") if u)
    rows = list(csv.DictReader(open(a.run_dir + "/jobs.csv")))
    users = sorted(set(r["user"] for r in rows))
    events = []
    for r in rows:
        s, st, f, g = float(r["submit_s"]), float(r["start_s"]), float(r["finish_s"]), int(r["gpus"])
        events += [(s, 1, "wait", r["user"], 1), (st, 0, "wait", r["user"], -1)]
        events += [(st, 1, "held", r["user"], g), (f, 1, "held", r["user"], -g)]
        events += [(s, 1, "demand", r["user"], g), (s + (f - st), 1, "demand", r["user"], -g)]
    events.sort()
    rate = {"held": collections.Counter(), "demand": collections.Counter()}
    waiting = collections.Counter()
    used, demand = collections.Counter(), collections.Counter()
    lam = math.log(2) / a.half_life_s
    last = 0.0

    def advance(to):
        nonlocal last
        dt = to - last
        if dt <= 0:
            return
        keep = math.exp(-lam * dt)
        for u in users:
            used[u] = used[u] * keep + rate["held"][u] * (1 - keep) / lam
            demand[u] = demand[u] * keep + rate["demand"][u] * (1 - keep) / lam
        last = to

    end = max(e[0] for e in events)
    t, i, run_j, bound_j = a.period_s, 0, [], []
    while t < end:
        while i < len(events) and events[i][0] <= t:
            when, _, kind, u, d = events[i]
            advance(when)
            if kind == "wait":
                waiting[u] += d
            else:
                rate[kind][u] += d
            i += 1
        advance(t)
        w = [u for u in users if waiting[u] > 0 and u not in excluded]
        if len(w) >= 2:
            run_j.append(jain([used[u] for u in w]))
            caps = {u: max(demand[u], used[u]) for u in users}
            total = sum(used.values())
            least = max(0.0, total - sum(caps[u] for u in users if u not in w))
            most = sum(caps[u] for u in w)
            best = 0.0
            for k in range(21):
                s = least + (most - least) * k / 20
                if s > 0:
                    split = water_fill(s, {u: caps[u] for u in w})
                    best = max(best, jain([split[u] for u in w]))
            bound_j.append(best)
        t += a.period_s
    if not run_j:
        print("no sample had two users waiting")
        return
    print(
        "%s: %d samples; Jain of the run %.3f; best any split of the same usage could give %.3f"
        % (a.run_dir, len(run_j), sum(run_j) / len(run_j), sum(bound_j) / len(bound_j))
    )


if __name__ == "__main__":
    main()
