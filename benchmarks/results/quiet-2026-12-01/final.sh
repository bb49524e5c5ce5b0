#!/bin/bash
# Session 10's closing measurements, sequential, on main 5487537 (all helpers merged), nothing else running.
# old = /tmp/kleene-base-s10 (main 91b5cd3, the start of session 10); pre18 = /tmp/kleene-pre18
# (main a52d02f~1 = 91122ac, just before issue 18's first commit). With .pyc for every tree.
cd /work/main
export PYTHONPATH=src
unset PYTHONDONTWRITEBYTECODE
PY=/work/main/.venv/bin/python
B=/tmp/kleene-base-s10/src
P18=/tmp/kleene-pre18/src
R=benchmarks/results/quiet-2026-12-01
step() { echo "=== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
$PY -m compileall -q $B $P18 src benchmarks
step startup; $PY -m benchmarks.read_speed --old $B --new src --events 10000 --repeats 10 --json $R/final_startup.json 2>&1 | tail -8
step read; $PY -m benchmarks.read_speed --old $B --new src --repeats 5 --skip-startup --json $R/final_read.json 2>&1 | tail -8
step cli-vs-loop; $PY -m benchmarks.cli_vs_loop --old $B --new src --repeats 3 2>&1 | tail -3
step keyed-nfa; $PY -m benchmarks.parallel_keyed --no-flink --pairs 5 --engine-pairs 3 --plan nfa --baseline-src $B --out $R/final_keyed_nfa.json 2>&1 | tail -12
step keyed-runs-flink; $PY -m benchmarks.parallel_keyed --pairs 5 --engine-pairs 3 --flink-repeats 1 --no-setup-flink --out $R/final_keyed_runs_flink.json 2>&1 | tail -12
step ab-session; $PY -m benchmarks.ab --old $B --new src --cpu --repeats 3 --json $R/final_ab_session.json 2>&1 | tail -12
step ab-pre18; $PY -m benchmarks.ab --old $P18 --new src --cpu --repeats 3 --json $R/final_ab_pre18.json 2>&1 | tail -12
step writers-parquet; $PY -m benchmarks.writers_bench --engine-events 1000000 --table --formats parquet --ab $B --rounds 5 --repeat 3 2>&1 | tail -8
step sinkg; $PY -m benchmarks.linkedcep --only sinkg --sink-events 2000 --base-src $B --sinkg-windows 10,20,30,40 --sinkg-shapes general,general_star,general_two 2>&1 | tail -30
step done
# re-run of keyed-runs-flink without the option that does not exist (15:49 UTC):
# $PY -m benchmarks.parallel_keyed --pairs 5 --engine-pairs 3 --flink-repeats 1 --out $R/final_keyed_runs_flink.json
