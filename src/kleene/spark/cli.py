"""``kleene run QUERY --input PATH --spark [--master URL]``: read, match and write with Spark.

The result equals the embedded CLI's: the same events (row index ids, the same column type
inference for CSV), the same matches, and for JSON Lines byte-for-byte the same file, because
every line is produced by the embedded writer's :func:`kleene.events.writers.match_line` and the
lines are sorted into kleene's documented order before they are written.

Input may be a file, a glob (``data/*.csv.gz``) or a directory. Several files are read in the
order of their sorted paths and row ids continue from one file to the next (the embedded CLI
reads one file, so for a single file the ids are identical).
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from ..errors import InputError, QueryError
from .tasks import END_US, LAST_POS, SEQ

_TIME_CANDIDATES = ("ts", "timestamp", "time", "event_time")
ROW = "__kleene_row"
_META = "_metadata"


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def list_inputs(input_path: str) -> list[str]:
    """The input files: a file, a glob or a directory (hidden and ``_`` files skipped)."""
    if _is_remote(input_path):
        return [input_path]
    path = input_path.removeprefix("file://")
    if os.path.isdir(path):
        files = sorted(str(p) for p in Path(path).rglob("*") if p.is_file()
                       and not p.name.startswith((".", "_")))
    elif any(ch in path for ch in "*?["):
        files = sorted(f for f in glob.glob(path, recursive=True) if os.path.isfile(f))
    elif os.path.isfile(path):
        files = [path]
    else:
        raise InputError("no such file, directory or glob", path=input_path)
    if not files:
        raise InputError("no input files found", path=input_path)
    return files


def _format_of(files: list[str], fmt: str | None) -> str:
    from ..events.readers import detect_format

    f = (fmt or detect_format(files[0])).lower()
    return "jsonl" if f == "json" else f


def read_input(spark: Any, files: list[str], fmt: str, *, delimiter: str | None = None,
               column_types: Mapping[str, str] | None = None) -> tuple[Any, int, Any]:
    """Read the files with Spark and add ``__kleene_row``: the 0-based input row index.
    Returns the DataFrame, the number of rows and the cached scan (``unpersist()`` it when
    done; ``None`` when ``KLEENE_SPARK_CACHE_INPUT=0``).

    The index comes from the file scan's metadata: rows of one file split are contiguous in
    one task, so (file order, split start, ``monotonically_increasing_id``) orders them; a small
    job counts the rows of each split to turn that into a dense index.
    """

    if fmt == "csv":
        delim = delimiter or ("\t" if any(".tsv" in f.lower() for f in files) else ",")
        df = (spark.read.option("header", True).option("inferSchema", False)
              .option("sep", delim).option("mode", "FAILFAST").option("encoding", "UTF-8")
              .csv(files))
        df = _type_csv_columns(df, column_types or {})
    elif fmt == "jsonl":
        df = spark.read.option("mode", "FAILFAST").json(files)
    elif fmt == "parquet":
        df = spark.read.parquet(*files)
    else:
        raise InputError(f"unknown input format {fmt!r}; use csv, jsonl or parquet")
    return _with_file_row_index(df, files)


def _type_csv_columns(df: Any, overrides: Mapping[str, str]) -> Any:
    """Type CSV text columns like the embedded reader: inferred from the first 65,536 rows
    (int64 / float64 / bool / string), ``column_types`` overriding."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from ..events.convert import infer_text_type, parse_type_name

    sample = df.limit(65_536).toArrow()
    names = df.columns
    casts = {}
    for name in names:
        if name in overrides:
            t = parse_type_name(overrides[name], name)
        else:
            t = infer_text_type(sample.column(name).combine_chunks().cast(pa.string()))
        c = F.col(f"`{name}`")
        if pa.types.is_integer(t):
            casts[name] = F.trim(c).cast("long")
        elif pa.types.is_floating(t):
            casts[name] = F.trim(c).cast("double")
        elif pa.types.is_boolean(t):
            low = F.lower(F.trim(c))
            casts[name] = F.when(low == "true", True).when(low == "false", False) \
                .when(c.isNull(), None).otherwise(F.raise_error(
                    F.concat(F.lit(f"column {name!r}: "), c, F.lit(" is not true or false"))))
        elif pa.types.is_timestamp(t):
            casts[name] = F.to_timestamp(c)
    return df.select(*[casts.get(n, F.col(f"`{n}`")).alias(n) for n in names]) if casts else df


