#!/usr/bin/env bash
# Rebuilds the dynamic-scheduling study's experiment (docs/simulator.md, "Elastic jobs"):
# 64 GPUs (8 nodes x 8), ResNet-110 / CIFAR-10 jobs with the study's measured throughput,
# Poisson arrivals at 250 s, 500 s and 1000 s mean (the study's 206, 114 and 44 jobs), every
# job 5040 s alone on 8 GPUs, 10 s per resize; each policy over SEEDS seeds. Prints the
# average job time in hours per policy and contention level (mean over the seeds).
#
#   scripts/elastic-study.sh [SPINDLE_BINARY] [SEEDS] [THROUGHPUT_TABLE]
set -euo pipefail
bin=${1:-target/release/spindle}
seeds=${2:-5}
table=${3:-"1:318.0;2:576.2;4:1152.4;8:2177.8"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
levels=("extreme 206 250" "moderate 114 500" "none 44 1000")
policies=("doubling" "doubling-by-gain" "doubling-adaptive" "fixed-1" "fixed-2" "fixed-4" "fixed-8")
declare -A sum
for lv in "${levels[@]}"; do
  read -r name jobs gap <<<"$lv"
  for seed in $(seq 1 "$seeds"); do
    trace="$work/$name-$seed.csv"
    "$bin" sls generate --jobs "$jobs" --interarrival "$gap" --gpu-mix 8:1 \
      --duration fixed:5040 --users 1 --seed "$seed" --out "$trace" >/dev/null 2>&1
    for pol in "${policies[@]}"; do
      case $pol in
        fixed-*) args=(--policy capacity --fixed-gpus "${pol#fixed-}") ;;
        *) args=(--policy "$pol" --make-elastic) ;;
      esac
      out="$work/out-$name-$seed-$pol"
      "$bin" sls --trace "$trace" "${args[@]}" --throughput "$table" --restart-cost-s 10 \
        --nodes 8 --gpus-per-node 8 --out "$out" --quiet --no-timing >/dev/null
      jct=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['avg_jct_s'])" "$out/summary.json")
      sum[$name/$pol]=$(python3 -c "print(${sum[$name/$pol]:-0} + $jct)")
    done
  done
done
printf '| policy | extreme (250 s) | moderate (500 s) | none (1000 s) |\n|---|---|---|---|\n'
for pol in "${policies[@]}"; do
  row="| $pol"
  for lv in "${levels[@]}"; do
    read -r name _ _ <<<"$lv"
    row+=$(python3 -c "print(' | %.2f' % (${sum[$name/$pol]} / $seeds / 3600))")
  done
  echo "$row |"
done
