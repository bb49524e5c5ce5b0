"""Getting a SparkSession the way kleene needs it, without overriding the user's deployment.

Rules (each one a gotcha seen on the dev machine, see docs/spark.md):

* never hard-code ``.master()``: ``spark-submit --master`` and ``SPARK_REMOTE`` (Spark Connect)
  win; without either, PySpark's default is local mode with all cores;
* ``PYSPARK_PYTHON`` defaults to the running interpreter, so workers import the same packages;
* the session time zone is UTC (timestamps are microseconds since the epoch, in UTC);
* few shuffle partitions for local runs (the default 200 makes tiny tasks);
* the RocksDB state store, which ``transformWithStateInPandas`` requires.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from .. import errors
from ..errors import KleeneError, MissingExtraError

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

INSTALL_HINT = 'the Spark integration needs PySpark: pip install "kleene[spark]"'


def require_pyspark() -> Any:
    """Import pyspark or raise :class:`MissingExtraError` with the install command."""
    try:
        import pyspark
        import pyspark.sql  # noqa: F401
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise MissingExtraError(f"{INSTALL_HINT} ({e})") from None
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:  # pragma: no cover
        raise MissingExtraError(f"{INSTALL_HINT} (pandas and pyarrow are needed: {e})") from None
    return pyspark


def runtime_conf(shuffle_partitions: int | None = None) -> dict[str, str]:
    """The SQL settings kleene applies to its sessions (runtime settings, safe on Connect)."""
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    }
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    return conf


def get_session(master: str | None = None, *, app_name: str = "kleene",
                conf: dict[str, str] | None = None) -> Any:
    """Return a SparkSession configured for kleene.

    ``master`` (``local[2]``, ``spark://host:7077``, ``yarn``, ``sc://host:15002``) is used only
    when given; otherwise an active session, ``spark-submit``'s master or ``SPARK_REMOTE`` decide.

    Example:
        >>> spark = get_session("local[2]")  # doctest: +SKIP
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # local: an explicit local[...] master, or plain `python` (not spark-submit, which sets
    # PYSPARK_GATEWAY_PORT, and not Spark Connect); only then pick the shuffle partitions
    launched = "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_REMOTE" in os.environ
    local = master.startswith("local") if master is not None else not launched
    cores = os.cpu_count() or 2
    settings = runtime_conf(max(2, 2 * cores) if local else None)
    settings.update(conf or {})
    if master is None:
        active = SparkSession.getActiveSession()
        if active is not None:
            # the user's session: only what streaming cannot run without (their time zone and
            # partitions stay; kleene reads instants time-zone-free and checks naive columns)
            active.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
            return active
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.remote(master) if master.startswith("sc://") else builder.master(master)
    for k, v in settings.items():
        builder = builder.config(k, v)
    if local and master is not None and not master.startswith("sc://"):
        builder = builder.config("spark.ui.enabled", "false")
    return builder.getOrCreate()


_TASK_ERROR = re.compile(r"^kleene\.errors\.(\w+): ", re.M)


def task_error(exc: BaseException) -> KleeneError | None:
    """The kleene error a Spark task raised, rebuilt on the driver from the
    ``PythonException`` Spark reports (class and message), or ``None`` if it was not one.

    A task's :class:`~kleene.errors.InputError` ("file, row 70001, column 'v': 'oops' is not
    an integer") or :class:`~kleene.errors.CapacityError` then reaches the user as itself,
    not as a Java and Python traceback."""
    if type(exc).__name__ != "PythonException":
        return None
    text = str(exc)
    found = list(_TASK_ERROR.finditer(text))
    if not found:
        return None
    last = found[-1]
    cls = getattr(errors, last.group(1), None)
    if not (isinstance(cls, type) and issubclass(cls, KleeneError)):
        return None
    message = text[last.end():]
    # what follows the message: a blank line, the JVM stack, or Spark Connect's SQLSTATE line
    message = re.split(r"\n\s*\n|\nJVM stacktrace:|\n\s*SQLSTATE: ", message,
                       maxsplit=1)[0].rstrip()
    try:
        return cls(message)
    except TypeError:  # a constructor that needs more than the message
        return KleeneError(message)


@contextlib.contextmanager
def task_errors() -> Iterator[None]:
    """Re-raise a kleene error raised inside a Spark task as that error (see :func:`task_error`)."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - only PythonExceptions that carry a kleene error
        rebuilt = task_error(e)
        if rebuilt is None:
            raise
        raise rebuilt from None


__all__ = ["INSTALL_HINT", "ROCKSDB", "get_session", "require_pyspark", "runtime_conf",
           "task_error", "task_errors"]
