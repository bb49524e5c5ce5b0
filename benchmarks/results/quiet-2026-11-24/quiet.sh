#!/bin/bash
# quiet-window measurements, sequential; main at its current commit
cd /work/main
export PYTHONPATH=src
PY=/work/main/.venv/bin/python
B=/tmp/kleene-base-s8/src
R=/tmp/quiet
step() { echo "=== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
step tasks-targets; $PY -m benchmarks.parallel targets > $R/tasks_targets.json 2> $R/tasks_targets.err; tail -c 3000 $R/tasks_targets.json
step keyed-runs-flink; $PY -m benchmarks.parallel_keyed --pairs 5 --engine-pairs 3 --flink-repeats 1 --out $R/parallel_keyed_quiet.json 2>&1 | tail -40
step keyed-nfa; $PY -m benchmarks.parallel_keyed --no-flink --pairs 5 --engine-pairs 3 --plan nfa --out $R/parallel_keyed_quiet_nfa.json 2>&1 | tail -30
step cli-vs-loop; $PY -m benchmarks.cli_vs_loop --old $B --new src --repeats 3 2>&1 | tail -30
step linkedcep-exp2; $PY -m benchmarks.linkedcep_ab --old $B --new src --rounds 3 --only exp2 --json-dir $R/lcab 2>&1 | tail -30
step startup; env -u PYTHONDONTWRITEBYTECODE sh -c "$PY -m compileall -q $B src && $PY -m benchmarks.read_speed --old $B --new src --events 10000 --repeats 10" 2>&1 | tail -15
step read; env -u PYTHONDONTWRITEBYTECODE $PY -m benchmarks.read_speed --old $B --new src --repeats 5 2>&1 | tail -15
step ab; $PY -m benchmarks.ab --old $B --new src --cpu --repeats 3 --json $R/ab.json 2>&1 | tail -25
step done