def _with_file_row_index(df: Any, files: list[str]) -> tuple[Any, int, Any]:
    from pyspark.sql import functions as F

    mid = "__kleene_mid"
    withm = df.select("*", F.col(f"{_META}.file_path").alias("__f"),
                      F.col(f"{_META}.file_block_start").alias("__b"),
                      F.monotonically_increasing_id().alias(mid))
    cached = None
    if os.environ.get("KLEENE_SPARK_CACHE_INPUT", "1") != "0":
        # the row count job, the time split's quantiles and the match job all read the
        # input: parse it once (memory and disk)
        from pyspark import StorageLevel

        withm = cached = withm.persist(StorageLevel.MEMORY_AND_DISK)
    stats = (withm.groupBy("__f", "__b").agg(F.min(mid).alias("m"), F.count("*").alias("n"))
             .collect())
    rank = {_norm(f): i for i, f in enumerate(files)}
    stats.sort(key=lambda r: (rank.get(_norm(r["__f"]), len(rank)), r["__f"], r["__b"]))
    spark = df.sparkSession
    offset = 0
    rows = []
    for r in stats:
        rows.append((r["__f"], int(r["__b"]), offset - int(r["m"])))
        offset += int(r["n"])
    if not rows:
        raise InputError("no events: the input is empty", path=files[0])
    base = spark.createDataFrame(rows, "__f string, __b long, __base long")
    joined = withm.join(F.broadcast(base), ["__f", "__b"])
    return joined.withColumn(ROW, F.col(mid) + F.col("__base")).drop(
        "__f", "__b", "__base", mid), offset, cached


def _norm(path: str) -> str:
    p = path.removeprefix("file://").removeprefix("file:")
    from urllib.parse import unquote

    return os.path.normpath(os.path.abspath(unquote(p))) if not _is_remote(path) else path


def _time_column(df: Any, time_col: str | None) -> str:
    if time_col is not None:
        if time_col not in df.columns:
            raise InputError(f"time column {time_col!r} not found; the columns are: "
                             f"{', '.join(c for c in df.columns if c != ROW)}")
        return time_col
    found = [c for c in _TIME_CANDIDATES if c in df.columns]
    if not found:
        raise InputError("no time column: pass --time-col; the columns are: "
                         f"{', '.join(c for c in df.columns if c != ROW)}")
    return found[0]


def run_query(query: str, input_path: str, *, master: str | None = None,
              output: str | None = None, fmt: str = "jsonl", input_format: str | None = None,
              time_col: str | None = None, type_col: str | None = None,
              event_type: str | None = None, id_col: str | None = None,
              time_unit: str = "s", column_types: Mapping[str, str] | None = None,
              delimiter: str | None = None, dialect: str | None = None,
              udfs: Mapping[str, Callable[..., Any]] | None = None,
              engine: str = "automaton", count_only: bool = False,
              partitions: int | None = None, stdout: IO[str] | None = None,
              spark: Any = None) -> dict[str, Any]:
    """Run a query (text or a query file) over files with Spark; write matches.

    ``output=None`` writes JSON Lines to ``stdout``; a path gets one file for ``jsonl`` and
    ``csv`` on a local file system (the single part file Spark wrote is moved there), else a
    Spark output directory. Returns a summary: events, matches, seconds, plan mode, output.
    """
    from ..api import compile as compile_query
    from .batch import match
    from .plan import plan_query
    from .session import get_session

    started = time.perf_counter()
    text, default_name = load_query(query)
    compiled = compile_query(text, dialect=dialect, udfs=dict(udfs or {}), name=default_name)
    fmt = fmt.lower()
    if fmt not in ("jsonl", "csv", "parquet"):
        raise InputError(f"unknown output format {fmt!r}; use jsonl, csv or parquet")
    if fmt == "parquet" and output is None:
        raise InputError("Parquet output needs a path: pass --output PATH")
    files = list_inputs(input_path)
    in_fmt = _format_of(files, input_format)
    session = spark if spark is not None else get_session(master)
    df, n_events, cached = read_input(session, files, in_fmt, delimiter=delimiter,
                                      column_types=column_types)
    tcol = _time_column(df, time_col)
    if event_type is None:
        type_col = type_col or "type"
        if type_col not in df.columns:
            raise InputError(f"type column {type_col!r} not found; pass --type-col COLUMN or "
                             f"--event-type NAME; the columns are: "
                             f"{', '.join(c for c in df.columns if c != ROW)}")
    else:
        type_col = None
    df = _parse_time_strings(df, tcol)
    out_mode: Any = "json" if fmt == "jsonl" else "map"
    matches = match(df, compiled.analyzed, time_col=tcol, type_col=type_col,
                    event_type=event_type, id_col=id_col, time_unit=time_unit,
                    engine=engine, output=out_mode, partitions=partitions,
                    row_index_col=ROW)
    ordered = matches.repartition(1).sortWithinPartitions(END_US, LAST_POS, SEQ)
    try:
        if count_only:
            n = matches.count()
            print(n, file=stdout or sys.stdout)
        else:
            n = _write(ordered, fmt, output, stdout or sys.stdout)
    finally:
        if cached is not None:
            cached.unpersist()
    return {"events": n_events, "matches": n, "seconds": time.perf_counter() - started,
            "source": input_path, "files": len(files), "format": in_fmt,
            "plan": plan_query(compiled.analyzed).mode, "engine": engine,
            "output": output, "master": _master_of(session, master)}


