"""What the numbers were measured on: cores, RAM, CPU model, Python, Java, commit, date."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from .datasets import BENCH_DIR


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return -1.0


def _cmd(args: list[str]) -> str:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (r.stdout or r.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def info() -> dict[str, Any]:
    """A dict describing the machine and the code under test."""
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "ram_gib": _mem_total_gib(),
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _cmd(["java", "-version"]),
        "kleene_commit": _cmd(["git", "-C", str(BENCH_DIR.parent), "rev-parse", "--short",
                               "HEAD"]),
        "kleene_worktree_dirty": _cmd(["git", "-C", str(BENCH_DIR.parent), "status",
                                       "--porcelain", "--", "src"]) not in ("", "unknown"),
    }
