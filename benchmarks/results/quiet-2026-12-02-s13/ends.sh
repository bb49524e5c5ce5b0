#!/bin/sh
# Session 13: when each of the two part workers finished (> _write_lines) and the run ended,
# for each variant (prev: PREV=<a tree before the buckets>/src; b8, b32: this tree with
# BUCKETS_PER_WORKER 8 or 32), alternating, ROUNDS rounds:  VARS="prev b32" sh ends.sh ROUNDS
# (ends.log: "idle" is how long the first worker to finish waited for the other)
cd "$(dirname "$0")/../../.."
CSV=benchmarks/.data/stock_1000000_s42_k50_100ms.csv
for r in $(seq 1 $1); do for v in $VARS; do
  case $v in prev) S=${PREV:-/tmp/prev/src}; B=8;; b8) S=src; B=8;; b32) S=src; B=32;; esac
  T0=$(date +%s.%N) BPW=$B PYTHONPATH=$S .venv/bin/python benchmarks/results/quiet-2026-12-02-s13/timeline.py run /tmp/ab15_stock.kleene -i $CSV --event-type Stock --plan nfa --workers 2 -q -o /tmp/o2n.jsonl 2>&1 | awk -v v=$v '/> _write_lines/{e[n++]=$2} /> run_parts/{s=$2} /main done/{d=$2} END{d0=e[1]-e[0]; printf "%s start %.3f ends %.3f %.3f idle %.3f done %.3f\n", v, s, e[0], e[1], d0, d}'
done; done