def _master_of(session: Any, master: str | None) -> str | None:
    try:
        value = session.conf.get("spark.master", None)
    except Exception:  # noqa: BLE001 - Spark Connect may not expose it
        return master
    return str(value) if value is not None else master


def load_query(arg: str) -> tuple[str, str | None]:
    """QUERY is a query file (its stem names the query) or the query text, as in ``kleene run``
    (kept here so kleene.spark does not import the CLI package)."""
    if os.path.isfile(arg):
        try:
            return Path(arg).read_text(encoding="utf-8"), Path(arg).stem
        except (OSError, UnicodeDecodeError) as e:
            raise QueryError(f"cannot read query file {arg}: {e}") from None
    suffixes = (".kleene", ".cep", ".sase", ".query", ".txt", ".sql")
    if not any(ch.isspace() for ch in arg.strip()) and (arg.endswith(suffixes) or os.sep in arg):
        raise QueryError(f"query file {arg} not found (QUERY is a file path or the query text)")
    if not arg.strip():
        raise QueryError("the query is empty")
    return arg, None


def _parse_time_strings(df: Any, tcol: str) -> Any:
    """ISO-8601 text in the time column becomes a timestamp, zoned or naive by its first value,
    as in the embedded reader (the attribute then holds the parsed time too)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from .batch import _has_zone

    if not isinstance(df.schema[tcol].dataType, T.StringType):
        return df
    c = F.col(f"`{tcol}`")
    first = df.select(c).where(c.isNotNull()).limit(1).collect()
    zoned = bool(first) and _has_zone(str(first[0][0]))
    parsed = F.to_timestamp(F.trim(c)) if zoned else F.to_timestamp_ntz(F.trim(c))
    return df.withColumn(tcol, parsed)


def _write(ordered: Any, fmt: str, output: str | None, stdout: IO[str]) -> int:
    from pyspark.sql import functions as F

    body = ordered.drop(END_US, LAST_POS, SEQ)
    if fmt == "jsonl" and output is None:
        n = 0
        for row in body.toLocalIterator():
            stdout.write(row[0] + "\n")
            n += 1
        stdout.flush()
        return n
    assert output is not None
    if fmt == "csv":
        values = [c for c in body.columns if c not in ("query", "match", "start", "end")]
        body = body.select("query", "start", "end", F.to_json("match").alias("match"),
                           *[F.col(f"`{c}`") for c in values])
    single = fmt in ("jsonl", "csv") and not _is_remote(output)
    target = output
    tmp = None
    if single:
        tmp = tempfile.mkdtemp(prefix=".kleene-spark-",
                               dir=os.path.dirname(os.path.abspath(output)) or ".")
        target = os.path.join(tmp, "out")
    body = body.cache()
    n = int(body.count())
    writer = body.write.mode("overwrite")
    if fmt == "jsonl":
        writer.text(target)
    elif fmt == "csv":
        writer.option("header", True).csv(target)
    else:
        writer.parquet(target)
    body.unpersist()
    if single and tmp is not None:
        parts = sorted(Path(target).glob("part-*"))
        with open(output, "wb") as dst:
            if not parts and fmt == "csv":
                dst.write(b"query,start,end,match\n")
            for p in parts:
                with open(p, "rb") as srcf:
                    shutil.copyfileobj(srcf, dst)
        shutil.rmtree(tmp, ignore_errors=True)
    return n


__all__ = ["list_inputs", "load_query", "read_input", "run_query"]
