"""The ``kleene`` command: a lens on the pipeline (``check`` the query, ``explain`` the plan,
``run`` it over events).

Exit codes: 0 ok, 1 query or usage error (the query, or the command line: an unknown option, a
bad option value or combination), 2 input error (the events: file, row, column), 3 runtime error.
User errors print one clear message on stderr, never a traceback; an unexpected exception is a
bug and prints its traceback (exit 3).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

# One BLAS thread for the command line unless the user chose (before numpy is first imported:
# ``import kleene`` imports no numpy). numpy's OpenBLAS starts a thread per core as it loads,
# which cost ~0.07 s of every run's start-up here (0.13 against 0.07 CPU s for ``import
# numpy``, docs/benchmarks.md, session 12); kleene calls no BLAS, and its parallelism is
# worker processes. A --udf that wants BLAS threads: set OPENBLAS_NUM_THREADS.
if "numpy" not in sys.modules and not any(
        v in os.environ for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

import click  # noqa: E402 - after the BLAS threads are set

from .. import __version__
from ..errors import EngineError, InputError, KleeneError, MissingExtraError, QueryError
from ..frozen import dataclass
from ..udf import pure_udfs, udf, vectorized_udfs

EXIT_OK = 0
EXIT_QUERY = 1
EXIT_USAGE = EXIT_QUERY
"""A command-line usage error (click's own, or options that do not go together) shares the
query-error code, so exit 2 always means the events are wrong."""
EXIT_INPUT = 2
EXIT_RUNTIME = 3

ORACLE_WARN_EVENTS = 1_000
SPARK_SMALL_EVENTS = 1_000_000
"""Below this many events ``run --spark`` notes that the embedded engine is faster (measured
on Aarhus traffic slices, embedded against --spark wall time: docs/spark.md)."""
QUERY_SUFFIXES = (".kleene", ".cep", ".sase", ".query", ".txt", ".sql")

F = TypeVar("F", bound=Callable[..., Any])


class UsageError(KleeneError, ValueError):
    """The command line is wrong: options that do not go together, or a malformed option
    value (exit 1, like a query error; click's own usage errors exit 1 too)."""


def _fail(message: str, code: int) -> None:
    click.echo(f"kleene: {message}", err=True)
    sys.exit(code)


def _guard(fn: F) -> F:
    """Map kleene errors to exit codes with a one-message report (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except QueryError as e:
            _fail(f"query error: {e}", EXIT_QUERY)
        except UsageError as e:
            _fail(f"usage error: {e}", EXIT_USAGE)
        except InputError as e:
            _fail(f"input error: {e}", EXIT_INPUT)
        except MissingExtraError as e:
            _fail(str(e), EXIT_RUNTIME)
        except (EngineError, KleeneError) as e:
            _fail(f"runtime error: {e}", EXIT_RUNTIME)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except BrokenPipeError:
            sys.stderr.close()  # e.g. `kleene run ... | head`: not an error
            sys.exit(EXIT_OK)
        except Exception:  # a bug: show where, but keep the documented exit code
            traceback.print_exc()
            _fail("internal error (the traceback above is a bug in kleene; please report it)",
                  EXIT_RUNTIME)

    return wrapper  # type: ignore[return-value]


def _without_cyclic_gc(fn: F) -> F:
    """Run with the cyclic garbage collector paused (reference counting still frees
    everything): a run allocates millions of small acyclic objects (records, runs, matches),
    and the collector's repeated scans over them cost ~10 % of a run. Restored afterwards."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return wrapper  # type: ignore[return-value]


PARTIAL_SUFFIX = ".partial"


@contextlib.contextmanager
def output_target(output: str | None, *, keep_partial: bool = False) -> Iterator[str | None]:
    """Where a run writes its matches, so that a killed or failed run never leaves a file that
    looks complete: a regular output file is written as ``PATH.partial`` in the same folder
    and renamed to PATH only when the run succeeds. On failure the partial file is removed, or
    kept under its ``.partial`` name (``keep_partial``: a streaming run's matches so far).
    Standard output, devices and pipes are written directly. Failures to write (disk full,
    I/O error, permission) are input errors naming the path."""
    if output is None or output == "-":
        yield None
        return
    direct = os.path.exists(output) and not os.path.isfile(output)
    target = output if direct else output + PARTIAL_SUFFIX
    try:
        yield target
        if not direct and os.path.exists(target):
            os.replace(target, output)
    except OSError as e:
        if not direct and not keep_partial:
            _discard(target)
        raise InputError(f"cannot write matches to {output}: {e.strerror or e}") from None
    except InputError as e:
        if not direct and not keep_partial:
            _discard(target)
        if e.path == target:  # a writer's error names the file the user asked for
            raise InputError(e.reason, path=output, row=e.row, column=e.column) from None
        raise
    except BaseException:
        if not direct and not keep_partial:
            _discard(target)
        raise


def _discard(target: str) -> None:
    """Remove a partial output: a file, or the folder Spark writes Parquet into."""
    with contextlib.suppress(OSError):
        if os.path.isdir(target) and not os.path.islink(target):
            import shutil

            shutil.rmtree(target)
        else:
            os.remove(target)


@dataclass(frozen=True, slots=True)
class QuerySource:
    """Query text and the name to use when the query has no NAME clause."""

    text: str
    default_name: str | None
    path: str | None


def load_query(arg: str) -> QuerySource:
    """QUERY is a file path (read it; the file stem names the query) or the query text."""
    if os.path.isfile(arg):
        try:  # utf-8-sig: a byte-order mark (as some Windows editors write) is not the query
            text = Path(arg).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            raise QueryError(f"cannot read query file {arg}: {e}") from None
        return QuerySource(text, Path(arg).stem, arg)
    arg = arg.removeprefix("\ufeff")
    looks_like_path = (not any(ch.isspace() for ch in arg.strip())
                       and (arg.endswith(QUERY_SUFFIXES) or os.sep in arg))
    if looks_like_path:
        raise QueryError(f"query file {arg} not found (QUERY is a file path or the query text)")
    if not arg.strip():
        raise QueryError("the query is empty")
    return QuerySource(arg, None, None)


QUERY_SEPARATOR = ";"
"""A line holding only this separates queries in one file (docs/language.md, "Query sets")."""


def split_queries(text: str) -> list[str]:
    """The queries of a text: the parts between lines that hold only ``;`` (blank parts and
    parts holding only comments are ignored)."""
    parts: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line.strip() == QUERY_SEPARATOR:
            parts.append([])
        else:
            parts[-1].append(line)
    out = []
    for p in parts:
        body = "".join(p)
        if any(ln.strip() and not ln.strip().startswith("--") for ln in body.splitlines()):
            out.append(body)
    return out


def load_queries(args: Sequence[str]) -> list[QuerySource]:
    """QUERY arguments -> queries: a file (several queries separated by a ``;`` line; the file
    stem names them, ``stem_1``, ``stem_2``, ... when there are several), a directory (its
    ``*.kleene`` files, sorted), or query text."""
    out: list[QuerySource] = []
    for arg in args:
        if os.path.isdir(arg):
            files = sorted(Path(arg).glob("*.kleene"))
            if not files:
                raise QueryError(f"query directory {arg} has no *.kleene files")
            for f in files:
                out += load_queries([str(f)])
            continue
        src = load_query(arg)
        parts = split_queries(src.text)
        if not parts:
            raise QueryError(f"{src.path or 'the query'} holds no query")
        if len(parts) == 1:
            out.append(QuerySource(parts[0], src.default_name, src.path))
            continue
        stem = src.default_name or "query"
        out += [QuerySource(t, f"{stem}_{i}", src.path) for i, t in enumerate(parts, 1)]
    return out


def load_udfs(specs: Sequence[str]) -> dict[str, Callable[..., Any]]:
    """``module:function`` or ``name=module:function`` -> {name: callable}; a ``:pure``
    suffix memoizes the function, ``:vectorized`` calls it on arrays, ``:releases-gil`` /
    ``:holds-gil`` declare how the task engine runs it on several cores (kleene.udf)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # so a module next to the query can be named
    udfs: dict[str, Callable[..., Any]] = {}
    for spec in specs:
        name, eq, target = spec.partition("=")
        if not eq:
            name, target = "", spec
        module, colon, func = target.partition(":")
        func, _, rest = func.partition(":")
        flags = rest.split(":") if rest else []
        for flag in flags:
            if flag not in ("pure", "vectorized", "releases-gil", "holds-gil"):
                raise QueryError(f"--udf {spec!r}: unknown flag {flag!r} (the flags are :pure, "
                                 ":vectorized, :releases-gil and :holds-gil)")
        if not colon or not module or not func:
            raise QueryError(f"--udf {spec!r}: expected module:function or name=module:function")
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            raise QueryError(f"--udf {spec!r}: cannot import module {module!r}: {e}") from None
        except Exception as e:  # the user's module failed while importing
            raise QueryError(f"--udf {spec!r}: importing module {module!r} failed: "
                             f"{type(e).__name__}: {e}") from None
        fn = getattr(mod, func, None)
        if not callable(fn):
            raise QueryError(f"--udf {spec!r}: module {module!r} has no function {func!r}")
        gil = (True if "releases-gil" in flags else False if "holds-gil" in flags else None)
        if "releases-gil" in flags and "holds-gil" in flags:
            raise QueryError(f"--udf {spec!r}: :releases-gil and :holds-gil contradict")
        try:
            udfs[name or func] = udf(fn, pure="pure" in flags, vectorized="vectorized" in flags,
                                     releases_gil=gil)
        except ValueError as e:
            raise QueryError(f"--udf {spec!r}: {e}") from None
    return udfs


def _backend(engine: str) -> Any:
    """The registry entry of an embedded engine named on the command line."""
    from ..backends import BACKENDS

    if engine not in BACKENDS:
        usable = sorted(n for n, b in BACKENDS.items() if b.embedded)
        raise QueryError(f"unknown engine {engine!r}; available: {', '.join(usable)} (and "
                         "--spark for the Spark pipeline)")
    return BACKENDS[engine]


def _compile(query: str, dialect: str | None, udfs: Sequence[str], engine: str,
             plan: str | None = None, timeouts: bool = False) -> Any:
    from ..api import compile as compile_query
    from ..api import parse

    _backend(engine)
    src = load_query(query)
    text: Any = src.text
    if timeouts:  # --timeouts PATH: the query emits its timed-out partial matches
        from dataclasses import replace

        text = replace(parse(src.text, dialect=dialect), timeouts=True)
    return compile_query(text, dialect=None if timeouts else dialect, udfs=load_udfs(udfs),
                         engine=engine, name=src.default_name, plan=plan)


class Timeouts:
    """Timed-out partial matches of a run (EMIT TIMEOUTS): split from the matches and written
    to ``--timeouts PATH`` as JSON Lines, or left in the JSON Lines output (with their
    ``"expired"`` field) when no path is given; counted for the summary."""

    def __init__(self, compiled: Any, path: str | None, fmt: str) -> None:
        analyzed = getattr(compiled, "analyzed", None)
        self.on = analyzed is not None and analyzed.query.timeouts
        self.path = path
        self.count = 0
        self.file: Any = None
        if self.on and path is None and fmt != "jsonl":
            raise UsageError(f"the query emits timed-out partial matches (EMIT TIMEOUTS): "
                             f"write them with --timeouts PATH, or use JSON Lines output, "
                             f"not {fmt}")

    def split(self, found: Any, time: Any) -> Any:
        """The matches of ``found``; its timeouts are counted (and written to the path)."""
        if not self.on:
            return found
        if isinstance(found, _Count):  # --count: the matches are counted, not built
            self.split(found.timeouts, time)
            return found
        outs = [m for m in found if m.expired is not None]
        self.count += len(outs)
        if self.path is None or not outs:
            return found if self.path is None else [m for m in found if m.expired is None]
        if self.file is None:
            try:
                self.file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                raise InputError(f"cannot write timed-out partial matches: "
                                 f"{e.strerror or e}", path=self.path) from None
        from ..events.writers import match_line

        self.file.write("".join(match_line(m, time) + "\n" for m in outs))
        return [m for m in found if m.expired is None]

    def close(self) -> None:
        """Close the file (creating it, empty, when nothing timed out)."""
        if self.on and self.path is not None:
            if self.file is None:
                try:
                    open(self.path, "w", encoding="utf-8").close()
                except OSError as e:
                    raise InputError(f"cannot write timed-out partial matches: "
                                     f"{e.strerror or e}", path=self.path) from None
            else:
                self.file.close()

    def writer(self, w: Any) -> Any:
        """``w``, told that it may receive timed-out partial matches."""
        if self.on and self.path is None:
            w.timeouts = True
        return w


def _peak_memory_mb() -> float:
    """Peak resident memory of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return 0.0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


OUTPUT_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
                   ".parquet": "parquet", ".pq": "parquet"}
"""The output format an ``--output`` file name selects (a name without a suffix: JSON Lines)."""


def _format_from_output(output: str | None) -> str:
    """The output format ``--output``'s name selects. An unknown suffix (``out.xlsx``) is a
    usage error rather than JSON Lines under a misleading name."""
    if not output or output == "-":
        return "jsonl"
    suffix = Path(output).suffix.lower()
    if not suffix:
        return "jsonl"
    if suffix not in OUTPUT_SUFFIXES:
        known = ", ".join(OUTPUT_SUFFIXES)
        raise UsageError(f"--output {output}: kleene cannot write {suffix} files; name the "
                         f"file {known}, or pass --format jsonl|csv|parquet")
    return OUTPUT_SUFFIXES[suffix]


def _refuse_overwriting_input(input_path: str, targets: dict[str, str | None]) -> None:
    """``--output`` (or a dead-letter file) naming an input file would destroy the input
    before it is read: refuse it."""
    if input_path == "-":
        return
    from ..events.sources import list_files

    try:
        inputs = {os.path.realpath(f) for f in list_files(input_path)}
    except InputError:
        return  # reported by the reader, with its own message
    for option, path in targets.items():
        if path and path != "-" and os.path.realpath(path) in inputs:
            raise UsageError(f"{option} {path} is an input file; writing it would overwrite "
                             "the events being read. Choose another path")


def _output_time(time: Any, explicit_unit: bool) -> Any:
    """How ``start``/``end`` are written: epoch numbers read with an explicit ``--time-unit``
    are times, so they print as UTC ISO-8601 like any other time; without it a numeric time
    column prints as read (it may be a sequence number, not a time)."""
    from ..events import TimeInfo

    if explicit_unit and time.kind == "numeric":
        return TimeInfo("datetime", time.unit, "UTC")
    return time


def _percent(stream: Any) -> str:
    frac = stream.fraction_read
    if frac is None:
        return ""
    filled = int(frac * 20)
    return f"[{'#' * filled}{'.' * (20 - filled)}] {frac:4.0%}  "


class _Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.perf_counter()
        self._last = 0.0

    def show(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if force or now - self._last > 0.2:
            self._last = now
            click.echo(f"\r\x1b[2K{text}  [{now - self.start:.1f} s]", err=True, nl=False)

    def clear(self) -> None:
        if self.enabled:
            click.echo("\r\x1b[2K", err=True, nl=False)


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


def protect_query(cmd: click.Command, args: list[str]) -> list[str]:
    r"""The arguments of ``cmd`` with a QUERY that starts with ``-`` (a ``-- comment`` line
    first) moved behind ``--``, so click takes it for the query, not for an option.

    A token is the query when it starts with ``-``, holds white space (no option name does)
    and is neither the value of the option before it nor ``--option=value``.

    Example:
        >>> protect_query(check, ["-- find pairs\nPATTERN SEQ(A a, B b)", "--dialect", "sase"])
        ['--dialect', 'sase', '--', '-- find pairs\nPATTERN SEQ(A a, B b)']
    """
    if "--" in args:
        return args
    names: set[str] = set()
    takes_value: set[str] = set()
    for p in cmd.params:
        if isinstance(p, click.Option):
            names.update(p.opts, p.secondary_opts)
            if not p.is_flag and not p.count:
                takes_value.update(p.opts)
    i = 0
    while i < len(args):
        a = args[i]
        if a in takes_value:
            i += 2
            continue
        if (a.startswith("-") and any(ch.isspace() for ch in a)
                and a.partition("=")[0] not in names):
            return [*args[:i], *args[i + 1:], "--", a]
        i += 1
    return args


class _Command(click.Command):
    """A subcommand whose QUERY may start with ``--`` (see :func:`protect_query`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, protect_query(self, args))

    def make_parser(self, ctx: click.Context) -> Any:
        """click's parser, which takes a short option given alone (``-i``) straight to its
        short-option matcher. click tries it as a long option first and only then as a short
        one: the same result, but by raising and catching a NoSuchOption, whose constructor
        imports difflib and ranks close matches (a few ms of every ``kleene run -i ...``)."""
        parser = super().make_parser(ctx)
        short = getattr(parser, "_short_opt", None)
        long = getattr(parser, "_long_opt", None)
        process = getattr(parser, "_process_opts", None)
        match_short = getattr(parser, "_match_short_opt", None)
        if (isinstance(short, dict) and isinstance(long, dict) and process is not None
                and match_short is not None and ctx.token_normalize_func is None):
            def process_opts(arg: str, state: Any) -> None:
                if arg in short and arg not in long:
                    match_short(arg, state)  # where click's long-option attempt ends up
                else:
                    process(arg, state)

            parser._process_opts = process_opts  # type: ignore[method-assign]
        return parser


class _Group(click.Group):
    """The ``kleene`` group: click's usage errors (unknown option, bad value, missing
    argument) exit :data:`EXIT_USAGE`, not click's 2, which is kleene's input-error code."""

    command_class = _Command

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            setattr(e, "exit_code", EXIT_USAGE)  # noqa: B010 (a ClassVar to click's typing)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            setattr(e, "exit_code", EXIT_USAGE)  # noqa: B010 (a ClassVar to click's typing)
            raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kleene")
def cli() -> None:
    """kleene: complex event processing. Check a query, explain its plan, or run it over events.

    QUERY is a file (its name names the query unless it has a NAME clause) or the query text.
    """


_dialect = click.option("--dialect", default=None, metavar="D",
                        help="Surface syntax of the query (default: the canonical language).")

_tree = click.option(
    "--tree", "tree", default=None, metavar="SHAPE",
    help="The tree plan's shape: left, right, bushy, inner, adaptive (re-chosen from the "
         "observed event mix while running) or a bracket string over the pattern's items, "
         "e.g. '((G;M);(D;I))'. Implies --plan tree.")


def _with_tree(plan: str | None, tree: str | None) -> str | None:
    """``--tree SHAPE`` as the plan name ``tree:SHAPE`` (``--plan`` may only say ``tree``)."""
    if tree is None:
        return plan
    if not tree.strip():
        raise UsageError("--tree: empty shape; use left, right, bushy, inner, adaptive or a "
                         "bracket string such as '((a;b);(c;d))'")
    if plan is not None and plan != "tree":
        raise UsageError(f"--tree is a shape of the tree plan; it cannot be combined with "
                         f"--plan {plan}")
    return f"tree:{tree.strip()}"


@cli.command()
@click.argument("query")
@_dialect
@click.option("--udf", "udfs", multiple=True, metavar="module:function",
              help="Register a Python function the query may call (repeatable); a :pure "
                   "suffix memoizes it, :vectorized calls it on Arrow arrays, :releases-gil "
                   "or :holds-gil says how --plan tasks runs it on several cores (kleene.udf).")
@_guard
def check(query: str, dialect: str | None, udfs: tuple[str, ...]) -> None:
    """Parse and validate QUERY; print its canonical form."""
    from ..api import analyze, to_text

    src = load_query(query)
    analyzed = analyze(src.text, dialect=dialect, udfs=load_udfs(udfs), name=src.default_name)
    click.echo(to_text(analyzed.query))
    _advise(analyzed)


def _advise(analyzed: Any) -> None:
    """Warnings about a valid query that is likely to hurt (stderr; the exit code stays 0)."""
    from ..semantic.advice import explosion_warning

    warning = explosion_warning(analyzed)
    if warning is not None:
        click.echo(f"kleene: warning: {warning}", err=True)


@cli.command()
@click.argument("query", nargs=-1, required=True)
@_dialect
@click.option("--dot", is_flag=True, help="Print the plan as a Graphviz dot graph.")
@click.option("--spark", is_flag=True,
              help="Show how the query is spread over Spark tasks (keyed, split or one task).")
@click.option("--udf", "udfs", multiple=True, metavar="module:function",
              help="Register a Python function the query may call (repeatable); a :pure "
                   "suffix memoizes it, :vectorized calls it on Arrow arrays, :releases-gil "
                   "or :holds-gil says how --plan tasks runs it on several cores (kleene.udf).")
@click.option("--plan", "plan", default=None, metavar="NAME",
              help="Explain this plan instead of the chosen one (nfa, pda, union, ...).")
@click.option("--kernel", is_flag=True,
              help="Print the generated source of the plan's kernel (where it has one).")
@click.option("--count", is_flag=True,
              help="Choose the plan for counting matches (as `run --count` does), not for "
                   "enumerating them.")
@_tree
@_guard
def explain(query: tuple[str, ...], dialect: str | None, dot: bool, spark: bool,
            udfs: tuple[str, ...], plan: str | None, kernel: bool,
            tree: str | None = None, count: bool = False) -> None:
    """Show how QUERY will be evaluated: the chosen plan, why, every other plan's estimated
    cost (or why it does not apply), and the plan itself. Several queries (a query set): one
    line per query, in the shared network or on its own plan and why."""
    from ..api import analyze
    from ..plans import choose
    from ..plans.explain import explain as plan_explain

    sources = load_queries(query)
    if tree is not None and (spark or len(sources) > 1):
        raise UsageError("--tree explains one query on the embedded engine (not a query set, "
                         "not --spark)")
    plan = _with_tree(plan, tree)
    if len(sources) > 1 or plan in ("shared", "separate", "auto"):
        if dot or spark or kernel:
            raise QueryError("--dot, --spark and --kernel explain one query")
        click.echo(_compile_set(sources, dialect, udfs, plan, 100_000).explain())
        return
    src = sources[0]
    analyzed = analyze(src.text, dialect=dialect, udfs=load_udfs(udfs), name=src.default_name)
    _advise(analyzed)
    if spark:
        if dot or kernel:
            raise UsageError(f"{'--dot' if dot else '--kernel'} and --spark cannot be combined; "
                             "the Spark plan is text")
        from ..spark import explain as spark_explain

        click.echo(spark_explain(analyzed))
        return
    from ..plans import Stats

    compiled = choose(analyzed, plan=plan, stats=Stats(count_only=count))
    if kernel:
        from ..runtime.matcher import MatcherOptions

        source = getattr(getattr(compiled.matcher(MatcherOptions()), "kernel", None),
                         "source", None)
        if source is None:
            raise QueryError(f"plan {compiled.kind.name!r} has no generated kernel for query "
                             f"{analyzed.name!r}")
        click.echo(source, nl=False)
        return
    click.echo(plan_explain(compiled, dot=dot))


@cli.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--input", "-i", "input_path", required=True, metavar="PATH",
              help="Events: a .csv, .csv.gz, .tsv, .jsonl, .ndjson or .parquet file, a "
                   "directory or a glob of them (read in sorted order), or - for stdin.")
@click.option("--input-format", type=click.Choice(["csv", "jsonl", "parquet"]), default=None,
              help="Input format when the file name does not tell.")
@click.option("--time-col", default=None, metavar="COL",
              help="Timestamp column (default: ts, timestamp, time or event_time).")
@click.option("--time-format", default=None, metavar="FMT",
              help="strptime format for text timestamps that are not ISO-8601, e.g. "
                   "'%m/%d/%Y %H:%M' (%z in it: times with an offset, printed in UTC).")
@click.option("--type-col", default=None, metavar="COL", help="Event-type column (default: type).")
@click.option("--event-type", default=None, metavar="NAME", help="Every row is an event of NAME.")
@click.option("--id-col", default=None, metavar="COL",
              help="Event id column (default: the 0-based input row).")
@click.option("--time-unit", type=click.Choice(["s", "ms", "us"]), default=None,
              help="Unit of epoch-number timestamps (default s). Given, the numbers are epoch "
                   "times and start/end print as UTC ISO-8601 times.")
@click.option("--column-type", "column_types", multiple=True, metavar="COL=TYPE",
              help="Override a column's type: int, float, string, bool, timestamp (repeatable).")
@click.option("--on-bad-row", default="fail", metavar="fail|skip|dead-letter=PATH",
              help="What to do with a bad input row (default fail).")
@click.option("--delimiter", default=None, metavar="CHAR", help="CSV delimiter (default ,).")
@click.option("--null-values", default=None, metavar="LIST",
              help="Comma-separated values read as NULL in every column, e.g. 'nil,NA,' (the "
                   "last item is the empty value). CSV's empty value, NA, NULL, NaN, ... are "
                   "NULL anyway.")
@click.option("--batch-size", default=65_536, type=click.IntRange(min=1), show_default=True,
              help="Rows per input chunk.")
@click.option("--output", "-o", default=None, metavar="PATH", help="Write matches here (default stdout).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default=None,
              help="Output format (default from --output's extension, else jsonl). "
                   "Non-finite RETURN values: JSON Lines writes the strings \"Infinity\", "
                   "\"-Infinity\", \"NaN\" (JSON has no such numbers); CSV writes inf, "
                   "-inf, nan; Parquet keeps the float.")
@click.option("--engine", default=None, metavar="NAME",
              help="Evaluation backend (default automaton; oracle for tiny inputs).")
@click.option("--plan", "plan", default=None, metavar="NAME",
              help="Force one evaluation plan of the automaton engine (nfa, pda, union, ...; "
                   "`kleene explain` lists them and why one is chosen). For several queries: "
                   "auto, shared (SCEMon's shared network) or separate.")
@click.option("--clean-period", default=100_000, type=click.IntRange(min=1), show_default=True,
              metavar="N", help="Several queries: events between two cleanings of the shared "
                                "network.")
@click.option("--count", is_flag=True, help="Print only the number of matches.")
@click.option("--plot", "plot_path", default=None, metavar="PATH",
              help="Also draw a timeline PNG of the matches (needs matplotlib: the plot "
                   "extra).")
@_dialect
@click.option("--udf", "udfs", multiple=True, metavar="module:function",
              help="Register a Python function the query may call (repeatable); a :pure "
                   "suffix memoizes it, :vectorized calls it on Arrow arrays, :releases-gil "
                   "or :holds-gil says how --plan tasks runs it on several cores (kleene.udf).")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
@click.option("--stream", "streaming", is_flag=True,
              help="Push chunks through the streaming runtime as they are read (bounded "
                   "memory; rows later than --allowed-lateness are counted as late, not matched).")
@click.option("--allowed-lateness", default=0.0, type=click.FloatRange(min=0), metavar="SECONDS",
              help="With --stream: how far behind the newest event a row may arrive.")
@click.option("--late-output", default=None, metavar="PATH",
              help="With --stream: write the late rows here as JSON Lines (row id, time, "
                   "type, attributes, reason), like dead letters.")
@click.option("--timeouts", "timeouts_path", default=None, metavar="PATH",
              help="Write the partial matches whose window expired (EMIT TIMEOUTS, added to "
                   "the query) to PATH as JSON Lines: variables, ids, start, end, expired.")
@click.option("--spark", is_flag=True,
              help="Read, match and write with PySpark (needs the spark extra and Java 17).")
@click.option("--master", default=None, metavar="URL",
              help="Spark master with --spark (default local[*]).")
@click.option("--partitions", default=None, type=click.IntRange(min=1), metavar="N",
              help="Spark partitions with --spark.")
@click.option("--verbose", "-v", is_flag=True,
              help="With --spark: show Spark's own log lines (hidden by default).")
@click.option("--spark-reader", type=click.Choice(["auto", "arrow", "spark"]), default="auto",
              show_default=True,
              help="With --spark: read CSV with kleene's reader in Spark tasks (arrow: the "
                   "embedded CLI's parsing, faster) or with Spark's CSV source (spark); auto "
                   "takes arrow for local CSV files.")
@click.option("--max-matches-per-call", default=None, type=click.IntRange(min=0), metavar="N",
              help="Cap on the matches the engine buffers at once (default 2,000,000, about "
                   "0.5-1 KB each; 0 = no cap). Without --stream the whole input is one call.")
@click.option("--max-runs-per-partition", default=None, type=click.IntRange(min=0),
              metavar="N",
              help="Cap on the partial matches (runs) alive in one partition (default 100,000; "
                   "0 = no cap).")
@click.option("--max-matches-per-event", default=None, type=click.IntRange(min=0), metavar="N",
              help="Cap on the matches one event may complete (default 1,000,000; 0 = no cap).")
@click.option("--on-cap", type=click.Choice(["error", "truncate"]), default="error",
              show_default=True,
              help="When an engine cap is hit: fail, or keep going, drop the excess runs or "
                   "matches and report how many (at the runs cap the partition stops matching "
                   "until the end of the input; the count is exact or said to be a lower "
                   "bound; docs/engine.md).")
@click.option("--analyze", is_flag=True,
              help="Count temporary matches created, copied and live (LinkedCEP's measure) "
                   "and show them in the summary; the NFA then runs without its generated "
                   "kernel.")
@click.option("--workers", default=None, type=click.IntRange(min=1), metavar="N",
              help="Processes for a PARTITION BY query: partitions spread over N workers by "
                   "key hash, merged back in output order; with a CSV file each worker reads "
                   "a part of it (default: the number of cores when a cost estimate says they "
                   "pay; with --stream, one process unless given; the summary says when a run "
                   "stays in one process and why).")
@_tree
@_guard
@_without_cyclic_gc
def run(query: tuple[str, ...], input_path: str, input_format: str | None,
        time_col: str | None, time_format: str | None, type_col: str | None,
        event_type: str | None, id_col: str | None, time_unit: str | None,
        column_types: tuple[str, ...], on_bad_row: str, delimiter: str | None,
        null_values: str | None, batch_size: int,
        output: str | None, fmt: str | None, engine: str | None, plan: str | None,
        clean_period: int, count: bool, plot_path: str | None, dialect: str | None, udfs: tuple[str, ...],
        quiet: bool, streaming: bool, allowed_lateness: float, late_output: str | None,
        spark: bool, master: str | None,
        partitions: int | None, verbose: bool, spark_reader: str, max_matches_per_call: int | None,
        max_runs_per_partition: int | None, max_matches_per_event: int | None,
        on_cap: str, analyze: bool = False, workers: int | None = None,
        tree: str | None = None, timeouts_path: str | None = None) -> None:
    """Run QUERY over the events in --input; write matches (JSON Lines by default).

    Several QUERY arguments, a directory of *.kleene files or a file holding several queries
    (separated by a line holding only `;`) run as one query set in one pass."""
    from ..backends import DEFAULT_BACKEND
    from ..events.options import null_values as parse_nulls
    from ..events.readers import BadRowPolicy, ReadOptions, collect, iter_events

    started = time.perf_counter()
    sources = load_queries(query)
    if tree is not None and (spark or len(sources) > 1):
        raise UsageError("--tree is for one query on the embedded engine (not a query set, "
                         "not --spark)")
    plan = _with_tree(plan, tree)
    query_set = len(sources) > 1 or plan in ("shared", "separate", "auto")
    types: dict[str, str] = {}
    for spec in column_types:
        col, eq, typ = spec.partition("=")
        if not eq or not col or not typ:
            raise UsageError(f"--column-type {spec!r}: expected COLUMN=TYPE, e.g. x=float")
        types[col] = typ
    out_fmt = fmt or _format_from_output(output)
    try:
        policy = BadRowPolicy.parse(on_bad_row)
    except InputError as e:
        raise UsageError(f"--on-bad-row: {e}") from None
    _refuse_overwriting_input(input_path, {"--output": output, "--on-bad-row dead-letter=":
                                           policy.path, "--timeouts": timeouts_path})
    explicit_unit = time_unit is not None
    time_unit = time_unit or "s"
    if out_fmt == "parquet" and output is None and not count:
        raise UsageError("Parquet output needs a file: pass --output PATH")
    if spark and (streaming or allowed_lateness):
        raise UsageError("--stream and --allowed-lateness are for the embedded engine, not "
                         "--spark")
    if spark and (late_output is not None or workers is not None or plot_path is not None):
        raise UsageError("--late-output, --workers and --plot are for the embedded engine, not "
                         "--spark")
    if spark and policy.path is not None:
        raise UsageError("--on-bad-row dead-letter=PATH is not supported with --spark (tasks "
                         "on other machines cannot share one dead-letter file); use fail or "
                         "skip")
    caps: dict[str, Any] = {"on_cap": on_cap}
    if analyze:
        if spark:
            raise UsageError("--analyze is for the embedded engine, not --spark")
        caps["use_kernel"] = False
    cap_flags = {"max_matches_per_call": max_matches_per_call,
                 "max_runs_per_partition": max_runs_per_partition,
                 "max_matches_per_event": max_matches_per_event}
    for option, value in cap_flags.items():
        if value is not None:
            caps[option] = value or None  # 0: no cap
    if max_matches_per_call == 0:
        click.echo("kleene: warning: --max-matches-per-call 0 buffers every match of the "
                   "call without limit (about 0.5-1 KB each): a dense query can exhaust "
                   "memory; prefer a cap with --on-cap truncate, or --stream", err=True)
    from ..backends import BACKENDS

    if engine is not None and engine in BACKENDS and BACKENDS[engine].needs_spark:
        raise UsageError(f"--engine {engine} is the Spark pipeline itself: use --spark (with "
                         "the default engine) instead")
    backend = _backend(engine or DEFAULT_BACKEND)
    if not backend.options and (any(v is not None for v in cap_flags.values())
                                or on_cap != "error"):
        raise UsageError(f"--max-runs-per-partition, --max-matches-per-event, "
                         f"--max-matches-per-call and --on-cap are options of the automaton "
                         f"engine, not {backend.name!r}")
    if plan is not None and not backend.plans:
        raise UsageError(f"{'--tree' if tree else '--plan'} chooses among the automaton "
                         f"engine's plans; engine "
                         f"{backend.name!r} has none")
    if spark and plan is not None:
        raise UsageError("--plan is for the embedded engine; --spark runs the chosen plan in "
                         "each task")
    if query_set and engine is not None and engine != DEFAULT_BACKEND:
        raise QueryError("several queries run as a query set on the automaton engine "
                         "(embedded or --spark); --engine is for one query")
    if timeouts_path is not None and (query_set or spark):
        raise UsageError("--timeouts is for one query on the embedded engine (on Spark, "
                         "write EMIT TIMEOUTS in the query: timeouts come with the matches)")
    if spark:
        spark_query: Any = ([(s.text, s.default_name) for s in sources] if query_set
                            else query[0])
        _run_spark(spark_query, input_path, on_bad_row=on_bad_row, quiet=quiet,
                   verbose=verbose,
                   **spark_options(output=output, fmt=out_fmt, input_format=input_format,
                                   time_col=time_col, type_col=type_col, event_type=event_type,
                                   id_col=id_col, time_unit=time_unit, column_types=types,
                                   delimiter=delimiter, dialect=dialect, udfs=load_udfs(udfs),
                                   engine=engine or DEFAULT_BACKEND, count_only=count,
                                   master=master, partitions=partitions, caps=caps,
                                   time_format=time_format, reader=spark_reader,
                                   epoch_times=explicit_unit, null_values=null_values))
        return
    if master is not None or partitions is not None or spark_reader != "auto":
        raise UsageError("--master, --partitions and --spark-reader need --spark")
    if verbose:
        raise UsageError("--verbose shows Spark's own log lines: it needs --spark")
    if allowed_lateness and not streaming:
        raise UsageError("--allowed-lateness needs --stream (a bounded run sorts its input)")
    if late_output is not None and not streaming:
        raise UsageError("--late-output needs --stream (a bounded run sorts its input: no row "
                         "is late)")
    if plot_path is not None:
        _check_plot(plot_path, streaming=streaming, count=count, query_set=query_set,
                    input_path=input_path)
    if query_set:
        compiled: Any = _compile_set(sources, dialect, udfs, plan, clean_period)
    else:
        compiled = _compile(query[0], dialect, udfs, engine or DEFAULT_BACKEND, plan,
                            timeouts=timeouts_path is not None)
    touts = Timeouts(compiled, timeouts_path, out_fmt)
    compiled_at = time.perf_counter()
    options = ReadOptions(time_col=time_col, type_col=type_col, event_type=event_type,
                          id_col=id_col, time_unit=time_unit,  # type: ignore[arg-type]
                          time_format=time_format,
                          column_types=types, on_bad_row=policy,
                          format=input_format, delimiter=delimiter, batch_size=batch_size,
                          null_values=parse_nulls(null_values))
    progress = _Progress(sys.stderr.isatty() and not quiet)
    options, unread = _unread_columns_as_text(input_path, options, _analyzed_all(compiled))

    # --stream: chunks in arrival order; the runtime decides lateness per event
    stream = iter_events(input_path, options, sort_chunks=False)
    if streaming:
        _run_streaming(compiled, stream, output=output, fmt=out_fmt, count=count,
                       lateness_s=allowed_lateness, quiet=quiet, progress=progress,
                       late_output=late_output,
                       clock=(started, compiled_at), caps=caps, explicit_unit=explicit_unit,
                       unread=unread, touts=touts, workers=workers)
        return
    batches: list[Any] = []
    feed: Any = None  # keyed workers that match while the input is read (_keyed_feed)
    parted: Any = None  # keyed workers that read the input in parts (_in_parts)
    plain = out_fmt == "jsonl" and not touts.on and plot_path is None
    early: Any = None  # keyed workers in parts, the types decided by a sample (_in_parts)
    if plain and not query_set:
        early = _in_parts(compiled, None, stream, input_path, options, unread,
                          {**caps, "count_only": count}, workers, explicit_unit)
        if early is not None and early.single:  # one process pays best
            workers = 1
        elif early is not None:
            parted = early
    for b in (stream if parted is None else ()):
        if not batches:  # the columns are known: a misspelt attribute fails before reading on
            _check_schema(compiled, b, input_path, types=False)
            if plain and not query_set and early is None:
                parted = _in_parts(compiled, b, stream, input_path, options, unread,
                                   {**caps, "count_only": count}, workers, explicit_unit)
                if parted is not None and parted.single:  # one process pays best
                    workers, parted = 1, None
                if parted is not None:
                    break
            feed = _keyed_feed(compiled, b, {**caps, "count_only": count}, workers,
                               explicit_unit, plain_jsonl=out_fmt == "jsonl" and not count
                               and not touts.on and plot_path is None)
        batches.append(b)
        if feed is not None:
            if stream.report.out_of_order:  # the bounded run sorts: the workers cannot go on
                feed.abandon()
                feed = None
            else:
                feed.push(b)
        unread.count(b)
        progress.show(f"reading {input_path}: {_percent(stream)}{stream.report.events:,} events")
    if parted is not None and parted.run is None:  # read here after all (parted.why)
        if parted.one_process:
            workers = 1
        stream = iter_events(input_path, options, sort_chunks=False)
        for b in stream:
            batches.append(b)
            unread.count(b)
    if parted is not None and parted.run is not None:
        events, report = parted.first, parted.report
        _check_schema(compiled, events, input_path, types=True, type_names=parted.types)
        read_done = parted.read_done
    else:
        try:
            events, report = collect(stream, batches)
            unread.warn()
            if len(events):  # every event type of the input is known: a misspelt one is an error
                _check_schema(compiled, events, input_path, types=True)
        except BaseException:
            if feed is not None:
                feed.abandon()
            raise
        read_done = time.perf_counter()
    if not query_set and not compiled.backend.options and len(events) > ORACLE_WARN_EVENTS:
        click.echo(f"kleene: warning: the oracle enumerates every candidate match (brute "
                   f"force, for tiny inputs); {len(events):,} events may take very long. "
                   "The default engine is automaton.", err=True)
    progress.show(f"matching {len(events):,} events with {_engine_label(compiled)}",
                  force=True)
    if parted is not None and parted.run is not None:
        matches = parted.matches()
    elif query_set:
        matches = _engine_call("automaton", _run_query_set, compiled, events,
                               {**caps, "count_only": count}) if len(events) else []
    elif compiled.backend.streaming:
        # --count: the engine only counts (no bindings, no Match objects where it can);
        # JSON Lines: keyed parallel workers format their own matches (_Lines)
        texts = (_jsonl_texts(_output_time(events.time, explicit_unit))
                 if out_fmt == "jsonl" and not count and not touts.on and plot_path is None
                 else None)
        matches = _engine_call(compiled.engine, _automaton, compiled, events,
                               {**caps, "count_only": count}, workers,
                               texts, feed) if len(events) else []
    else:
        matches = _engine_call(compiled.engine, compiled.run, events) if len(events) else []
    progress.clear()
    if parted is not None and parted.run is None:
        why = parted.why.splitlines()[0] if parted.why else "?"  # (one summary line)
        _WORKERS["label"] = _WORKERS.get("label", "") + f" (read in one process: {why})"
    match_done = time.perf_counter()
    out_time = _output_time(events.time, explicit_unit)
    if touts.on:
        matches = touts.split(matches, out_time)
        touts.close()
    deferred = isinstance(matches, _SetOutput)
    n_found = 0 if deferred else _n_matches(matches) - (
        touts.count if touts.path is None and not isinstance(matches, _Count) else 0)
    if count:
        click.echo(n_found)
    else:
        from ..events.writers import open_writer

        with output_target(output) as target, open_writer(target, out_fmt, out_time,
                                                          _output_fields(compiled)) as w:
            if isinstance(matches, _Lines):
                w.write_texts(matches.texts)  # type: ignore[attr-defined]
            elif isinstance(matches, _SetOutput):  # matched while written, a piece at a time
                n_found = _engine_call("automaton", matches.write, w)
            else:
                touts.writer(w).write(matches)
    finished = time.perf_counter()
    if not quiet:
        _summary(report, n_found, _engine_label(compiled) + _WORKERS.pop("label", ""),
                 (started, compiled_at, read_done, match_done, finished),
                 per_query=_per_query(compiled, matches),
                 timeouts=(touts.count, touts.path) if touts.on else None)
        _udf_summary(compiled)
        _tasks_summary(compiled)
    if plot_path is not None:
        from ..plot import timeline

        if compiled.analyzed.query.rows is not None and isinstance(matches, list):
            # EMIT ROWS: one span per match, not per row
            matches = list({(m.query, str(m.bindings), m.start, m.end): m
                            for m in matches}.values())
        with output_target(plot_path) as target:
            timeline(events, matches, partition_by=compiled.analyzed.partition_by,
                     path=target, title=compiled.name)
        if not quiet:
            click.echo(f"timeline        {plot_path}   (the matches over the events: --plot)",
                       err=True)


def _check_plot(path: str, *, streaming: bool, count: bool, query_set: bool,
                input_path: str) -> None:
    """``--plot PATH``: a PNG of one query's matches over a bounded run, with matplotlib."""
    if streaming or count or query_set:
        raise UsageError("--plot draws the matches of one query over a bounded run: not with "
                         "--stream, --count, --spark or several queries")
    if not path.lower().endswith(".png"):
        raise UsageError(f"--plot {path}: the timeline is a PNG file; name it *.png")
    _refuse_overwriting_input(input_path, {"--plot": path})
    from ..plot import require_matplotlib

    require_matplotlib()


def _udf_summary(compiled: Any) -> None:
    """One line per pure (memoized) UDF: real calls and cache hits."""
    analyzed = getattr(compiled, "analyzed", None)  # a query set has several
    for name, f in sorted(pure_udfs(analyzed.udfs if analyzed is not None else {}).items()):
        total = f.calls + f.hits
        rate = f.hits / total if total else 0.0
        click.echo(f"udf {name:<11} {f.calls:>12,}   calls ({f.hits:,} cache hits, "
                   f"{rate:.0%} of {total:,} evaluations)", err=True)
    for name, v in sorted(vectorized_udfs(analyzed.udfs if analyzed is not None else {})
                          .items()):
        click.echo(f"udf {name:<11} {v.calls:>12,}   calls (vectorized, {v.rows:,} rows)",
                   err=True)


def _tasks_summary(compiled: Any) -> None:
    """With ``--plan tasks``: what evaluated the tasks and why (threads or processes,
    declared or measured: kleene.plans.tasks.choose_operators)."""
    if getattr(compiled, "plan", None) != "tasks":
        return
    from ..plans import tasks

    m = tasks.LAST
    if m is not None:
        click.echo(f"operators       {m.settings.workers:>12,}   workers: {m.choice}", err=True)


_WORKERS: dict[str, str] = {}
"""The summary's note on keyed parallelism, set by :func:`_automaton`."""


class UnreadColumns:
    """Columns the query does not read that would be typed by inference from text (CSV): they
    are read as text, so a bad value in one (``'nil'`` in a number column) cannot fail the
    run; :meth:`count` counts the values that are not of the inferred type and :meth:`warn`
    reports them in one line."""

    def __init__(self, types: dict[str, Any] | None = None) -> None:
        self.types: dict[str, Any] = dict(types or {})
        self.bad: dict[str, int] = dict.fromkeys(self.types, 0)
        self.example: dict[str, str] = {}

    def count(self, batch: Any) -> None:
        """Count the values of ``batch`` not of their column's inferred type."""
        if not self.types or not len(batch):
            return
        from ..events.convert import convert_column
        from ..events.model import ID

        for col, typ in self.types.items():
            if col not in batch.table.column_names:
                continue
            arr = batch.table.column(col).combine_chunks()
            _, errors = convert_column(arr, typ, col, True)
            self.bad[col] += len(errors)
            if errors and col not in self.example:
                e = errors[0]
                self.example[col] = (f"{arr[e.position].as_py()!r} at event id "
                                     f"{batch.table.column(ID)[e.position].as_py()!r}")

    def warn(self) -> None:
        """One warning line when any of the counted values was bad."""
        bad = {c: n for c, n in self.bad.items() if n}
        if not bad:
            return
        parts = [f"{c}: {n:,} not {self.types[c]} (e.g. {self.example[c]})"
                 for c, n in bad.items()]
        total = sum(bad.values())
        click.echo(f"kleene: warning: {total:,} bad value{'s' if total != 1 else ''} in "
                   "columns the query does not read, kept as text so they do not fail the "
                   f"run: {'; '.join(parts)}", err=True)


def _analyzed_all(compiled: Any) -> list[Any]:
    """The analyzed queries of a compiled query or of a query set."""
    queries = getattr(compiled, "queries", None)
    return [q.analyzed for q in queries] if queries is not None else [compiled.analyzed]


def _skip_pandas_probe() -> None:
    """For the console process (:func:`main`), never when kleene is a library: pyarrow looks
    for pandas the first time it converts Python objects (``pa.array`` of a list, a compute
    function given a Python scalar: is it a pandas Series?), and with pandas installed (the
    ``spark`` and ``dev`` extras) that import is most of a small run's start-up (0.1-0.25 s).
    kleene's CLI never hands pyarrow a pandas object, so pyarrow's one look is made here with
    pandas hidden; it then takes lists for lists. Nothing else changes: a conversion that
    needs pandas (``to_pandas``, ``from_pandas``) makes pyarrow import it then, a ``--udf``
    may import it, and ``--spark`` (pyspark hands pyarrow pandas objects) skips this.
    (Session 11: this replaced an import hook that refused pandas to imports made from
    kleene's own frames, which missed pyarrow's Python wrappers: ``pc.equal(col, "")`` in
    the reader imported pandas in every run with a type column.)"""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    class _Hidden:  # (a meta path finder; importlib.abc would import shutil and tempfile)
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "pandas" or name.startswith("pandas."):
                raise ImportError("pandas is not used by an embedded run")

    hidden = _Hidden()
    sys.meta_path.insert(0, hidden)
    try:
        pa.array([0])  # (pyarrow's one look, cached for the process)
    finally:
        sys.meta_path.remove(hidden)


def _output_fields(compiled: Any) -> list[str]:
    """Every query's RETURN fields (``AnalyzedQuery.output_fields``) in the set's order, each
    once: CSV's header, so queries that return different fields share one file."""
    return list(dict.fromkeys(f for q in _analyzed_all(compiled) for f in q.output_fields()))


def _unread_columns_as_text(input_path: str, options: Any,
                            analyzed: list[Any]) -> tuple[Any, UnreadColumns]:
    """``options`` with the columns the query does not read, whose types the reader infers
    from text, read as text (``--column-type COL=string``), and an :class:`UnreadColumns`
    that counts their bad values.

    The columns and their inferred types come from a first look at the input with the same
    options (its first 256 KB or 4,096 rows; bad rows skipped, nothing written). Standard input cannot
    be looked at twice, and a query that reads whole events (``RETURN a``) reads every
    column: both keep the reader's usual typing."""
    from dataclasses import replace

    from ..events.readers import iter_events
    from ..semantic.schema import read_attributes

    read: frozenset[str] | None = frozenset()
    for a in analyzed:
        r = read_attributes(a)
        read = None if r is None or read is None else read | r
    if read is None or input_path == "-":
        return options, UnreadColumns()
    try:
        # a small first chunk: only the unread columns' types come from it, and those
        # columns are read as text in the real read, whatever a larger chunk would infer
        look = replace(options, on_bad_row="skip", batch_size=min(options.batch_size, 4_096),
                       block_bytes=min(options.block_bytes, 1 << 18))
        with iter_events(input_path, look, sort_chunks=False) as peek:
            next(peek, None)
            decided = peek.decisions
    except KleeneError:
        return options, UnreadColumns()  # the real read reports it
    if decided is None:
        return options, UnreadColumns()
    import pyarrow as pa

    keep = {decided.time_col, options.type_col or "type", options.id_col,
            *options.column_types}
    unread = {c: t for c, t in decided.types.items()
              if c in decided.inferred and c not in read and c not in keep
              and not pa.types.is_string(t)}
    if not unread:
        return options, UnreadColumns()
    as_text = {**options.column_types, **dict.fromkeys(unread, "string")}
    return replace(options, column_types=as_text), UnreadColumns(unread)


def _check_schema(compiled: Any, events: Any, source: str, *, types: bool,
                  complete: bool = True, type_names: frozenset[str] | None = None) -> None:
    """Check the query against the input's columns (and its event types when ``types``):
    an unknown attribute, event type or PARTITION BY column, or a string compared with a
    number, is a query error with a did-you-mean; event types missing from a first chunk
    (``complete=False``) are a warning. ``type_names``: the input's event types, when
    ``events`` is only its first chunk (an input read in parts)."""
    from ..semantic.schema import InputSchema, check_against

    schema = InputSchema.of(events, types_complete=complete, source=source)
    if type_names is not None:
        schema = InputSchema(schema.columns, type_names, complete, source)
    if not types:
        schema = InputSchema(schema.columns, source=source)
    elif hasattr(compiled, "queries") and schema.types is not None:
        # nested queries: a query of the set is an event type too (docs/semantics.md §17)
        schema = InputSchema(schema.columns, schema.types | set(compiled.names),
                             schema.types_complete, source)
    for analyzed in _analyzed_all(compiled):
        for message in check_against(analyzed, schema):
            click.echo(f"kleene: warning: {message}", err=True)


def _jsonl_texts(out_time: Any) -> Any:
    """The JSON Lines formatter of keyed parallel workers: matches -> their output lines."""
    import io

    from ..events.writers import JsonLinesWriter

    return JsonLinesWriter(io.StringIO(), out_time).texts


class _Lines:
    """The matches of a keyed parallel run as their formatted JSON Lines output lines (Arrow
    string arrays, in output order): the workers formatted them."""

    def __init__(self, texts: list[Any]) -> None:
        self.texts = texts
        self.n = sum(len(t) for t in texts)

    def __len__(self) -> int:
        return self.n


def _default_workers() -> int:
    """``--workers``' default: the cores this process may use."""
    from ..runtime.engine import default_workers  # not runtime.parallel: no multiprocessing

    return default_workers()


def _keyed_feed(compiled: Any, first: Any, options: dict[str, Any], workers: int | None,
                explicit_unit: bool, *, plain_jsonl: bool) -> Any:
    """Workers that match a PARTITION BY query's chunks while the input is read
    (:class:`~kleene.runtime.parallel.KeyedFeed`), when ``_automaton`` would spread it over
    workers; None otherwise. ``first``: the first chunk (its time format)."""
    if getattr(compiled, "compiled_plan", None) is None or not compiled.backend.streaming:
        return None  # a query set, or an engine that is not the automaton
    n = _default_workers() if workers is None else workers
    if workers is None and compiled.compiled_plan.kind.one_process:
        return None  # _automaton keeps it in one process
    if n < 2 or compiled.analyzed.query.timeouts or options.get("use_kernel") is False:
        return None
    from ..runtime.keyed import sequential_reason
    from ..runtime.parallel import KeyedFeed  # multiprocessing: workers only

    if sequential_reason(compiled.compiled_plan, 1 << 62, n) is not None:
        return None
    texts = _jsonl_texts(_output_time(first.time, explicit_unit)) if plain_jsonl else None
    return KeyedFeed(compiled.compiled_plan, n, options, udfs=compiled.analyzed.udfs,
                     texts=texts)


@dataclass
class _Parts:
    """A run whose input keyed workers read in parts (:func:`_in_parts`): ``run`` (None: the
    input is read in this process after all, ``why`` says why), the input's read report and
    event types, and its first chunk (columns and time format)."""

    run: Any
    why: str | None
    read_done: float
    """When every part was read (``time.perf_counter``)."""
    first: Any
    report: Any = None
    types: frozenset[str] | None = None
    single: bool = False
    """The cost estimate says one process (``why``): nothing was run, read on here."""
    one_process: bool = False
    """The workers' run must be one process's (a cap: ``why``): read and run it here."""

    def matches(self) -> Any:
        """The matches as :func:`_automaton` returns them (lines or a count)."""
        par = self.run
        _WORKERS["label"] = (f", {par.workers} workers, each reading a part of the input"
                             if par.workers > 1 else f", 1 worker: {par.reason}")
        _report_truncation(par.counters)
        if par.texts is None:
            return _Count(par.counters.matches)
        return _Lines(par.texts)


def _in_parts(compiled: Any, first: Any, stream: Any, input_path: str, read_options: Any,
              unread: UnreadColumns, options: dict[str, Any], workers: int | None,
              explicit_unit: bool) -> _Parts | None:
    """Keyed workers that each read a part of a CSV file (byte ranges cut at line starts),
    exchange events by key hash and match (:func:`~kleene.runtime.parallel.run_parts`), when
    the query spreads over workers and the input can be cut; None otherwise. ``first``: the
    first chunk of ``stream``, whose type decisions every part reads with -- or None before
    ``stream`` is read: then the types are decided by the sample of the first lines that
    decides them in one reader (:class:`~kleene.events.sources.csvfile.CsvSampleSource`;
    the first block is not parsed here), the query checked against its columns, and
    ``stream`` closed; None when no sample decides (the first chunk will). The result of the
    run is that of reading in this process, byte for byte; a part with a bad row, a widened
    column or rows out of order makes this process read the input after all."""
    if (getattr(compiled, "compiled_plan", None) is None or not compiled.backend.streaming
            or not compiled.backend.options or compiled.analyzed.query.timeouts
            or options.get("use_kernel") is False):
        return None
    ro = read_options
    from ..events.readers import BadRowPolicy

    if (ro.id_col is not None or BadRowPolicy.parse(ro.on_bad_row).path is not None
            or (first is not None and stream.decisions is None)):
        return None  # ids checked unique over the whole input; one dead-letter file
    n = _default_workers() if workers is None else workers
    from ..runtime.keyed import parts_pay, sequential_reason  # (no multiprocessing)

    if n < 2 or sequential_reason(compiled.compiled_plan, 1 << 62, n) is not None:
        return None
    from ..events.sources.csvrange import csv_byte_ranges

    cut = csv_byte_ranges(input_path, ro, n)
    if cut is None or len(cut[1]) < 2:
        return None
    head, ranges = cut
    est = _estimated_events(input_path, ranges)
    if sequential_reason(compiled.compiled_plan, est, n) is not None:
        return None
    if workers is None:
        why = parts_pay(compiled.compiled_plan, est, len(ranges))
        if why is not None:
            _WORKERS["label"] = f", 1 worker: {why}"
            return _Parts(None, why, 0.0, first, single=True)
    if first is None:
        looked = _sample_look(input_path, ro)
        if looked is None:
            return None
        first, sampled = looked
        _check_schema(compiled, first, input_path, types=False)
        stream.close()
        stream = sampled
    from ..runtime.parallel import run_parts

    stream.close()
    decisions = stream.decisions
    count = bool(options.get("count_only"))
    texts = None if count else _jsonl_texts(_output_time(first.time, explicit_unit))

    from ..semantic.schema import read_attributes

    attrs = read_attributes(compiled.analyzed)  # the columns a worker needs (None: every one)

    def read(w: int) -> Any:
        return _read_part(input_path, ro, head, ranges[w], decisions, unread, attrs)

    from ..events.readers import ReadReport

    forked = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        done = run_parts(compiled.compiled_plan, len(ranges), read, options,
                         udfs=compiled.analyzed.udfs, texts=texts)
    if done.run is None:
        return _Parts(None, done.why, forked + done.read_s, first, one_process=done.one_process)
    rows, events, blank, nulled = (sum(i[k] for i in done.infos) for k in range(4))
    types: set[str] = set()
    for i in done.infos:
        types |= i[4]
    report = ReadReport(source=stream.name, format=stream.format, rows_read=rows,
                        events=events, skipped=0, dead_lettered=0, out_of_order=0,
                        time=stream.time, bad_examples=(), blank_lines=blank, nulled=nulled)
    return _Parts(done.run, None, forked + done.read_s, first, report, frozenset(types))


def _sample_look(path: str, ro: Any) -> tuple[Any, Any] | None:
    """The first lines of a CSV file that decide its types as its reader decides them, as
    an event chunk, and their (closed) stream, whose decisions and time format are the
    reader's; None when no sample decides so, or when the first lines hold a bad row or
    anything else the reader reports (the usual read reports it, at its line)."""
    from dataclasses import replace

    from ..events.readers import EventStream
    from ..events.sources.csvfile import CsvSampleSource

    look = replace(ro, on_bad_row="skip")
    try:
        with EventStream(CsvSampleSource(path, look), look, sort_chunks=False) as st:
            first = next(st, None)
            if first is None or st.decisions is None or st.report.bad_rows:
                return None
    except KleeneError:
        return None
    return first, st


def _estimated_events(path: str, ranges: list[tuple[int, int]]) -> int:
    """The lines after the header of a CSV file, estimated from its first 256 KiB."""
    start, size = ranges[0][0], ranges[-1][1]
    with open(path, "rb") as f:
        f.seek(start)
        sample = f.read(1 << 18)
    lines = sample.count(b"\n")
    return size - start if not lines else int((size - start) * lines / len(sample))


def _read_part(path: str, ro: Any, head: bytes, part: tuple[int, int], decisions: Any,
               unread: UnreadColumns, attrs: frozenset[str] | None) -> Any:
    """A keyed worker's part of a CSV file, read as the whole file's reader reads it, or the
    reason to read the input in one process (``PartRead.redo``). Only the columns the query
    reads (``attrs``, and kleene's own: id, time, type) are kept: the others would only be
    copied from worker to worker (the output names events by id)."""
    from ..events.model import RESERVED, TYPE
    from ..events.ordering import concat
    from ..events.readers import EventStream
    from ..events.sources.csvrange import CsvRangeSource
    from ..runtime.parallel import PartRead

    with EventStream(CsvRangeSource(path, ro, head, *part), ro, sort_chunks=False,
                     decisions=decisions) as st:
        batches = []
        types: set[str] = set()
        for b in st:
            batches.append(b)
            unread.count(b)
            if ro.event_type is None:
                types.update(str(t) for t in _unique(b.table.column(TYPE)) if t is not None)
        rep = st.report
        if ro.event_type is not None:
            types = {ro.event_type}
        if rep.bad_rows:
            return PartRead(None, redo="a bad row (reported in input order by one reader)")
        if rep.out_of_order:
            return PartRead(None, redo="the input is out of time order (the run sorts it)")
        if st.decisions is None or st.decisions.types != decisions.types:
            return PartRead(None, redo="a column's type widened in a later part")
        if any(unread.bad.values()):
            return PartRead(None, redo="a bad value in a column the query does not read")
        table = concat([b.table for b in batches]) if batches else None
        if table is None:
            return PartRead(None, redo="a part without events")
        if attrs is not None:
            table = table.select([c for c in table.column_names if c in RESERVED or c in attrs])
        return PartRead(table, rep.rows_read + rep.blank_lines, st.time,
                        (rep.rows_read, rep.events, rep.blank_lines, rep.nulled, types))


def _unique(col: Any) -> list[Any]:
    import pyarrow.compute as pc

    return list(pc.unique(col).to_pylist())


def _automaton(compiled: Any, events: Any, options: dict[str, Any],
               workers: int | None = None, texts: Any = None, feed: Any = None) -> list[Any]:
    """The automaton engine over the whole (ordered) input as one ``push``, with the
    command's cap options; matches or runs dropped by ``--on-cap truncate`` are reported.
    A PARTITION BY query may spread over ``workers`` processes (default: the cores); with
    ``texts`` (a JSON Lines formatter) the workers format their matches, returned as
    :class:`_Lines`. ``feed`` (a KeyedFeed): workers that matched while the input was read;
    their result, when they give one, is that of ``run_parallel``."""
    if getattr(compiled, "compiled_plan", None) is not None:  # not a query set
        n = _default_workers() if workers is None else workers
        if workers is None and compiled.compiled_plan.kind.one_process and n > 1:
            n = 1  # the plan hands its matches to the writer as columns (plans/runs.py)
            _WORKERS["label"] = (f", 1 worker: the {compiled.compiled_plan.kind.name} plan is "
                                 "fastest in one process")
        if compiled.analyzed.query.timeouts and n > 1:
            n = 1  # timeouts are merged with the matches by one runtime
            _WORKERS["label"] = ", 1 worker: EMIT TIMEOUTS runs in one process"
        if feed is not None and not (n > 1 and options.get("use_kernel") is not False):
            feed.abandon()  # (_keyed_feed makes none then: a safety net)
            feed = None
        if n > 1 and options.get("use_kernel") is not False:  # not with --analyze
            from ..runtime.parallel import run_parallel  # multiprocessing: only with workers

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                par = feed.finish() if feed is not None else None
                if par is None:
                    if feed is not None and feed.one_process:  # (a cap: one call decides)
                        n = 1
                    par = run_parallel(compiled.compiled_plan, events, n, options,
                                       udfs=compiled.analyzed.udfs, texts=texts,
                                       columnar=True)
            _WORKERS["label"] = (f", {par.workers} workers" if par.workers > 1
                                 else f", 1 worker: {par.reason}")
            _report_truncation(par.counters)
            if options.get("count_only"):
                return _Count(par.counters.matches)  # type: ignore[return-value]
            if par.texts is not None:
                return _Lines(par.texts)  # type: ignore[return-value]
            return par.matches
    runtime = compiled.start(**options)
    # a plan that finds its matches as arrays hands them to the writer as columns
    runtime.columnar = True
    if options.get("count_only"):
        runtime.count_placeholders = False  # exact counts may be huge: read the counter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # reported below, once, in kleene's words
        out: list[Any] = runtime.push(events)
        out += runtime.close()
    if runtime.counters.late_events:  # the input is sorted; this would be a bug
        raise EngineError(f"{runtime.counters.late_events} events came out of order")
    _report_truncation(runtime.counters)
    _TEMPORARY.clear()
    if options.get("use_kernel") is False:  # --analyze
        _TEMPORARY.update(runtime.temporary_matches() or {})
    if options.get("count_only"):
        counted = _Count(runtime.counters.matches)
        counted.timeouts = [m for m in out if m.expired is not None]
        return counted  # type: ignore[return-value]
    return out


def _n_matches(matches: Any) -> int:
    """How many matches a run returned (exact, also beyond ``sys.maxsize``)."""
    return matches.n if isinstance(matches, _Count) else len(matches)


class _Count:
    """The result of a ``--count`` run: the exact number of matches, without one placeholder
    per match (the chain plan counts far more matches than fit in memory)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.timeouts: list[Any] = []
        """Timed-out partial matches of the run (EMIT TIMEOUTS): built, not only counted."""

    def __len__(self) -> int:
        return self.n


_TEMPORARY: dict[str, int] = {}
"""Temporary-match counters of the last ``--analyze`` run (for the summary)."""


def _compile_set(sources: list[QuerySource], dialect: str | None, udfs: Sequence[str],
                 plan: str | None, clean_period: int) -> Any:
    """Several queries -> one QuerySet (unique names; the plan: auto, shared or separate)."""
    from ..queryset import PLANS, compile_many

    if plan is not None and plan not in PLANS:
        raise QueryError(f"--plan {plan!r} is for one query; a query set takes "
                         f"{', '.join(PLANS)}")
    return compile_many([s.text for s in sources], names=[s.default_name for s in sources],
                        dialect=dialect, udfs=load_udfs(udfs), plan=plan,
                        clean_period=clean_period)


def _run_query_set(qs: Any, events: Any, options: dict[str, Any]) -> list[Any]:
    """A query set over the whole (ordered) input as one ``push`` (``--count``), or the
    :class:`_SetOutput` that pushes it while the matches are written."""
    runtime = qs.start(**options)
    if not options.get("count_only"):
        return _SetOutput(runtime, events)  # type: ignore[return-value]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out: list[Any] = runtime.push(events)
        out += runtime.close()
    return out


class _SetOutput:
    """A query set's run, made when written: ``push_to`` / ``close_to`` hand the writer its
    matches a piece at a time in the set's order (the chain plan's blocks expanded only then,
    as the one-query path's ``MatchTable`` is), so the output is never held whole."""

    def __init__(self, runtime: Any, events: Any) -> None:
        self.runtime = runtime
        self.events = events

    def write(self, w: Any) -> int:
        """Match and write; returns how many matches were written."""
        from ..events.matchtable import MatchTable

        def sink(piece: Any) -> None:
            w.write(MatchTable([piece]))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            n = int(self.runtime.push_to(self.events, sink))
            n += int(self.runtime.close_to(sink))
        return n


def _per_query(compiled: Any, matches: list[Any]) -> dict[str, int] | None:
    """Matches per query name, for a query set's summary."""
    names = getattr(compiled, "names", None)
    if names is None:
        return None
    if isinstance(matches, _SetOutput):
        return dict.fromkeys(names, 0) | {k: v for k, v in matches.runtime.counts.items()
                                          if k in names}
    counts = dict.fromkeys(names, 0)
    for m in matches:
        counts[m.query] = counts.get(m.query, 0) + 1
    return counts


def _engine_label(compiled: Any) -> str:
    """``automaton, plan nfa`` for the summary line."""
    if hasattr(compiled, "queries"):
        shared = "shared network" if compiled.uses_network() else "separate plans"
        return f"automaton, query set of {len(compiled.queries)}, {shared}"
    if compiled.plan == "tree":  # the shape too: ``plan tree:right``, ``plan tree:adaptive``
        from ..plans.tree import shape_label

        cp = compiled.compiled_plan
        return f"{compiled.engine}, plan tree:{shape_label(cp.plan, cp.choice.stats)}"
    label = compiled.engine if compiled.plan is None else f"{compiled.engine}, plan {compiled.plan}"
    if compiled.analyzed.query.rows is not None:  # EMIT ROWS / ALL ROWS PER MATCH
        label += "; counted: records, one per row of each match"
    return label


def _report_truncation(counters: Any) -> None:
    """One warning line on stderr when ``--on-cap truncate`` dropped anything."""
    runs, matches = counters.truncated_runs, counters.truncated_matches
    exact = getattr(counters, "truncated_exact", True)
    if runs or matches or getattr(counters, "events_skipped", 0):
        click.echo(f"kleene: warning: a cap was reached and --on-cap truncate dropped "
                   f"{'' if exact else 'at least '}{matches:,} matches"
                   f"{'' if exact else ' (a lower bound: they were not enumerated)'} and "
                   f"{runs:,} partial matches (runs); the output is incomplete", err=True)


def _engine_call(engine: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into an engine; anything but a kleene error becomes an EngineError (exit 3)."""
    try:
        return fn(*args, **kwargs)
    except KleeneError:
        raise
    except MemoryError:
        raise EngineError("out of memory while matching; narrow the query (WITHIN, "
                          "PARTITION BY, a stricter strategy) or split the input") from None
    except Exception as e:
        traceback.print_exc()
        raise EngineError(f"engine {engine!r} failed: {type(e).__name__}: {e} "
                          "(traceback above: if it ends in a --udf function, fix that "
                          "function; otherwise it is a bug in kleene)") from None


def _run_streaming(compiled: Any, stream: Any, *, output: str | None, fmt: str, count: bool,
                   lateness_s: float, quiet: bool, progress: _Progress,
                   late_output: str | None = None,
                   clock: tuple[float, float], caps: dict[str, Any],
                   explicit_unit: bool = False, unread: UnreadColumns | None = None,
                   touts: Timeouts | None = None, workers: int | None = None) -> None:
    """``run --stream``: push each chunk through the engine's runtime as it is read and write
    matches as they come (memory bounded by the chunk size and the engine's live state).
    ``--workers N`` (given explicitly; the default streams in one process) spreads a
    PARTITION BY query's partitions over N processes (kleene.runtime.parallel.ParallelStream)."""
    from ..events.writers import MatchWriter, open_writer
    from ..runtime.engine import Runtime

    is_set = hasattr(compiled, "queries")
    engine = "automaton" if is_set else compiled.engine
    if not is_set and not compiled.backend.streaming:
        raise QueryError(f"--stream needs an engine with a streaming runtime, not "
                         f"{compiled.engine!r}")
    spread: dict[str, Any] = {}
    label = ""
    if (workers is not None and workers > 1 and not is_set and not count
            and getattr(compiled, "compiled_plan", None) is not None
            and not (touts is not None and touts.on) and caps.get("use_kernel") is not False):
        spread = {"workers": workers}
    runtime = _engine_call(engine, compiled.start,
                           allowed_lateness_us=round(lateness_s * 1_000_000),
                           count_only=count, **caps, **spread)
    if spread:
        label = (f", {runtime.workers} workers" if runtime.workers > 1
                 else f", 1 worker: {runtime.reason}")
    elif workers is not None and workers > 1:
        label = ", 1 worker: --stream spreads only a plain PARTITION BY query's matches"
    if count:
        runtime.count_placeholders = False  # exact counts may be huge: read the counter
    elif isinstance(runtime, Runtime) and not (touts is not None and touts.on):
        # matches handed over as columns or blocks (the chain's SEQ(a, b+, c) join): the
        # writer expands them a chunk at a time
        runtime.columnar = True
    writer: MatchWriter | None = None
    n_matches = 0
    # a set, and keyed workers, write their matches a piece at a time (push_to: no list of
    # a call's matches; the workers' pieces merged as they come)
    pieces = (is_set or bool(spread)) and not count

    def emit(matches: list[Any]) -> None:
        nonlocal writer, n_matches
        if touts is not None and touts.on:
            before = touts.count
            matches = touts.split(matches, _output_time(stream.time, explicit_unit))
            n_matches -= (touts.count - before) if touts.path is None else 0
        n_matches += len(matches)
        if count:
            return
        if writer is None:
            writer = open_writer(target, fmt, _output_time(stream.time, explicit_unit),
                                     _output_fields(compiled))
            if touts is not None:
                touts.writer(writer)
        writer.write(matches)

    def sink(piece: Any) -> None:
        from ..events.matchtable import MatchTable

        emit(MatchTable([piece]))  # type: ignore[arg-type]  # a Sequence[Match]

    with output_target(output, keep_partial=True) as target:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # truncation: reported below
                checked = False
                for batch in stream:
                    if not checked and len(batch):  # the columns, and the types seen so far
                        _check_schema(compiled, batch, stream.report.source or "the input",
                                      types=True,  # --event-type: every row has that type
                                      complete=stream.options.event_type is not None)
                        checked = True
                    if unread is not None:
                        unread.count(batch)
                    if pieces:
                        _engine_call(engine, runtime.push_to, batch, sink)
                    else:
                        emit(_engine_call(engine, runtime.push, batch))
                    progress.show(f"streaming: {_percent(stream)}{stream.report.events:,} "
                                  f"events, {n_matches:,} matches")
                if pieces:
                    _engine_call(engine, runtime.close_to, sink)
                else:
                    emit(_engine_call(engine, runtime.close))
            if not is_set:
                _report_truncation(runtime.counters)
            if unread is not None:
                unread.warn()
            if count:
                n_matches = runtime.counters.matches
                click.echo(n_matches)
            elif writer is None:
                writer = open_writer(target, fmt, _output_time(stream.time, explicit_unit),
                                     _output_fields(compiled))
        finally:
            if writer is not None:
                writer.close()
            if touts is not None:
                touts.close()
            progress.clear()
    if late_output is not None:
        _write_late(runtime, late_output, lateness_s)
    report = stream.report
    if report.rows_read == 0:
        raise InputError("no events: the input has no data rows", path=report.source)
    finished = time.perf_counter()
    if not quiet:
        started, compiled_at = clock
        _summary(report, n_matches, _engine_label(compiled) + label,
                 (started, compiled_at, finished, finished, finished),
                 late=int(runtime.late_count if is_set else runtime.counters.late_events),
                 lateness_s=lateness_s, per_query=dict(runtime.counts) if is_set else None,
                 timeouts=(touts.count, touts.path) if touts is not None and touts.on
                 else None)


def _write_late(runtime: Any, path: str, lateness_s: float) -> None:
    """The late rows of a streaming run as JSON Lines (``--late-output``)."""
    import json

    late = runtime.late
    reason = (f"late: behind the newest earlier event by more than {lateness_s:g} s "
              "(--allowed-lateness)")
    with output_target(path) as target:
        assert target is not None
        try:
            f = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            raise InputError(f"cannot write late rows to {path}: {e.strerror or e}") from None
        with f:
            if late is not None:
                time_info = late.time
                for row in late.rows():
                    rec = {"row": row.pop("__id"),
                           "time": time_info.to_output(row.pop("__ts")),
                           "type": row.pop("__type"), "reason": reason,
                           "attributes": row}
                    f.write(json.dumps(rec, default=str) + "\n")


def spark_options(*, output: str | None, fmt: str, input_format: str | None,
                  time_col: str | None, type_col: str | None, event_type: str | None,
                  id_col: str | None, time_unit: str, column_types: dict[str, str],
                  delimiter: str | None, dialect: str | None,
                  udfs: dict[str, Callable[..., Any]], engine: str, count_only: bool,
                  master: str | None, partitions: int | None,
                  caps: dict[str, Any] | None = None, time_format: str | None = None,
                  reader: str = "auto", epoch_times: bool = False,
                  null_values: str | None = None) -> dict[str, Any]:
    """The keyword arguments ``run --spark`` passes to :func:`kleene.spark.cli.run_query`
    (a test binds them to its signature, so the two cannot drift apart silently).

    ``caps``: ``on_cap`` and ``max_matches_per_call`` as for the embedded engine; with
    ``on_cap="truncate"`` a :class:`kleene.spark.batch.CapReport` collects what was dropped."""
    caps = dict(caps or {})
    report = None
    if caps.get("on_cap") == "truncate":
        from ..spark.batch import CapReport

        report = CapReport()
    return {"output": output, "fmt": fmt, "input_format": input_format, "time_col": time_col,
            "type_col": type_col, "event_type": event_type, "id_col": id_col,
            "time_unit": time_unit, "column_types": column_types, "delimiter": delimiter,
            "dialect": dialect, "udfs": udfs, "engine": engine, "count_only": count_only,
            "master": master, "partitions": partitions, "caps": caps, "cap_report": report,
            "time_format": time_format, "reader": reader, "epoch_times": epoch_times,
            "null_values": null_values}


def _run_spark(query: Any, input_path: str, *, on_bad_row: str, quiet: bool,
               verbose: bool = False, **options: Any) -> None:
    """``run --spark``: the same query and options, evaluated by kleene.spark."""
    try:
        from ..spark.cli import run_query
    except ImportError as e:
        raise MissingExtraError(f"--spark needs the spark extra: pip install 'kleene[spark]' "
                                f"({e})") from None
    output = options.get("output")
    # a local output is written as PATH.partial and renamed when the run succeeds, removed
    # when it fails (as the embedded engine's, output_target); a remote one (s3://, hdfs://)
    # is Spark's own commit
    local = output is not None and output != "-" and "://" not in output
    with output_target(output if local else None) as target:
        result = run_query(query, input_path, on_bad_row=on_bad_row, verbose=verbose,
                           warn=lambda m: click.echo(f"kleene: warning: {m}", err=True),
                           **{**options, "output": target if local else output})
    if local:
        result["output"] = output
    report = options.get("cap_report")
    if report is not None:  # --on-cap truncate: the counts the tasks sent back
        _report_truncation(report)
    if not quiet:
        seconds = float(result.get("seconds", 0.0))
        events = int(result.get("events", 0))
        rate = events / seconds if seconds > 0 else 0.0
        lines = [
            "── kleene run summary (spark) " + "─" * 32,
            f"events read     {events:>12,}   from {result.get('source')} "
            f"({result.get('format')}, {result.get('files', 1)} file(s))",
            f"bad rows        {int(result.get('skipped', 0)):>12,}   (skipped)",
            f"matches         {int(result.get('matches', 0)):>12,}   (engine "
            f"{result.get('engine')}, plan {result.get('plan')}, master {result.get('master')})",
        ]
        if result.get("timeouts") is not None:
            lines.append(f"timeouts        {int(result['timeouts']):>12,}   (partial matches "
                         "whose window expired; in the output)")
        if report is not None:
            lines.append(f"dropped (caps)  {int(result.get('truncated_matches', 0)):>12,}   "
                         f"matches, {int(result.get('truncated_runs', 0)):,} runs "
                         "(--on-cap truncate)")
        lines += [
            f"time            {seconds:>12.2f} s",
            f"throughput      {rate:>12,.0f}   events/s",
            f"peak memory     {_peak_memory_mb():>12,.0f}   MB (driver)",
        ]
        lines += [f"  e.g. {ex}" for ex in result.get("bad_examples", [])]
        if events < SPARK_SMALL_EVENTS:
            lines.append(f"kleene: note: {events:,} events: the embedded engine (without "
                         f"--spark) is faster for inputs under {SPARK_SMALL_EVENTS:,} events "
                         "(Spark's start-up alone takes longer; docs/spark.md, 'When to use "
                         "--spark')")
        click.echo("\n".join(lines), err=True)


def _summary(report: Any, n_matches: int, engine: str,
             clock: tuple[float, float, float, float, float], *, late: int | None = None,
             lateness_s: float = 0.0, per_query: dict[str, int] | None = None,
             timeouts: tuple[int, str | None] | None = None) -> None:
    started, compiled_at, read_done, match_done, finished = clock
    seconds = finished - started
    rate = report.events / seconds if seconds > 0 else 0.0
    lines = [
        "── kleene run summary " + "─" * 40,
        f"events read     {report.events:>12,}   from {report.source} ({report.format})",
    ]
    bad = f"{report.skipped:,} skipped, {report.dead_lettered:,} dead-lettered"
    lines.append(f"bad rows        {report.bad_rows:>12,}   ({bad})")
    if report.nulled:
        lines.append(f"null values     {report.nulled:>12,}   (read as NULL: --null-values)")
    if report.blank_lines:
        lines.append(f"blank lines     {report.blank_lines:>12,}   (empty CSV lines: no events, "
                     "but each takes an id, so ids stay line indices)")
    if late is None:
        lines.append(f"out of order    {report.out_of_order:>12,}   (rows behind an earlier "
                     "timestamp; sorted before matching)")
    else:
        lines.append(f"out of order    {report.out_of_order:>12,}   (rows behind an earlier "
                     "timestamp)")
        lines.append(f"late            {late:>12,}   (behind the watermark with "
                     f"{lateness_s:g} s allowed lateness: counted, not matched)")
    lines.append(f"matches         {n_matches:>12,}   (engine {engine})")
    if timeouts is not None:
        n, where = timeouts
        lines.append(f"timeouts        {n:>12,}   (partial matches whose window expired; "
                     f"{'in the output' if where is None else 'written to ' + where})")
    if _TEMPORARY:
        t = _TEMPORARY
        lines.append(f"temporary       {t['created']:>12,}   matches created ({t['copied']:,} "
                     f"copied, {t['live']:,} live at the end)")
    for name, k in (per_query or {}).items():
        lines.append(f"  {name:<13} {k:>12,}")
    if late is None:
        lines.append(f"time            {seconds:>12.2f} s  (compile {compiled_at - started:.2f} "
                     f"s, read {read_done - compiled_at:.2f} s, match "
                     f"{match_done - read_done:.2f} s, write {finished - match_done:.2f} s)")
    else:
        lines.append(f"time            {seconds:>12.2f} s  (compile {compiled_at - started:.2f} "
                     f"s, read + match + write {finished - compiled_at:.2f} s, streamed)")
    lines.append(f"throughput      {rate:>12,.0f}   events/s")
    lines.append(f"peak memory     {_peak_memory_mb():>12,.0f}   MB")
    for ex in report.bad_examples:
        lines.append(f"  e.g. {ex}")
    click.echo("\n".join(lines), err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point (``kleene``, ``python -m kleene``)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    if "--spark" not in args:
        _skip_pandas_probe()
    try:
        cli.main(args=args, prog_name="kleene")
    finally:
        if argv is None:  # the process's own command (not a caller's main([...]))
            _no_collection_at_exit()


def _no_collection_at_exit() -> None:
    """Spare the leaving process the interpreter's last full garbage collection: it scans
    every object still alive (the imported modules', a run's events and matches) only to
    free memory the exit frees anyway -- 0.04-0.06 s of every ``kleene`` command here
    (docs/benchmarks.md, session 13). ``gc.freeze`` moves them out of the collector's view;
    reference counting, ``atexit`` and the closing of files still run. Every output was
    written and closed before this (the command has returned)."""
    gc.disable()
    gc.freeze()


__all__ = ["EXIT_INPUT", "EXIT_OK", "EXIT_QUERY", "EXIT_RUNTIME", "cli", "load_query",
           "load_udfs", "main"]
