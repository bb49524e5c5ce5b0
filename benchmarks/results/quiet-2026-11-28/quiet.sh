#!/bin/bash
# Session 9 quiet-window measurements, sequential, on main at its current commit, nothing else running.
# old = /tmp/kleene-base-s9 (main 111dc63, the start of session 9). With .pyc (the environment sets
# PYTHONDONTWRITEBYTECODE=1, which CI users do not have), so both trees are compiled first.
cd /work/main
export PYTHONPATH=src
unset PYTHONDONTWRITEBYTECODE
PY=/work/main/.venv/bin/python
B=/tmp/kleene-base-s9/src
R=benchmarks/results/quiet-2026-11-28
step() { echo "=== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
$PY -m compileall -q $B src benchmarks
step startup; $PY -m benchmarks.read_speed --old $B --new src --events 10000 --repeats 10 2>&1 | tail -15
step read; $PY -m benchmarks.read_speed --old $B --new src --repeats 5 2>&1 | tail -15
step keyed-nfa; $PY -m benchmarks.parallel_keyed --no-flink --pairs 5 --engine-pairs 3 --plan nfa --out $R/parallel_keyed_nfa.json 2>&1 | tail -30
step keyed-runs-flink; $PY -m benchmarks.parallel_keyed --pairs 5 --engine-pairs 3 --flink-repeats 1 --out $R/parallel_keyed_runs_flink.json 2>&1 | tail -40
step tasks-targets; $PY -m benchmarks.parallel targets > $R/tasks_targets.json 2> $R/tasks_targets.err; tail -c 2500 $R/tasks_targets.json
step linkedcep-exp2; $PY -m benchmarks.linkedcep_ab --old $B --new src --rounds 3 --only exp2 --json-dir $R/lcab 2>&1 | tail -30
step linkedcep-sink; $PY -m benchmarks.linkedcep --only sink --sink-events 2000 --json $R/linkedcep_sink.json 2>&1 | tail -20
step cli-vs-loop; $PY -m benchmarks.cli_vs_loop --old $B --new src --repeats 3 2>&1 | tail -30
step ab; $PY -m benchmarks.ab --old $B --new src --cpu --repeats 3 --json $R/ab.json 2>&1 | tail -25
step tasks-choices; $PY -m benchmarks.parallel choices --repeats 3 2>&1 | tail -20
step done
