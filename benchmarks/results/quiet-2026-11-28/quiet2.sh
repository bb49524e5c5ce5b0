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
# re-run of the first three steps of quiet.sh: a stray niced test run shared the machine during them
step startup; $PY -m benchmarks.read_speed --old $B --new src --events 10000 --repeats 10 2>&1 | tail -15
step read; $PY -m benchmarks.read_speed --old $B --new src --repeats 5 2>&1 | tail -15
step keyed-nfa; $PY -m benchmarks.parallel_keyed --no-flink --pairs 5 --engine-pairs 3 --plan nfa --out $R/parallel_keyed_nfa.json 2>&1 | tail -30
step done
