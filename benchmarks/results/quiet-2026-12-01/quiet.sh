#!/bin/bash
# Session 10 quiet-window measurements (2026-12-01, a fresh VM, nothing else running), sequential,
# on main 91b5cd3 (the start of session 10). old = main 68eb332 (just before session 9's read-start
# merge, where the ab stock slow-down came in). With .pyc for both trees.
cd /work/main
export PYTHONPATH=src
unset PYTHONDONTWRITEBYTECODE
PY=/work/main/.venv/bin/python
B=/tmp/kleene-68eb332/src
R=benchmarks/results/quiet-2026-12-01
step() { echo "=== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
$PY -m compileall -q $B src benchmarks
step startup; $PY -m benchmarks.read_speed --old $B --new src --events 10000 --repeats 10 --json $R/startup.json 2>&1 | tail -15
step read; $PY -m benchmarks.read_speed --old $B --new src --repeats 5 --skip-startup --json $R/read.json 2>&1 | tail -15
step cli-vs-loop; $PY -m benchmarks.cli_vs_loop --old $B --new src --repeats 3 2>&1 | tail -30
step ab-stock; $PY -m benchmarks.ab --old $B --new src --cpu --repeats 5 --only stock --json $R/ab_stock.json 2>&1 | tail -15
step keyed-nfa; $PY -m benchmarks.parallel_keyed --no-flink --pairs 5 --engine-pairs 3 --plan nfa --out $R/parallel_keyed_nfa.json 2>&1 | tail -30
step done
# second part, run right after (14:29 UTC), the helpers just started (reading code):
# step keyed-runs-flink; $PY -m benchmarks.parallel_keyed --pairs 5 --engine-pairs 3 --flink-repeats 1 --no-setup-flink --out $R/parallel_keyed_runs_flink.json
