"""Run one measurement in a subprocess; read its wall time, peak RSS and the machine's load.

Peak memory comes from two sources and the larger is reported:

* ``os.wait4``'s ``ru_maxrss`` for the child: on Linux this is the peak RSS of the child or of
  any of its descendants it waited for (``RUSAGE_BOTH`` of the zombie), exact for one process;
* a sampler thread that sums the RSS of the child's whole process tree from ``/proc`` every
  50 ms, which catches a JVM started by PyFlink (the child may never reap it).

A child reports its own numbers (engine-only seconds, matches...) by printing one line
``RESULT {json}`` on stdout; :func:`run` returns it parsed.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def loadavg() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages from /proc/loadavg."""
    try:
        a, b, c = Path("/proc/loadavg").read_text().split()[:3]
        return float(a), float(b), float(c)
    except OSError:
        return (-1.0, -1.0, -1.0)


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(root: int) -> int:
    """Sum of VmRSS over ``root`` and all its descendants."""
    kids = _children_map()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_kb(pid)
        todo.extend(kids.get(pid, ()))
    return total


@dataclass
class Measurement:
    """One subprocess run."""

    cmd: list[str]
    wall_s: float
    returncode: int
    peak_rss_mb: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    result: dict[str, Any] = field(default_factory=dict)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def to_json(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 4), "returncode": self.returncode,
                "peak_rss_mb": round(self.peak_rss_mb, 1), "load_before": self.load_before,
                "load_after": self.load_after, "result": self.result,
                **({"stderr_tail": self.stderr_tail} if not self.ok else {})}


def _limit_memory(mb: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    return apply


def run(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        timeout: float | None = None, sample_tree: bool = False,
        mem_limit_mb: int | None = None) -> Measurement:
    """Run ``cmd``; wall time from spawn to exit; peak RSS as described in the module doc.

    ``mem_limit_mb`` caps the child's address space (RLIMIT_AS), so a runaway workload fails
    with MemoryError instead of starving the (shared) machine; not for JVMs, which reserve
    far more address space than they use.
    """
    full_env = {**os.environ, **(env or {})}
    load0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=full_env, cwd=cwd,
                            preexec_fn=_limit_memory(mem_limit_mb) if mem_limit_mb else None)
    peak_tree = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not stop.wait(0.05):
            peak_tree = max(peak_tree, tree_rss_kb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True) if sample_tree else None
    if sampler:
        sampler.start()
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    readers = [threading.Thread(target=lambda s=s, b=b: b.append(s.read()), daemon=True)
               for s, b in ((proc.stdout, out_chunks), (proc.stderr, err_chunks))]
    for r in readers:
        r.start()
    deadline = None if timeout is None else t0 + timeout
    status, ru = 0, None
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if deadline is not None and time.perf_counter() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    stop.set()
    if sampler:
        sampler.join()
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    rc = proc.returncode
    stdout = b"".join(out_chunks).decode(errors="replace")
    stderr = b"".join(err_chunks).decode(errors="replace")
    result: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    maxrss_kb = ru.ru_maxrss if ru is not None else 0
    if platform.system() == "Darwin":  # bytes there
        maxrss_kb //= 1024
    return Measurement(list(cmd), wall, rc, max(maxrss_kb, peak_tree) / 1024.0, load0,
                       loadavg(), result, stderr[-3000:])
