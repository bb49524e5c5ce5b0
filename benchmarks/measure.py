"""Run one measurement in a subprocess; read its wall time, peak RSS and the machine's load.

Peak memory comes from two sources and the larger is reported:

* ``os.wait4``'s ``ru_maxrss`` for the child: on Linux this is the peak RSS of the child or of
  any of its descendants it waited for (``RUSAGE_BOTH`` of the zombie), exact for one process.
  The child is started by a small launcher process (:data:`_LAUNCHER`), which waits for it and
  reports its ``ru_maxrss``: Linux carries the forking process's memory high-water mark over
  ``exec`` into the child's ``ru_maxrss``, so a child forked straight from a large process
  (pytest after a heavy test, a benchmark holding its data) would report at least that
  process's size (800 MB for an empty child of an 800 MB parent, measured); the launcher is
  small, so its children are measured as if started from a shell;
* a sampler thread that sums the RSS of the child's whole process tree from ``/proc`` every
  50 ms, which catches a JVM started by PyFlink (the child may never reap it).

A child reports its own numbers (engine-only seconds, matches...) by printing one line
``RESULT {json}`` on stdout; :func:`run` returns it parsed.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def as_console(cli_main: object) -> None:
    """Keep pyarrow from importing pandas in this process as the ``kleene`` process does
    (``_skip_pandas_probe``, session 11; older trees under ``--old``: their import hook)."""
    probe = getattr(cli_main, "_skip_pandas_probe", None)
    if probe is not None:
        probe()
    else:
        sys.meta_path.insert(0, cli_main._NoPandasForArrow())  # type: ignore[attr-defined]

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


# Runs the command (argv[3:]) with its stdin/stdout/stderr, waits for it, and writes
# "status maxrss_kb wall_s" to fd argv[1]; argv[2] is an address-space cap in MB (0: none).
# Started with -S (no site): a fresh, small process whatever the size of its parent.
_LAUNCHER = """\
import os, resource, subprocess, sys, time
fd, mb = int(sys.argv[1]), int(sys.argv[2])
if mb:
    resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
t0 = time.perf_counter()
try:
    p = subprocess.Popen(sys.argv[3:])
except OSError as e:
    print(f"cannot start {sys.argv[3]!r}: {e}", file=sys.stderr)
    os.write(fd, b"32512 0 0")
    sys.exit(127)
_, status, ru = os.wait4(p.pid, 0)
os.write(fd, f"{status} {ru.ru_maxrss} {time.perf_counter() - t0}".encode())
"""


def run(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        timeout: float | None = None, sample_tree: bool = False,
        mem_limit_mb: int | None = None) -> Measurement:
    """Run ``cmd``; wall time from spawn to exit; peak RSS as described in the module doc.

    ``mem_limit_mb`` caps the child's address space (RLIMIT_AS), so a runaway workload fails
    with MemoryError instead of starving the (shared) machine; not for JVMs, which reserve
    far more address space than they use. On ``timeout`` the child's whole process group is
    killed.
    """
    full_env = {**os.environ, **(env or {})}
    load0 = loadavg()
    rfd, wfd = os.pipe()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", _LAUNCHER, str(wfd), str(mem_limit_mb or 0), *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=cwd,
        pass_fds=(wfd,), start_new_session=True)
    os.close(wfd)
    peak_tree = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not stop.wait(0.05):
            own = _rss_kb(proc.pid)  # the launcher itself is not the workload
            peak_tree = max(peak_tree, tree_rss_kb(proc.pid) - own)

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
    killed = False
    while proc.poll() is None:
        if deadline is not None and time.perf_counter() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            proc.wait()
            break
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    with os.fdopen(rfd, "rb") as f:
        report = f.read().split()
    stop.set()
    if sampler:
        sampler.join()
    for r in readers:
        r.join()
    maxrss_kb = 0
    if len(report) == 3 and not killed:
        status, maxrss_kb, wall = int(report[0]), int(report[1]), float(report[2])
        rc = os.waitstatus_to_exitcode(status)
    else:  # killed (timeout) or the launcher failed
        rc = proc.returncode if proc.returncode else -signal.SIGKILL
    stdout = b"".join(out_chunks).decode(errors="replace")
    stderr = b"".join(err_chunks).decode(errors="replace")
    result: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    if platform.system() == "Darwin":  # bytes there
        maxrss_kb //= 1024
    return Measurement(list(cmd), wall, rc, max(maxrss_kb, peak_tree) / 1024.0, load0,
                       loadavg(), result, stderr[-3000:])
