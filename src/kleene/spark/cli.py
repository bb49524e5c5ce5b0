"""``kleene run QUERY --input PATH --spark [--master URL]``: read, match and write with Spark.

The result equals the embedded CLI's: the same events (row index ids, the same column type
inference for CSV), the same matches, and for JSON Lines and CSV byte-for-byte the same file,
because every line is produced by the embedded writers' code in the task
(:func:`kleene.events.writers.match_line`, :class:`kleene.spark.tasks.CsvRows`) and the lines are
sorted into kleene's documented order before they are written. Parquet output keeps
:func:`kleene.spark.match`'s typed columns (``match`` as a map of variable to ids).

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
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import InputError, QueryError
from ..events.textcols import row_keys
from ..events.writers import CSV_FIXED_COLUMNS
from .batch import SET_POS
from .tasks import END_US, LAST_POS, SEQ

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
               column_types: Mapping[str, str] | None = None,
               cache: bool = False, null_values: Sequence[str] = ()) -> tuple[Any, int, Any]:
    """Read the files with Spark and add ``__kleene_row``: the 0-based input row index.
    Returns the DataFrame, the number of rows and the cached scan (``unpersist()`` it when
    done; ``None`` unless ``cache``).

    The index comes from the file scan: rows of one file split are contiguous in one task, so
    (file order, split start, ``monotonically_increasing_id``) orders them; a small job counts
    the rows of each split (a scan that parses no column) to turn that into a dense index.
    ``cache`` parses the input once into memory and disk for callers that read it several
    times (the time split's quantiles); ``KLEENE_SPARK_CACHE_INPUT=1`` / ``0`` overrides it.
    ``null_values``: text values made NULL in every text column before CSV columns are typed.
    """

    if fmt == "csv":
        delim = delimiter or ("\t" if any(".tsv" in f.lower() for f in files) else ",")
        df = (spark.read.option("header", True).option("inferSchema", False)
              .option("sep", delim).option("mode", "FAILFAST").option("encoding", "UTF-8")
              .csv(files))
        df = _type_csv_columns(_null_strings(df, null_values), column_types or {})
    elif fmt == "jsonl":
        df = _null_strings(spark.read.option("mode", "FAILFAST").json(files), null_values)
    elif fmt == "parquet":
        df = spark.read.parquet(*files)
    else:
        raise InputError(f"unknown input format {fmt!r}; use csv, jsonl or parquet")
    env = os.environ.get("KLEENE_SPARK_CACHE_INPUT")
    if env is not None:
        cache = env != "0"
    return _with_file_row_index(df, files, cache)


def _null_strings(df: Any, values: Sequence[str]) -> Any:
    """``values`` in the text columns of ``df`` made NULL (``--null-values``)."""
    if not values:
        return df
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    text = {f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType)}
    if not text:
        return df
    vals = list(values)
    return df.select(*[
        (F.when(F.col(f"`{n}`").isin(vals), F.lit(None)).otherwise(F.col(f"`{n}`")).alias(n)
         if n in text else F.col(f"`{n}`")) for n in df.columns])


def _type_csv_columns(df: Any, overrides: Mapping[str, str]) -> Any:
    """Type CSV text columns like the embedded reader: inferred from the first 65,536 rows
    (int64 / float64 / bool / string; a column with no value there: from its first 65,536
    values), ``column_types`` overriding."""
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
            head = sample.column(name).combine_chunks().cast(pa.string())
            if head.null_count == len(head) and len(head):  # empty at first: its first values
                later = df.select(F.col(f"`{name}`")).where(F.col(f"`{name}`").isNotNull()) \
                    .limit(65_536).toArrow()
                head = later.column(0).combine_chunks().cast(pa.string())
            t = infer_text_type(head)
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


def _with_file_row_index(df: Any, files: list[str], cache: bool) -> tuple[Any, int, Any]:
    from pyspark.sql import functions as F

    mid = "__kleene_mid"

    def located(*cols: str) -> Any:
        """``cols`` of the input with each row's file, split start and scan id."""
        return df.select(*cols, F.col(f"{_META}.file_path").alias("__f"),
                         F.col(f"{_META}.file_block_start").alias("__b"),
                         F.monotonically_increasing_id().alias(mid))

    cached = None
    if cache:
        from pyspark import StorageLevel

        counted = cached = located("*").persist(StorageLevel.MEMORY_AND_DISK)
    else:
        # no data column: the CSV / JSON parser converts nothing, Parquet reads no column
        counted = located()
    stats = (counted.groupBy("__f", "__b").agg(F.min(mid).alias("m"), F.count("*").alias("n"))
             .collect())
    rank = {_norm(f): i for i, f in enumerate(files)}
    stats.sort(key=lambda r: (rank.get(_norm(r["__f"]), len(rank)), r["__f"], r["__b"]))
    offset = 0
    rows = []
    for r in stats:
        rows.append((r["__f"], int(r["__b"]), offset - int(r["m"])))
        offset += int(r["n"])
    if not rows:
        raise InputError("no events: the input is empty", path=files[0])
    # the scan partition of a split is in the top bits of its ids; when every partition
    # holds one split, the partition alone gives the base (no per-row file path lookup)
    by_part = Counter(int(r["m"]) >> 33 for r in stats)
    if cached is None and all(n == 1 for n in by_part.values()) and len(by_part) <= 4096:
        bases = {int(r["m"]) >> 33: base for r, (_f, _b, base) in
                 zip(stats, rows, strict=True)}
        parts = max(bases) + 1
        arr = F.array(*[F.lit(bases.get(p, 0)).cast("long") for p in range(parts)])
        m = F.col(mid)
        row = m + F.element_at(arr, F.shiftright(m, 33).cast("int") + 1)
        return (df.withColumn(mid, F.monotonically_increasing_id()).withColumn(ROW, row)
                .drop(mid), offset, None)
    withm = cached if cached is not None else located("*")
    base = df.sparkSession.createDataFrame(rows, "__f string, __b long, __base long")
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
    from ..events.decisions import default_time_column

    found = default_time_column([c for c in df.columns if c != ROW])
    if found is None:
        raise InputError("no time column: pass --time-col; the columns are: "
                         f"{', '.join(c for c in df.columns if c != ROW)}")
    return found


def run_query(query: str | Sequence[tuple[str, str | None]], input_path: str, *, master: str | None = None,
              output: str | None = None, fmt: str = "jsonl", input_format: str | None = None,
              time_col: str | None = None, type_col: str | None = None,
              event_type: str | None = None, id_col: str | None = None,
              time_unit: str = "s", column_types: Mapping[str, str] | None = None,
              delimiter: str | None = None, dialect: str | None = None,
              udfs: Mapping[str, Callable[..., Any]] | None = None,
              engine: str = "automaton", count_only: bool = False,
              partitions: int | None = None, stdout: IO[str] | None = None,
              spark: Any = None, time_format: str | None = None,
              reader: str = "auto", on_bad_row: str = "fail", caps: Mapping[str, Any] | None = None,
              cap_report: Any = None, epoch_times: bool = False,
              null_values: str | Sequence[str] | None = None, verbose: bool = False,
              warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run a query (text or a query file) over files with Spark; write matches. A query set
    is a list of (text, default name): one job (:func:`kleene.spark.batch.match_set`).

    ``epoch_times`` (the CLI's explicit ``--time-unit``): numeric times are epoch times, and
    ``start``/``end`` are written as UTC times, as the embedded CLI writes them.

    ``output=None`` writes JSON Lines to ``stdout``; a path gets one file for ``jsonl`` and
    ``csv`` on a local file system (the single part file Spark wrote is moved there), else a
    Spark output directory. Returns a summary: events, matches, seconds, plan mode, output.

    ``reader``: ``arrow`` reads CSV files with kleene's own reader in Spark tasks
    (:mod:`kleene.spark.scan`: the embedded CLI's parsing, faster than the JVM's), ``spark``
    with Spark's CSV source; ``auto`` (default) takes ``arrow`` for CSV files on a local or
    shared file system and ``spark`` otherwise (JSON Lines, Parquet, remote URLs).
    ``time_format`` (a strptime format for text times) and ``on_bad_row="skip"`` (rows that are
    not events are skipped and counted: ``skipped`` and ``bad_examples`` in the summary) need
    the ``arrow`` reader; ``on_bad_row="dead-letter=PATH"`` is not supported on Spark.
    ``null_values`` (``"nil,NA,"`` or a list): text values read as NULL in every column.

    Before Spark starts, the options are checked and the query is checked against the first
    rows of a local input (read with the embedded reader, :func:`check_first_rows`): an
    unknown column is an error at once, an event type not among the first rows' types a
    warning (``warn``, default: a line on stderr). ``verbose``: Spark's own log lines are shown
    (by default a session started here sends them to a temporary file).
    """
    from ..api import compile as compile_query
    from .batch import match, match_set, order_columns_of
    from .plan import plan_query
    from .session import task_errors

    started = time.perf_counter()
    qset: Any = None
    if isinstance(query, str):
        text, default_name = load_query(query)
        compiled: Any = compile_query(text, dialect=dialect, udfs=dict(udfs or {}),
                                      name=default_name)
        analyzed = [compiled.analyzed]
    else:  # a query set: (text, default name) per query, one job (kleene.spark.match_set)
        from ..queryset import compile_many

        qset = compile_many([t for t, _n in query], names=[n for _t, n in query],
                            dialect=dialect, udfs=dict(udfs or {}))
        if cap_report is not None:
            raise InputError("--on-cap truncate for a query set on Spark is not supported; "
                             "use --on-cap error (and raise the caps if needed)")
        analyzed = [c.analyzed for c in qset.queries]
    fmt = fmt.lower()
    if fmt not in ("jsonl", "csv", "parquet"):
        raise InputError(f"unknown output format {fmt!r}; use jsonl, csv or parquet")
    if fmt == "parquet" and output is None:
        raise InputError("Parquet output needs a path: pass --output PATH")
    from ..events.options import null_values as parse_nulls

    nulls = parse_nulls(null_values)
    files = list_inputs(input_path)
    in_fmt = _format_of(files, input_format)
    # everything that needs no Spark is checked before the session starts (seconds)
    _check_options(reader, in_fmt, files, on_bad_row, time_format)
    if not _on_connect(spark, master):
        from ..events.readers import ReadOptions

        first_rows = ReadOptions(time_col=time_col, type_col=type_col, event_type=event_type,
                                 id_col=id_col, time_unit=time_unit,  # type: ignore[arg-type]
                                 time_format=time_format,
                                 column_types=dict(column_types or {}), delimiter=delimiter,
                                 format=in_fmt, on_bad_row="skip", null_values=nulls)
        for aq in analyzed:
            check_first_rows(aq, files, first_rows, warn=warn,
                             strict=in_fmt == "csv" and reader != "spark",
                             query_types=qset.names if qset is not None else ())
    session = spark if spark is not None else _cli_session(master, verbose=verbose)
    modes: list[str] = [plan_query(a).mode for a in analyzed]
    if qset is not None:  # a nested group runs in one task (kleene.spark.nested)
        from .nested import nested_groups

        for group in nested_groups(qset):
            for place in group:
                modes[place] = "nested"
    mode = modes[0] if qset is None else f"query set of {len(modes)} ({', '.join(modes)})"
    use_arrow = _use_arrow_reader(reader, in_fmt, files, session)
    if time_format is not None and not use_arrow:
        raise InputError("--time-format needs kleene's CSV reader in the Spark tasks (CSV files "
                         "on a local or shared file system, --spark-reader arrow); write "
                         "ISO-8601 times for Spark's reader")
    skipped = _skip_report(on_bad_row, use_arrow, session)
    with task_errors():
        if use_arrow:
            from ..events.readers import ReadOptions

            options = ReadOptions(time_col=time_col, type_col=type_col, event_type=event_type,
                                  id_col=id_col, time_unit=time_unit,  # type: ignore[arg-type]
                                  time_format=time_format, column_types=dict(column_types or {}),
                                  delimiter=delimiter, format="csv",
                                  on_bad_row="skip" if skipped is not None else "fail",
                                  null_values=nulls)
            df, n_events, cached = _read_with_kleene(session, files, options, analyzed,
                                                     engine, skipped)
        else:
            # only the time split reads the input more than once (its quantiles)
            df, n_events, cached = read_input(session, files, in_fmt, delimiter=delimiter,
                                              column_types=column_types,
                                              cache="split" in modes,
                                              null_values=nulls)
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
        out_mode: Any = {"jsonl": "json", "csv": "csv"}.get(fmt, "map")
        common: dict[str, Any] = dict(
            time_col=tcol, type_col=type_col, event_type=event_type, id_col=id_col,
            time_unit=time_unit, engine=engine, output=out_mode, partitions=partitions,
            row_index_col=ROW, epoch_times=epoch_times, **(caps or {}))
        if qset is None:
            matches = match(df, analyzed[0], cap_report=cap_report, **common)
        else:
            matches = match_set(df, qset, **common)
        ordered = matches.repartition(1).sortWithinPartitions(*order_columns_of(matches))
        n_timeouts = None
        if any(a.query.timeouts for a in analyzed):  # EMIT TIMEOUTS: counted apart
            from pyspark.sql import functions as F

            from .tasks import TIMEOUT_POS

            n_timeouts = matches.filter(F.col(LAST_POS) >= F.lit(TIMEOUT_POS)).count()
        try:
            if count_only:
                n = matches.count() - (n_timeouts or 0)
                print(n, file=stdout or sys.stdout)
            else:
                fields = list(dict.fromkeys(f for a in analyzed for f in a.output_fields()))
                n = _write(ordered, fmt, output, stdout or sys.stdout,
                           fields) - (n_timeouts or 0)
        finally:
            if cached is not None:
                cached.unpersist()
    per_file = dict(skipped.value) if skipped is not None else {}
    bad = sum(n for n, _ in per_file.values())
    examples = [e for i in sorted(per_file) for e in per_file[i][1]][:3]
    return {"events": n_events - bad, "rows_read": n_events, "skipped": bad,
            "bad_examples": examples, "matches": n, "seconds": time.perf_counter() - started,
            "timeouts": n_timeouts,
            "source": input_path, "files": len(files), "format": in_fmt,
            "plan": mode, "engine": engine,
            "output": output, "master": _master_of(session, master),
            "truncated_runs": cap_report.truncated_runs if cap_report is not None else 0,
            "truncated_matches": cap_report.truncated_matches if cap_report is not None else 0}


def _on_connect(spark: Any, master: str | None) -> bool:
    """Whether the run goes to Spark Connect (input paths are then the server's)."""
    if spark is not None:
        return type(spark).__module__.startswith("pyspark.sql.connect")
    if master is not None:
        return master.startswith("sc://")
    return "SPARK_REMOTE" in os.environ


def _check_options(reader: str, fmt: str, files: list[str], on_bad_row: str,
                   time_format: str | None) -> None:
    """The option checks that need no Spark session (run before one starts)."""
    if reader not in ("auto", "arrow", "spark"):
        raise InputError(f"unknown reader {reader!r}; use auto, arrow or spark")
    local = not any(_is_remote(f) for f in files)
    if reader == "arrow" and (fmt != "csv" or not local):
        raise InputError("the arrow reader reads CSV files on a local or shared file system; "
                         f"this input is {fmt}{'' if local else ' at a remote URL'}: use the "
                         "spark reader")
    policy = on_bad_row.strip()
    if policy not in ("fail", "skip"):
        raise InputError(f"--on-bad-row {policy} is not supported with --spark (tasks on other "
                         "machines cannot share one dead-letter file); use fail or skip")
    if (policy == "skip" or time_format is not None) and (fmt != "csv" or not local
                                                          or reader == "spark"):
        what = "--on-bad-row skip" if policy == "skip" else "--time-format"
        raise InputError(f"{what} needs kleene's CSV reader in the Spark tasks (CSV files "
                         "on a local or shared file system, --spark-reader arrow)")


def check_first_rows(analyzed: Any, files: list[str], options: Any, *,
                     warn: Callable[[str], None] | None = None, strict: bool = True,
                     query_types: Sequence[str] = ()) -> None:
    """Check ``analyzed`` against the first rows of a local input, read on the driver with the
    embedded reader (its first 256 KB): an unknown attribute, PARTITION BY column or (with
    ``event_type``) event type raises :class:`~kleene.errors.QueryValidationError` with a
    did-you-mean; an event type not among the first rows' types is a warning. ``strict``: an
    input error of those rows (no time column, say) is raised too, since kleene's reader in the
    tasks would raise it later; otherwise the Spark read reports its own."""
    from dataclasses import replace

    from ..errors import KleeneError
    from ..events.readers import iter_events
    from ..semantic.schema import InputSchema, check_against

    if not files or any(_is_remote(f) for f in files):
        return
    look = replace(options, batch_size=4_096, block_bytes=1 << 18)
    try:
        with iter_events(files[0], look, sort_chunks=False) as stream:
            first = next(stream, None)
    except KleeneError:
        if strict:
            raise
        return
    if first is None or not len(first):
        return
    schema = InputSchema.of(first, types_complete=options.event_type is not None,
                            source=files[0] if len(files) == 1 else f"{files[0]} (first file)")
    if query_types and schema.types is not None:  # nested queries: names are types too
        schema = InputSchema(schema.columns, schema.types | set(query_types),
                             schema.types_complete, schema.source)
    for message in check_against(analyzed, schema):
        (warn or _stderr_warning)(message)


def _stderr_warning(message: str) -> None:
    print(f"kleene: warning: {message}", file=sys.stderr)


SPARK_LOG = "kleene-spark.log"
"""The file (in the temporary directory) that Spark's own log lines go to, unless verbose."""


def _cli_session(master: str | None, *, verbose: bool = False) -> Any:
    """The CLI's session: Spark's own log lines off below FATAL (a task's kleene error is
    reported once, as kleene's message; any other failure still raises with Spark's text;
    ``KLEENE_SPARK_LOG_LEVEL`` sets another level), and Spark's stage progress bar only when
    stderr is a terminal (it would fill a redirected log).

    Unless ``verbose``, the JVM's start-up lines (log4j's WARN lines, the JDK's notes) go to
    :data:`SPARK_LOG` in the temporary directory instead of stderr: a JVM started here gets
    that file as its stderr."""
    from .session import get_session

    tty = sys.stderr.isatty()
    conf = None if tty else {"spark.ui.showConsoleProgress": "false"}
    if not verbose:
        _quiet_gateway(master, conf)
    session = get_session(master, conf=conf)
    try:
        level = "WARN" if verbose else "FATAL"
        session.sparkContext.setLogLevel(os.environ.get("KLEENE_SPARK_LOG_LEVEL", level))
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        pass
    return session


def _quiet_gateway(master: str | None, conf: Mapping[str, str] | None) -> str | None:
    """Start PySpark's JVM gateway with its stderr in :data:`SPARK_LOG` (returns the path),
    unless a JVM is already running, the session is Spark Connect's or ``spark-submit``
    started this process (then nothing is done: ``None``)."""
    if master is not None and master.startswith("sc://"):
        return None
    if "SPARK_REMOTE" in os.environ or "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return None
    spark_conf = SparkConf(loadDefaults=False)
    for k, v in (conf or {}).items():
        spark_conf.set(k, v)
    path = os.path.join(tempfile.gettempdir(), SPARK_LOG)
    log = open(path, "ab")  # noqa: SIM115 - the JVM writes to it for its whole life
    try:
        SparkContext._gateway = launch_gateway(  # type: ignore[no-untyped-call]
            spark_conf, popen_kwargs={"stderr": log})
        SparkContext._jvm = SparkContext._gateway.jvm
    finally:
        log.close()  # the JVM has its own descriptor
    return path


def _read_with_kleene(session: Any, files: list[str], options: Any, analyzed: list[Any],
                      engine: str, skipped: Any) -> tuple[Any, int, None]:
    """:func:`kleene.spark.scan.read_csv` with only the columns the queries read (every
    column for a custom evaluator), shaped like :func:`read_input`'s result (nothing
    cached)."""
    from .batch import referenced_attributes
    from .scan import read_csv

    attributes = sorted({a for q in analyzed for a in referenced_attributes(q)}) \
        if ":" not in engine else None
    df, n_events, _blank = read_csv(session, files, options, attributes=attributes,
                                    row_col=ROW, skipped=skipped)
    return df, n_events, None


def _skip_report(on_bad_row: str, use_arrow: bool, session: Any) -> Any:
    """The accumulator that counts skipped rows per file (``on_bad_row="skip"``), else None
    (the policy itself was checked by :func:`_check_options`)."""
    policy = on_bad_row.strip()
    if policy != "skip":
        return None
    if not use_arrow:
        raise InputError("--on-bad-row skip needs kleene's CSV reader in the Spark tasks (CSV "
                         "files on a local or shared file system, --spark-reader arrow)")
    from .batch import _spark_context
    from .tasks import ByKey

    sc = _spark_context(session)
    if sc is None:
        raise InputError("--on-bad-row skip reports the skipped rows through a Spark "
                         "accumulator, which Spark Connect does not have; use fail")
    return sc.accumulator({}, ByKey())


def _use_arrow_reader(reader: str, fmt: str, files: list[str], session: Any) -> bool:
    """kleene's reader in the tasks (``arrow``) or Spark's source: ``auto`` takes ``arrow``
    for CSV files on a local or shared file system, except on Spark Connect, where paths are
    the server's and this process may not see the same files, and except on a cluster (a
    master that is not ``local``) when a file is uncompressed and larger than
    ``spark.sql.files.maxPartitionBytes``: Spark splits such a file over several tasks, while
    kleene's reader reads a file in one task (on one machine it is still the faster: a 276 MB
    file read in one task beat Spark's three splits on local[2], docs/spark.md)."""
    if reader not in ("auto", "arrow", "spark"):
        raise InputError(f"unknown reader {reader!r}; use auto, arrow or spark")
    if reader == "auto" and type(session).__module__.startswith("pyspark.sql.connect"):
        return False
    local = not any(_is_remote(f) for f in files)
    if reader == "arrow" and (fmt != "csv" or not local):
        raise InputError("the arrow reader reads CSV files on a local or shared file system; "
                         f"this input is {fmt}{'' if local else ' at a remote URL'}: use the "
                         "spark reader")
    if reader == "arrow":
        return True
    if reader == "spark" or fmt != "csv" or not local:
        return False
    return not (_on_a_cluster(session) and any(_splittable_and_big(f, session) for f in files))


def _on_a_cluster(session: Any) -> bool:
    try:
        return not str(session.conf.get("spark.master", "local")).startswith("local")
    except Exception:  # noqa: BLE001 - a conf lookup must not fail the run
        return False


def _splittable_and_big(path: str, session: Any) -> bool:
    from ..events.readers import detect_format

    name = path.lower()
    if detect_format(path) != "csv" or name.endswith((".gz", ".bz2", ".zst", ".lz4")):
        return False
    try:
        limit = int(str(session.conf.get("spark.sql.files.maxPartitionBytes", "134217728"))
                    .removesuffix("b"))
    except Exception:  # noqa: BLE001 - "128m" and the like: take Spark's default
        limit = 128 << 20
    try:
        return os.path.getsize(path) > limit
    except OSError:
        return False


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


def _csv_line(cells: Sequence[str]) -> str:
    """One CSV line as the embedded writer's ``csv`` module writes it (quoted where needed)."""
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()[:-1]


def _write(ordered: Any, fmt: str, output: str | None, stdout: IO[str],
           fields: Sequence[str] = ()) -> int:
    """JSON Lines and CSV: the lines the tasks formatted with the embedded writers' code, in
    output order (CSV: the header of the first match first, the fixed columns and ``fields``,
    the RETURN fields, without a match, as the embedded writer does); Parquet: the typed
    columns of :func:`kleene.spark.match`."""
    body = ordered.drop(END_US, LAST_POS, SEQ, SET_POS)
    text = fmt in ("jsonl", "csv")
    if output is None and not text:
        raise InputError(f"{fmt} output needs a path: pass --output PATH")
    if output is not None and "://" not in output:
        # Spark resolves a relative path against its JVM's directory, which need not be this
        # process's (a session started elsewhere): the path the caller means is this one's
        output = os.path.abspath(output)
    single = text and (output is None or not _is_remote(output))
    cached = body = body.cache()  # one partition in output order: counted, header, written
    try:
        n = int(body.count())
        header = None
        if fmt == "csv":
            first = body.select("header").limit(1).collect()
            header = first[0][0] if first else _csv_line(
                [*CSV_FIXED_COLUMNS, *row_keys(tuple(fields))])
            body = body.select("record")
        if output is None:
            if header is not None:
                stdout.write(header + "\n")
            for row in body.toLocalIterator():
                stdout.write(row[0] + "\n")
            stdout.flush()
            return n
        if not single:
            if header is not None:  # a directory of part files: the header is the first line
                body = body.sparkSession.createDataFrame([(header,)], "record string") \
                    .union(body).coalesce(1)
            writer = body.write.mode("overwrite")
            if text:
                writer.text(output)
            else:
                writer.parquet(output)
            return n
        tmp = tempfile.mkdtemp(prefix=".kleene-spark-",
                               dir=os.path.dirname(os.path.abspath(output)) or ".")
        try:
            target = os.path.join(tmp, "out")
            body.write.mode("overwrite").text(target)
            with open(output, "wb") as dst:
                if header is not None:
                    dst.write(header.encode("utf-8") + b"\n")
                for p in sorted(Path(target).glob("part-*")):
                    with open(p, "rb") as srcf:
                        shutil.copyfileobj(srcf, dst)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return n
    finally:
        cached.unpersist()


__all__ = ["list_inputs", "load_query", "read_input", "run_query"]
