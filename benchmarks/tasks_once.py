"""One run of the thesis's query (face detection at 160x120, 120 events, block 64) on the task
engine with 2 workers, from the kleene and ``benchmarks`` found on the path: the old-vs-new
comparison of the automatic operator choice (old code: threads, its default; new: ``auto``).
Prints wall and critical-path CPU seconds, matches, UDF calls (this process's) and the choice.

    farm-bench -n 3 --timeout 900 \\
      --vs "sh -c 'cd /tmp/base && PYTHONPATH=src:.:$EXTRA python $NEW/benchmarks/tasks_once.py'" \\
      -- sh -c 'cd $NEW && PYTHONPATH=src:.:$EXTRA python benchmarks/tasks_once.py'
"""

from __future__ import annotations

from benchmarks.parallel import TASKS_QUERY, FaceUdf, _abc_events, _run_tasks

face = FaceUdf("160x120")
r = _run_tasks(TASKS_QUERY, _abc_events(120), {"face": face}, "tasks", 2, 64, "priority")
print(round(r["wall"], 3), round(r["critical_cpu"], 3), len(r["matches"]), face.calls,
      r.get("choice"))
