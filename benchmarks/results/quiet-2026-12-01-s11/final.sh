#!/bin/bash
# Session 11's closing measurements, sequential, with nothing else running.
# old = /tmp/kleene-s11 (main bc4fc2f, the start of session 11), new = main with the helpers merged.
cd /work/main
export PYTHONPATH=src
unset PYTHONDONTWRITEBYTECODE
PY=/work/main/.venv/bin/python
B=/tmp/kleene-s11/src
R=benchmarks/results/quiet-2026-12-01-s11
step() { echo "=== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
$PY -m compileall -q $B src benchmarks
printf 'ts,x\n1,1\n2,2\n3,3\n4,4\n5,5\n' > /tmp/s11_notype.csv
printf 'ts,type,x\n1,A,1\n2,B,2\n3,A,3\n4,B,4\n5,A,5\n6,B,6\n7,A,7\n8,B,8\n9,A,9\n10,B,10\n' > /tmp/s11_tiny.csv
step "startup: 10 rows with a type column, old/new alternating, 12 each (wall s)"
for i in $(seq 1 12); do for t in old new; do src=$([ $t = old ] && echo $B || echo src)
  s=$(date +%s.%N); PYTHONPATH=$src $PY -m kleene run 'PATTERN SEQ(A a, B b) WHERE b.x > a.x' -i /tmp/s11_tiny.csv -q -o /tmp/s11_t.jsonl; e=$(date +%s.%N)
  echo "$t $(echo "$e - $s" | bc)"; done; done | awk '{v[$1]=v[$1]" "$2} END{for(k in v) print k":"v[k]}'
step "startup with --event-type (no type column), old/new alternating, 12 each"
for i in $(seq 1 12); do for t in old new; do src=$([ $t = old ] && echo $B || echo src)
  s=$(date +%s.%N); PYTHONPATH=$src $PY -m kleene run 'PATTERN SEQ(A a, A b) WHERE b.x > a.x' -i /tmp/s11_notype.csv --event-type A -q -o /tmp/s11_t.jsonl; e=$(date +%s.%N)
  echo "$t $(echo "$e - $s" | bc)"; done; done | awk '{v[$1]=v[$1]" "$2} END{for(k in v) print k":"v[k]}'
step ab; $PY -m benchmarks.ab --old $B --new src --cpu --repeats 3 --json $R/final_ab.json 2>&1 | tail -12
step keyed-nfa; $PY -m benchmarks.parallel_keyed --no-flink --pairs 5 --engine-pairs 3 --plan nfa --baseline-src $B --out $R/final_keyed_nfa.json 2>&1 | tail -12
step sinkg; $PY -m benchmarks.linkedcep --only sinkg --sink-events 2000 --base-src $B --sinkg-windows 10,20,30,40 --sinkg-shapes general,general_star,general_two,general_not,general_star_last 2>&1 | tail -40
step starlast; [ -d /tmp/starlast-d7cb/src ] || { mkdir -p /tmp/starlast-d7cb && git archive d7cb4cb src | tar -x -C /tmp/starlast-d7cb; }; $PY -m benchmarks.chain_star_ends ab --tree cand=/tmp/starlast-d7cb/src --tree start=$B --tree new=src --rounds 5 --shapes star_last,star_last_not 2>&1 | tail -14
step fwdnot; for i in 1 2 3; do PYTHONPATH=$B $PY -m benchmarks.chain_fwd_not old 2>&1 | tail -4; PYTHONPATH=src $PY -m benchmarks.chain_fwd_not new 2>&1 | tail -4; done
step star2; $PY -m benchmarks.chain_fwd_starts --old-src $B --rounds 5 2>&1 | tail -14
step done
