"""A query's UDFs on the Spark workers (issue 17).

A UDF travels to the tasks inside the pickled task; a function of an importable module is
pickled *by reference* (module and name), so each worker imports its module. A module the
driver found on its own path (``--udf mymod:f`` next to the query, a notebook's folder) is not
on the workers' path, so :func:`ship_udfs` sends it along: the module's file, or its top-level
package's directory, zipped under a name that holds a hash of its content, goes to
``SparkContext.addPyFile`` (Spark Connect: ``addArtifacts(pyfile=True)``) before the job is
built. Modules installed in the interpreter (standard library, site-packages) and kleene itself
are not shipped: the workers have them.

What a shipped module imports in turn must still be importable on the workers. If a worker
cannot import a UDF's module, :func:`load_spec` (the task's unpickling on the worker) raises a
one-line :class:`~kleene.errors.EngineError` naming the module, which the driver re-raises as
itself (:func:`kleene.spark.session.task_errors`; ``kleene run --spark`` exits 3).

Example:
    >>> ship_udfs(spark, {"close": mymod.close})                          # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import sysconfig
import tempfile
import threading
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import EngineError

SHIP_DIR = "kleene-udfs"
"""The folder (in the temporary directory) that holds the zipped modules."""

_SHIPPED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()


def udf_modules(udfs: Mapping[str, Callable[..., Any]]) -> list[str]:
    """The modules that define ``udfs`` (a pure UDF's wrapped function's), sorted; functions
    of ``__main__`` or with no module are pickled by value and need none."""
    names = set()
    for fn in udfs.values():
        inner = getattr(fn, "fn", None)  # kleene.udf(pure=True) wraps the user's function
        target = inner if callable(inner) else fn
        mod = getattr(target, "__module__", None)
        if isinstance(mod, str) and mod not in ("__main__", "builtins"):
            names.add(mod)
    return sorted(names)


def _installed_roots() -> list[Path]:
    roots = {Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
             if (p := sysconfig.get_paths().get(key))}
    roots.add(Path(__file__).resolve().parents[1])  # kleene itself
    return sorted(roots)


def _source_of(top: str) -> Path | None:
    """The file (a module) or directory (a package) of the top-level module ``top``, or
    ``None`` when the workers have it already (installed, built in) or it has no file."""
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if module is None or not file:
        return None
    path = Path(file).resolve()
    if path.suffix not in (".py", ".pyc"):
        return None  # an extension module: a zip cannot carry it, install it on the workers
    if any(path.is_relative_to(r) for r in _installed_roots()):
        return None
    return path.parent if path.name == "__init__.py" else path


def _zipped(top: str, source: Path) -> Path:
    """``source`` (a module file or a package directory) as ``TMP/kleene-udfs/top-HASH.zip``:
    the same content always gets the same path (Spark refuses one file name for two paths)."""
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix != ".pyc"
                       and not any(part == "__pycache__" or part.startswith(".")
                                   for part in p.relative_to(source).parts))
        members = [(f"{top}/{p.relative_to(source).as_posix()}", p) for p in files]
    else:
        members = [(f"{top}.py", source)]
    digest = hashlib.sha256()
    blobs = []
    for arc, p in members:
        data = p.read_bytes()
        blobs.append((arc, data))
        digest.update(arc.encode() + b"\0" + hashlib.sha256(data).digest())
    folder = Path(tempfile.gettempdir()) / SHIP_DIR
    folder.mkdir(exist_ok=True)
    out = folder / f"{top}-{digest.hexdigest()[:16]}.zip"
    if not out.exists():
        part = out.with_name(f"{out.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            for arc, data in blobs:
                z.writestr(arc, data)
        os.replace(part, out)
    return out


def ship_udfs(spark: Any, udfs: Mapping[str, Callable[..., Any]]) -> list[str]:
    """Send the modules that define ``udfs`` to the workers of ``spark``'s application (once
    per module content and application). Call it before the job that uses them is built:
    pyspark gives a job the files added until then. Returns the zips' paths."""
    from .batch import _spark_context

    shipped = []
    tops = sorted({m.split(".")[0] for m in udf_modules(udfs)})
    for top in tops:
        source = _source_of(top)
        if source is None:
            continue
        try:
            zipped = str(_zipped(top, source))
        except OSError as e:
            raise EngineError(f"UDF module {top!r}: cannot package {source} for the Spark "
                              f"workers: {e.strerror or e}") from None
        sc = _spark_context(spark)
        app = str(sc.applicationId) if sc is not None else f"connect-{id(spark)}"
        with _LOCK:
            if (app, zipped) in _SHIPPED:
                continue
            if sc is not None:
                sc.addPyFile(zipped)
            else:
                spark.addArtifacts(zipped, pyfile=True)
            _SHIPPED.add((app, zipped))
        shipped.append(zipped)
    return shipped


def dump_spec(spec: Any) -> bytes:
    """``spec`` pickled with pyspark's cloudpickle (as pyspark pickles a task's function)."""
    from pyspark import cloudpickle

    return bytes(cloudpickle.dumps(spec))  # type: ignore[no-untyped-call]


def load_spec(blob: bytes, modules: tuple[str, ...]) -> Any:
    """On a worker: unpickle a task's spec; a UDF module the worker cannot import is a
    one-line :class:`EngineError` naming it (not pickle's traceback)."""
    try:
        return pickle.loads(blob)  # noqa: S301 - the driver's own task, sent by Spark
    except ImportError as e:
        what = (f"UDF module {', '.join(repr(m) for m in modules)}" if modules
                else "a module of the query")
        raise EngineError(
            f"{what} cannot be imported on the Spark workers ({type(e).__name__}: {e}); "
            "kleene sends a UDF's own module or package to the workers, but what it imports "
            "must be installed there (or added with spark-submit --py-files)") from None


__all__ = ["dump_spec", "load_spec", "ship_udfs", "udf_modules"]
