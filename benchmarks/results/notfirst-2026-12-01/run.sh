#!/bin/bash
cd /work/wt/notfirst
PY=/work/main/.venv/bin/python
echo "start $(date -u +%FT%TZ) load $(cat /proc/loadavg)"
for i in 1 2 3; do
  echo "round $i $(date -u +%T) load $(cat /proc/loadavg)"
  PYTHONPATH=/tmp/old-notfirst/src $PY -m benchmarks.chain_fwd_not old
  echo "  load $(cat /proc/loadavg)"
  PYTHONPATH=/tmp/nf/new-src $PY -m benchmarks.chain_fwd_not new
done
echo "end $(date -u +%FT%TZ) load $(cat /proc/loadavg)"
