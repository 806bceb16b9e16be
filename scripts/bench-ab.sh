#!/usr/bin/env bash
# A/B of the scheduler benchmarks: this checkout (uncommitted changes included) against an
# older commit, both release builds, run alternately on the same machine in one go, so the
# machine's speed that day cancels out of the ratio.
#
#   scripts/bench-ab.sh REV [BENCH ARGS]
#
# REV is any commit (8165f64, HEAD~3, a branch). BENCH ARGS are those of `spindle bench`
# (`gangs --nodes 1000`, say); without them the standard set runs: `scheduler` and `gangs`
# at 10,000 nodes, and `scheduler` with `--constrained 1` and with `--preemption 1`. On a
# shared machine give the benchmarks a core of their own: `taskset -c 1 scripts/bench-ab.sh`.
# Environment:
#   RUNS=N          alternated runs of each build (default 3)
#   BASE_ARGS="..." other arguments for REV's build (a flag REV does not know, say: run the
#                   new build with `--constrained 1` against the old one without it)
#   ORDERING=NAME   every leaf of the benchmarks' queue tree ordered by NAME (fifo, fair, las,
#                   fairshare: `spindle bench --ordering`); a REV whose binary does not know
#                   the flag or the name runs without it (its default: half fifo, half fair),
#                   and the script says so
#   CPU_POLICY=NAME every partition's CPU policy (proportional, static, adaptive: `spindle
#                   bench --cpu-policy`), dropped for a REV that does not know it
#   AB_DIR=DIR      where REV's worktree, its target directory and the binaries live
#                   (default target/bench-ab; kept between runs, so a second run of the
#                   same REV does not build it again)
#
# Prints, per benchmark, each figure's mean for REV and for this checkout and the ratio
# this/REV (for a time, lower is better; for a rate, higher is better). Every change to
# resourcemanager/src/core reports these ratios in its closing note (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
rev=$1
shift
runs=${RUNS:-3}
ab_dir=${AB_DIR:-$root/target/bench-ab}
mkdir -p "$ab_dir"
sha=$(git rev-parse --verify -q --short=7 "$rev^{commit}") || {
  echo "bench-ab: $rev is not a commit of this repository" >&2
  exit 2
}

# This checkout, as it is now.
echo "== building this checkout (release)" >&2
cargo build --release -q --bin spindle
new_bin="$ab_dir/spindle-this"
cp "${CARGO_TARGET_DIR:-target}/release/spindle" "$new_bin"

# REV, in its own worktree with its own target directory (kept: later builds are incremental).
old_bin="$ab_dir/spindle-$sha"
if [ ! -x "$old_bin" ]; then
  wt="$ab_dir/worktree"
  if [ ! -d "$wt" ]; then
    git worktree add --detach "$wt" "$sha" >&2
  else
    git -C "$wt" checkout -q --detach "$sha"
  fi
  echo "== building $sha (release) in $wt" >&2
  # Before the CLI crate existed the `spindle` binary lived in another package: name the
  # binary, not the package.
  (cd "$wt" && CARGO_TARGET_DIR="$ab_dir/target" cargo build --release -q --bin spindle)
  cp "$ab_dir/target/release/spindle" "$old_bin"
fi

if [ $# -eq 0 ]; then
  # The standard set: the two benchmarks at 10,000 nodes, and the scheduler benchmark with
  # constraints and with the preemption monitor (REV runs those without the flag when it
  # does not know it).
  SUITE=("scheduler --nodes 10000" "gangs --nodes 10000"
    "scheduler --nodes 10000 --constrained 1" "scheduler --nodes 10000 --preemption 1")
else
  SUITE=("$*")
fi

if [ -n "${ORDERING:-}" ]; then
  for i in "${!SUITE[@]}"; do
    SUITE[$i]="${SUITE[$i]} --ordering $ORDERING"
  done
fi
if [ -n "${CPU_POLICY:-}" ]; then
  for i in "${!SUITE[@]}"; do
    SUITE[$i]="${SUITE[$i]} --cpu-policy $CPU_POLICY"
  done
fi

out="$ab_dir/results-$sha-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
knows() { # does REV's binary accept this flag and value? (`--x` it does not know is an error)
  "$old_bin" bench scheduler --nodes 10 --apps 1 --steady-events 1 "$1" "$2" >/dev/null 2>&1
}
for i in "${!SUITE[@]}"; do
  args=${SUITE[$i]}
  base=${BASE_ARGS:-$args}
  if [ -z "${BASE_ARGS:-}" ]; then
    # Drop the flags REV does not have (its figure is then "without them").
    for flag in --constrained --preemption --ordering --cpu-policy; do
      if [[ " $base " == *" $flag "* ]]; then
        value=$(echo " $base " | sed -E "s/.* $flag ([^ ]+) .*/\1/")
        if ! knows "$flag" "$value"; then
          echo "== $sha does not know $flag $value: it runs without it" >&2
          base=$(echo "$base" | sed -E "s/ $flag [^ ]+//")
        fi
      fi
    done
  fi
  for r in $(seq 1 "$runs"); do
    echo "== [$((i + 1))/${#SUITE[@]}] run $r/$runs: $sha: spindle bench $base" >&2
    # shellcheck disable=SC2086
    "$old_bin" bench $base >>"$out/$i.old"
    echo "== [$((i + 1))/${#SUITE[@]}] run $r/$runs: this: spindle bench $args" >&2
    # shellcheck disable=SC2086
    "$new_bin" bench $args >>"$out/$i.new"
  done
  printf '%s\n' "$base" >"$out/$i.oldargs"
  printf '%s\n' "$args" >"$out/$i.newargs"
done

python3 - "$out" "$sha" "${#SUITE[@]}" <<'EOF'
import json, sys
out, sha, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(p):
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
for i in range(n):
    old, new = load(f"{out}/{i}.old"), load(f"{out}/{i}.new")
    oa, na = open(f"{out}/{i}.oldargs").read().strip(), open(f"{out}/{i}.newargs").read().strip()
    print(f"\n### spindle bench {na}  (this)  vs  spindle bench {oa}  ({sha}), {len(new)} runs each, alternated\n")
    print(f"| figure | {sha} mean | this mean | this / {sha} |")
    print("|---|---:|---:|---:|")
    for k, v in new[0].items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        ov = [r[k] for r in old if k in r]
        nv = [r[k] for r in new]
        if not ov:
            print(f"| {k} | - | {sum(nv)/len(nv):,.2f} | - |")
            continue
        om, nm = sum(ov) / len(ov), sum(nv) / len(nv)
        ratio = f"{nm/om:.2f}x" if om else "-"
        print(f"| {k} | {om:,.2f} | {nm:,.2f} | {ratio} |")
print(f"\nraw runs: {out}")
EOF
