#!/usr/bin/env python3
"""Derive the spindle-sls trace sample `philly-pollux.csv` (and `philly-pollux-small.csv`)
from the raw excerpt `raw/adaptdl-philly-head.csv`.

Source: petuum/adaptdl (Apache-2.0), file simulator/traces/philly.csv at commit
de25dcc90c350b8ade3a710e437a651a8d2efae6 -- itself derived from the Microsoft Philly
production trace (msr-fiddle/philly-traces, ATC'19). See README.md in this folder.

Usage (from the repository root or this folder):
    python3 docs/traces/derive.py
Only the Python 3 standard library is used. The output is deterministic.
"""
import csv
import datetime as dt
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = os.path.join(HERE, "raw", "adaptdl-philly-head.csv")
OUT = os.path.join(HERE, "philly-pollux.csv")
OUT_SMALL = os.path.join(HERE, "philly-pollux-small.csv")
SMALL_N = 200
# The small file is taken from the first 1,117 data rows only (the original 48,000-character
# excerpt), so that it stays identical when the raw excerpt is extended.
SMALL_SOURCE_ROWS = 1117
# Queue names of the first sample, kept stable; hashes first seen later get vc10, vc11, ...
KNOWN_VCS = ["b436b2", "6c71a0", "7f04ca", "2869ce", "103959", "ee9e8c", "0e4a51", "6214e9", "11cb48"]


def parse(rows):
    """Validate and convert raw rows; returns (kept, dropped) or raises SystemExit on a bad row."""
    kept, dropped = [], Counter()
    for idx, r in enumerate(rows):  # idx = 0-based data-row index in the raw file
        try:
            ts = dt.datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S")
            dur = float(r["duration"])
            gpus = int(r["num_gpus"])
            gpu_time = float(r["gpu_time"])
            vc = r["cluster"].strip()
        except (KeyError, TypeError, ValueError, AttributeError):
            dropped["unparseable"] += 1
            continue
        if not vc:
            dropped["missing vc"] += 1
            continue
        if gpus <= 0:
            dropped["num_gpus <= 0"] += 1
            continue
        if dur <= 0:
            dropped["duration <= 0"] += 1
            continue
        # Consistency check of the transcription: gpu_time must equal duration * num_gpus.
        if abs(gpu_time - dur * gpus) > 1e-6:
            print(f"row {idx}: gpu_time {gpu_time} != duration*num_gpus", file=sys.stderr)
            raise SystemExit(1)
        kept.append((ts, idx, max(1, int(round(dur))), gpus, vc))
    # Sort by submission time; ties keep the raw-file order.
    kept.sort(key=lambda k: (k[0], k[1]))
    return kept, dropped


def vc_mapping(kept):
    """Known hashes keep their old names; new ones get vc10, vc11, ... by first submit time."""
    names = {vc: f"vc{i + 1}" for i, vc in enumerate(KNOWN_VCS)}
    for _, _, _, _, vc in kept:
        if vc not in names:
            names[vc] = f"vc{len(names) + 1}"
    return names


def to_rows(kept, vc_names):
    t0 = kept[0][0]
    return [
        {
            "job_id": f"philly-{idx:05d}",
            "submit_time": int((ts - t0).total_seconds()),
            "num_gpus": gpus,
            "duration": dur,
            "queue": vc_names[vc],
            # Philly has no user field: its virtual cluster is the tenant, so it is the user
            # too (the simulator's fairness figures are per user).
            "user": vc_names[vc],
        }
        for ts, idx, dur, gpus, vc in kept
    ]


def main() -> int:
    with open(RAW, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if None in r or any(v is None for v in r.values()):
            print(f"malformed row (wrong number of fields): {r}", file=sys.stderr)
            return 1

    kept, dropped = parse(rows)
    vc_names = vc_mapping(kept)
    out_rows = to_rows(kept, vc_names)
    t0 = kept[0][0]

    # Small file: first SMALL_N jobs by submit time of the first SMALL_SOURCE_ROWS raw rows,
    # with submit_time relative to that subset's earliest submission (as in the first release).
    small_kept, _ = parse(rows[:SMALL_SOURCE_ROWS])
    small = to_rows(small_kept, vc_names)[:SMALL_N]

    fields = ["job_id", "submit_time", "num_gpus", "duration", "queue"]
    # The small file keeps the first release's columns (byte-identical); the full one names
    # each job's user (its VC).
    for path, data, cols in ((OUT, out_rows, fields + ["user"]), (OUT_SMALL, small, fields)):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
            w.writeheader()
            w.writerows(data)

    # Summary (reproduced in README.md).
    hist = Counter()
    for r in out_rows:
        g = r["num_gpus"]
        hist[g if g in (1, 2, 4, 8) else ("16+" if g >= 16 else f"other({g})")] += 1
    print(f"raw data rows: {len(rows)}; kept: {len(out_rows)}; dropped: {dict(dropped) or 0}")
    print(f"small rows: {len(small)}")
    print(f"gpu histogram: {dict(sorted(hist.items(), key=lambda kv: str(kv[0])))}")
    print(f"max num_gpus: {max(r['num_gpus'] for r in out_rows)}")
    print(f"total GPU-seconds: {sum(r['num_gpus'] * r['duration'] for r in out_rows)}")
    span = out_rows[-1]["submit_time"]
    print(f"submit span: {span} s ({span / 3600:.2f} h); first submit {t0}")
    print("vc mapping: " + ", ".join(f"{v}={k}" for k, v in vc_names.items()))
    print("jobs per vc: " + str(dict(sorted(Counter(r['queue'] for r in out_rows).items(),
                                            key=lambda kv: int(kv[0][2:])))))
    print(f"exact num_gpus values: {dict(sorted(Counter(r['num_gpus'] for r in out_rows).items()))}")
    ends = [ts + dt.timedelta(seconds=dur) for ts, _, dur, _, _ in kept]
    print(f"completions: {min(ends)} to {max(ends)}; last submit {kept[-1][0]}")
    print(f"small: span {small[-1]['submit_time']} s, gpu hist "
          f"{dict(Counter(r['num_gpus'] for r in small))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
