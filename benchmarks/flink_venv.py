"""The separate PyFlink virtualenv, created on demand under ``benchmarks/.venv-flink``.

PyFlink 2.3 pins pyarrow<17 (through Beam), pandas<2.3 and py4j 0.10.9.7, which conflict with
``pyspark[sql]`` 4.x in the repo venv, so the baseline runs in its own venv. Creating it is::

    python3 -m venv benchmarks/.venv-flink
    benchmarks/.venv-flink/bin/pip install apache-flink==2.3.0     # ~450 MB download, ~1-2 min

It needs a Java 11+ runtime on PATH (Java 17 was used here).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from .datasets import BENCH_DIR

VENV = BENCH_DIR / ".venv-flink"
PY = VENV / "bin" / "python"
FLINK_VERSION = "2.3.0"


def ready() -> bool:
    """True when the venv exists and imports pyflink."""
    return PY.exists() and subprocess.run(
        [str(PY), "-c", "import pyflink.table"], capture_output=True).returncode == 0


def ensure(*, create: bool = True) -> str | None:
    """Make sure the Flink venv works; return None if so, else the reason it does not."""
    if shutil.which("java") is None:
        return "no java on PATH (PyFlink needs a JRE 11+; `make java` installs OpenJDK 17)"
    if ready():
        return None
    if not create:
        return f"{VENV} missing (run with --setup-flink to create it)"
    print(f"creating {VENV} and installing apache-flink=={FLINK_VERSION} (one time, ~2 min)",
          file=sys.stderr, flush=True)
    py3 = shutil.which("python3") or sys.executable
    r = subprocess.run([py3, "-m", "venv", str(VENV)])
    if r.returncode == 0:
        r = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "--no-cache-dir",
                            f"apache-flink=={FLINK_VERSION}"])
    if r.returncode != 0 or not ready():
        return f"could not install apache-flink=={FLINK_VERSION} into {VENV}"
    return None
