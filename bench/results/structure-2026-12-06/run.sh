#!/bin/sh
# Before/after of the structure work: BEFORE is a build of 4a48480 (the commit before it), AFTER this
# tree's build. Alternating runs on the same machine; run from the repository root as root.
#   sh bench/results/structure-2026-12-06/run.sh /work/wt-before/build/lathe build/lathe
set -eu
BEFORE=$1
AFTER=$2
OUT=bench/results/structure-2026-12-06
for round in 1 2; do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    /usr/bin/python3 bench/sched_bench.py --no-slurm --jobs 100 --placement 300 --lathe "$bin" \
      --out "$OUT/sched_${which}_$round.json" > "$OUT/sched_${which}_$round.txt" 2>&1
  done
done
BASELINE=$BEFORE sh bench/front_bench.sh "$AFTER" 5 16 3 > "$OUT/front.txt" 2>&1
