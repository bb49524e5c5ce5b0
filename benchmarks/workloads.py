"""The five workloads of issue 5. Each returns rows (one per engine / variant) and notes.

A workload whose pieces do not exist yet (the engine, the CLI, the Flink venv, the data)
yields rows with ``status = "not available: <reason>"`` instead of failing the whole run.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import datasets, flink_venv, measure, queries

BENCH_DIR = datasets.BENCH_DIR
REPO = BENCH_DIR.parent
#: command prefix that pins a process (and its threads and children) to one CPU
PIN = ["taskset", "-c", "0"]


@dataclass
class Ctx:
    """Options of one harness run."""

    quick: bool = False
    repeats: int = 3
    flink: bool = True
    setup_flink: bool = True
    stock_events: int | None = None
    #: also run the stock engines pinned to one CPU with taskset (kleene vs Flink on one core)
    pin: bool = False
    traffic_sizes: tuple[int | None, ...] | None = None
    #: per-run scratch folder (query files, match outputs), so concurrent runs never collide
    work: Path = field(default_factory=lambda: BENCH_DIR / ".data" / "run" / f"{os.getpid()}")
    python: str = sys.executable
    #: address-space cap of every kleene / hand-loop child (not the JVM): the machine is shared
    mem_limit_mb: int = 8000
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)


@dataclass
class Row:
    """One engine / variant of one workload: medians over the repeats."""

    workload: str
    variant: str
    engine: str
    events: int | None = None
    seconds: float | None = None
    runs_s: list[float] = field(default_factory=list)
    matches: int | None = None
    peak_rss_mb: float | None = None
    load_1min: list[float] = field(default_factory=list)
    status: str = "ok"
    timing: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def events_per_s(self) -> float | None:
        if self.events and self.seconds:
            return self.events / self.seconds
        return None

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("workload", "variant", "engine", "events", "seconds",
                                           "runs_s", "matches", "peak_rss_mb", "load_1min",
                                           "status", "timing", "extra")}
        d["events_per_s"] = self.events_per_s
        return d


@dataclass
class Outcome:
    """What a workload returns: its rows and free-text findings (ratios, checks)."""

    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# availability of the pieces
# ---------------------------------------------------------------------------------------------


def engine_missing() -> str | None:
    """None when ``kleene.compile(...).run`` has a backend to call, else why not."""
    try:
        from kleene.backends import DEFAULT_BACKEND, get_backend

        get_backend(DEFAULT_BACKEND)
    except Exception as e:  # any import problem means "not available"
        return f"engine: {type(e).__name__}: {e}"
    return None


def _kleene_exe() -> str | None:
    cand = Path(sys.executable).parent / "kleene"
    return str(cand) if cand.exists() else shutil.which("kleene")


_CLI_HELP: dict[str, str] = {}


def cli_missing() -> str | None:
    """None when ``kleene run --help`` works, else why not."""
    exe = _kleene_exe()
    if exe is None:
        return "CLI: no `kleene` executable (pip install -e . creates it)"
    if "run" not in _CLI_HELP:
        r = subprocess.run([exe, "run", "--help"], capture_output=True, text=True)
        if r.returncode != 0:
            return "CLI: `kleene run --help` failed: " + (r.stderr.strip().splitlines()
                                                           or ["?"])[-1][:200]
        _CLI_HELP["run"] = r.stdout
    return None


def cli_command(query_file: Path, csv: Path, out: Path, *, time_col: str,
                event_type: str | None = None, type_col: str | None = None,
                id_col: str | None = None) -> list[str]:
    """``kleene run`` for a CSV, using only the options that ``kleene run --help`` lists."""
    exe = _kleene_exe() or "kleene"
    helptext = _CLI_HELP.get("run", "")
    cmd = [exe, "run", str(query_file), "--input", str(csv), "--time-col", time_col]
    if event_type:
        cmd += ["--event-type", event_type]
    if type_col:
        cmd += ["--type-col", type_col]
    if id_col and "--id-col" in helptext:
        cmd += ["--id-col", id_col]
    cmd += ["--output", str(out)]
    return cmd


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _median(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return statistics.median(xs) if xs else None


def _query_file(ctx: Ctx, name: str, text: str) -> Path:
    ctx.work.mkdir(parents=True, exist_ok=True)
    path = ctx.work / f"{name}.kleene"
    path.write_text(text)
    return path


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))


def _fill(row: Row, ms: list[measure.Measurement], seconds: list[float]) -> Row:
    row.runs_s = [round(s, 4) for s in seconds]
    row.seconds = _median(seconds)
    row.peak_rss_mb = round(max(m.peak_rss_mb for m in ms), 1) if ms else None
    row.load_1min = [m.load_before[0] for m in ms]
    return row


def _error(m: measure.Measurement) -> str:
    if "error" in m.result:
        return f"error: {m.result['error']}"[:400]
    tail = m.stderr_tail.strip().splitlines()
    return f"error: exit {m.returncode}: {tail[-1] if tail else ''}"[:400]


def _repeat(ctx: Ctx, cmd: list[str], *, sample_tree: bool = False,
            timeout: float | None = None) -> tuple[list[measure.Measurement], str | None]:
    ms: list[measure.Measurement] = []
    for _ in range(ctx.repeats):
        m = measure.run(cmd, cwd=REPO, sample_tree=sample_tree, timeout=timeout,
                        mem_limit_mb=ctx.mem_limit_mb)
        ms.append(m)
        if not m.ok:
            return ms, _error(m)
    return ms, None


def run_api(ctx: Ctx, workload: str, variant: str, query: Path, csv: Path, *, time_col: str,
            events: int, event_type: str | None = None, type_col: str | None = None,
            id_col: str | None = None, options: dict[str, Any] | None = None,
            runtime: bool = False, stream: bool = False, repeats: int | None = None,
            timeout: float | None = 1800, mem_limit_mb: int | None = None) -> Row:
    """Engine-only time of ``kleene.compile(q).run(batch)`` in a child process; with
    ``stream``, read + ``Runtime.push`` block by block (bounded memory if the state is)."""
    row = Row(workload, variant, "kleene API (engine only)", events,
              timing="CompiledQuery.run(batch) only; reading and compiling excluded")
    if stream:
        row.engine = "kleene API, streamed"
        row.timing = ("pyarrow.csv.open_csv blocks of 4 MB, each pushed to "
                      "CompiledQuery.start(); reading + matching + close()")
    reason = engine_missing()
    if reason:
        row.status = f"not available: {reason}"
        return row
    cmd = [ctx.python, "-m", "benchmarks.child", "--query-file", str(query), "--csv", str(csv),
           "--time-col", time_col]
    for flag, val in (("--event-type", event_type), ("--type-col", type_col),
                      ("--id-col", id_col)):
        if val:
            cmd += [flag, val]
    for k, v in (options or {}).items():
        cmd += ["--option", f"{k}={json.dumps(v)}"]
    if stream:
        cmd.append("--stream")
    if runtime:
        cmd.append("--runtime")
        row.timing = "Runtime push(batch) + close() only; reading and compiling excluded"
    ms: list[measure.Measurement] = []
    for _ in range(repeats or ctx.repeats):
        m = measure.run(cmd, cwd=REPO, timeout=timeout,
                        mem_limit_mb=mem_limit_mb or ctx.mem_limit_mb)
        ms.append(m)
        if "error" in m.result or (not m.ok and not m.result):
            row.status = _error(m)
            if "does not support" in row.status:  # a feature the engine lacks so far
                row.status = "not available: " + row.status.removeprefix("error: ")
            row.extra["traceback_tail"] = (m.result.get("traceback") or m.stderr_tail)[-800:]
            break
    good = [m for m in ms if "run_s" in m.result]
    _fill(row, ms, [m.result["run_s"] for m in good])
    if good:
        last = good[-1].result
        row.matches = last.get("matches")
        for key in ("read_s", "compile_s"):
            if key in last:
                row.extra[key] = _median(m.result[key] for m in good)
        if "counters" in last:
            row.extra["counters"] = {k: v for k, v in last["counters"].items() if v}
        if "capacity_error" in last:
            row.extra["capacity_error"] = last["capacity_error"]
            row.extra["capacity_error_attrs"] = last.get("capacity_error_attrs", {})
    return row


def run_cli(ctx: Ctx, workload: str, variant: str, query: Path, csv: Path, out: Path, *,
            time_col: str, events: int, event_type: str | None = None,
            type_col: str | None = None, id_col: str | None = None,
            stream: bool = False) -> Row:
    """The whole ``kleene run`` process: start-up, reading, matching, writing JSON Lines.
    ``stream`` adds ``--stream`` (chunks pushed through the runtime as they are read)."""
    row = Row(workload, variant, "kleene CLI --stream (whole run)" if stream
              else "kleene CLI (whole run)", events,
              timing="wall time of the `kleene run` process (start, read, match, write)")
    reason = cli_missing() or engine_missing()
    if not reason and stream and "--stream" not in _CLI_HELP.get("run", ""):
        reason = "CLI: `kleene run` has no --stream option"
    if reason:
        row.status = f"not available: {reason}"
        return row
    cmd = cli_command(query, csv, out, time_col=time_col, event_type=event_type,
                      type_col=type_col, id_col=id_col) + (["--stream"] if stream else [])
    row.extra["command"] = " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd)
                                    ).replace(str(REPO) + "/", "")
    ms, err = _repeat(ctx, cmd, timeout=3600)
    if err:
        row.status = err
    _fill(row, [m for m in ms if m.ok] or ms, [m.wall_s for m in ms if m.ok])
    if not err:
        row.matches = _count_lines(out)
        # The CLI's own summary on stderr splits the time (compile, read, match, write).
        for line in ms[-1].stderr_tail.splitlines():
            if line.startswith(("time ", "peak memory")):
                row.extra["cli_summary_" + line.split()[0]] = " ".join(line.split()[1:])
    return row


def _stock_match_set(path: Path) -> set[tuple[int, tuple[int, ...], int]]:
    out = set()
    with path.open() as f:
        for line in f:
            m = json.loads(line)["match"]
            out.add((int(m["a"]), tuple(int(x) for x in m["b"]), int(m["c"])))
    return out


def _compare(name_a: str, a: set[Any], name_b: str, b: set[Any]) -> dict[str, Any]:
    return {"equal": a == b, name_a: len(a), name_b: len(b),
            f"only_{name_a}": sorted(a - b)[:5], f"only_{name_b}": sorted(b - a)[:5],
            f"only_{name_a}_count": len(a - b), f"only_{name_b}_count": len(b - a)}


# ---------------------------------------------------------------------------------------------
# 1. stock: hand loop, kleene CLI and API, PyFlink MATCH_RECOGNIZE
# ---------------------------------------------------------------------------------------------


def stock(ctx: Ctx) -> Outcome:
    """1M stock events: hand loop vs kleene CLI/API vs PyFlink MATCH_RECOGNIZE."""
    o = Outcome()
    n = ctx.stock_events or (100_000 if ctx.quick else 1_000_000)
    csv = datasets.stock_csv(n)
    q = _query_file(ctx, "stock", queries.STOCK)
    hl_out = ctx.work / "stock.handloop.jsonl"
    cli_out = ctx.work / "stock.kleene.jsonl"

    ctx.log(f"stock: hand loop on {n:,} events")
    hl = Row("1 stock", "hand-written loop", "Python hand loop (whole run)", n,
             timing="wall time of the `python -m benchmarks.handloop` process "
                    "(start, read, match, write)")
    ms, err = _repeat(ctx, [ctx.python, "-m", "benchmarks.handloop", str(csv), str(hl_out)])
    if err:
        hl.status = err
    _fill(hl, ms, [m.wall_s for m in ms if m.ok])
    hl.matches = ms[-1].result.get("matches") if ms else None
    hl.extra["in_process_s"] = _median(m.result["seconds"] for m in ms if "seconds" in m.result)
    o.rows.append(hl)

    ctx.log("stock: kleene CLI")
    cli = run_cli(ctx, "1 stock", "CLI, CSV in, JSONL out", q, csv, cli_out, time_col="ts",
                  event_type="Stock", id_col="id", events=n)
    o.rows.append(cli)
    if cli.status == "ok" and hl.status == "ok":
        cmp = _compare("handloop", _stock_match_set(hl_out), "kleene", _stock_match_set(cli_out))
        o.checks["stock: kleene CLI matches == hand loop matches"] = cmp
        if cli.events_per_s and hl.events_per_s:
            r = cli.events_per_s / hl.events_per_s
            o.notes.append(f"stock: kleene CLI / hand loop = {r:.2f} (target >= 0.5)")
    if ctx.pin and shutil.which("taskset"):
        for label, base in (("hand-written loop, pinned to 1 CPU",
                             [ctx.python, "-m", "benchmarks.handloop", str(csv), str(hl_out)]),
                            ("CLI, pinned to 1 CPU",
                             cli_command(q, csv, cli_out, time_col="ts", event_type="Stock",
                                         id_col="id") if cli.status == "ok" else None)):
            if base is None:
                continue
            eng = hl.engine if label.startswith("hand") else cli.engine
            row = Row("1 stock", label, eng, n, timing="wall time of the process under "
                      "`taskset -c 0`")
            ms, err = _repeat(ctx, [*PIN, *base])
            if err:
                row.status = err
            _fill(row, ms, [m.wall_s for m in ms if m.ok])
            row.matches = _count_lines(hl_out if label.startswith("hand") else cli_out)
            o.rows.append(row)
    ctx.log("stock: kleene API")
    api = run_api(ctx, "1 stock", "Python API", q, csv, time_col="ts", event_type="Stock",
                  id_col="id", events=n)
    o.rows.append(api)

    if ctx.flink:
        flinks = _flink(ctx, n, hl_out if hl.status == "ok" else None, o)
        o.rows.extend(flinks)
        for kr in (cli, api):
            if not kr.events_per_s:
                continue
            for fr in flinks:
                if not fr.events_per_s:
                    continue
                o.notes.append(f"stock: {kr.engine} / {fr.engine} {fr.variant} = "
                               f"{kr.events_per_s / fr.events_per_s:.1f}x")
    return o


def _flink(ctx: Ctx, n: int, handloop_out: Path | None, o: Outcome) -> list[Row]:
    configs = [("streaming", 1, False), ("streaming", 2, False), ("batch", 1, False),
               ("batch", 2, False)]
    if ctx.quick:
        configs = [("streaming", 1, False)]
    if ctx.pin:
        configs.append(("streaming", 1, True))
    reason = flink_venv.ensure(create=ctx.setup_flink)
    rows = [Row("1 stock", f"MATCH_RECOGNIZE {mode}, parallelism {p}"
                + (", pinned to 1 CPU" if pin else ""),
                "PyFlink 2.3 MATCH_RECOGNIZE (warm job)", n) for mode, p, pin in configs]
    if reason:
        for r in rows:
            r.status = f"not available: {reason}"
        return rows
    csv = datasets.stock_csv(n, header=False)
    script = str(BENCH_DIR / "flink_baseline.py")
    for (mode, par, pin), row in zip(configs, rows, strict=True):
        ctx.log(f"stock: PyFlink {mode} p={par}{' pinned' if pin else ''}")
        cmd = [*(PIN if pin else []), str(flink_venv.PY), script, "bench", "--csv", str(csv),
               "--mode", mode, "--parallelism", str(par), "--repeats", str(ctx.repeats)]
        if (mode, par, pin) == configs[0]:
            cmd.append("--count")
        m = measure.run(cmd, cwd=REPO, sample_tree=True, timeout=3600)
        row.timing = ("median of the job time (execute_sql .. wait) of the jobs after one "
                      "warm-up job, one JVM; excludes JVM start and warm-up")
        if not m.ok or "runs_s" not in m.result:
            row.status = _error(m)
            continue
        res = m.result
        _fill(row, [m], res["runs_s"])
        row.load_1min = [m.load_before[0], m.load_after[0]]
        row.matches = res.get("matches")
        row.extra.update(warmup_s=res["warmup_s"], scan_job_s=res["scan_s"],
                         env_create_s=res["env_create_s"], process_s=m.wall_s)
    # The match sets: SKIP TO NEXT ROW (the equivalent) and SKIP PAST LAST ROW (the count only).
    for skip in ("next-row", "past-last"):
        out = ctx.work / f"flink_{n}_{skip}.csv"
        m = measure.run([str(flink_venv.PY), script, "dump", "--csv", str(csv), "--out",
                         str(out), "--skip", skip], cwd=REPO, sample_tree=True, timeout=3600)
        if not m.ok:
            o.checks[f"flink dump {skip}"] = _error(m)
            continue
        fl = set()
        with out.open() as f:
            for line in f:
                a, b0, b1, c = (int(x) for x in line.split(","))
                fl.add((a, b0, b1, c))
        o.checks[f"flink AFTER MATCH {skip} matches"] = len(fl)
        if handloop_out is not None and skip == "next-row":
            hl = {(a, b[0], b[-1], c) for a, b, c in _stock_match_set(handloop_out)}
            o.checks["stock: Flink SKIP TO NEXT ROW matches == hand loop matches"] = _compare(
                "handloop", hl, "flink", fl)
    return rows


# ---------------------------------------------------------------------------------------------
# 2. traffic congestion on Aarhus; 3. selective query
# ---------------------------------------------------------------------------------------------


def _traffic_sizes(ctx: Ctx) -> tuple[int | None, ...]:
    if ctx.traffic_sizes:
        return ctx.traffic_sizes
    return (100_000,) if ctx.quick else (1_000_000, None)


def _traffic_rows(ctx: Ctx, workload: str, qname: str, text: str,
                  sizes: tuple[int | None, ...], *, cli: bool = True,
                  stream: bool = False) -> Outcome:
    o = Outcome()
    q = _query_file(ctx, qname, text)
    reason = datasets.aarhus_available()
    for size in sizes:
        n = size or datasets.AARHUS_TOTAL
        label = f"{n:,} events" + ("" if size else " (all)")
        if reason:
            for eng in ("kleene CLI (whole run)", "kleene API (engine only)"):
                o.rows.append(Row(workload, label, eng, n, status=f"not available: {reason}"))
            continue
        csv = datasets.aarhus_csv(size)
        ctx.log(f"{workload}: {label}")
        if cli:
            o.rows.append(run_cli(ctx, workload, label, q, csv, ctx.work / f"{qname}.jsonl",
                                  time_col="TIMESTAMP", event_type="Traffic", events=n))
        if cli and stream:
            o.rows.append(run_cli(ctx, workload, label, q, csv, ctx.work / f"{qname}.jsonl",
                                  time_col="TIMESTAMP", event_type="Traffic", events=n,
                                  stream=True))
        o.rows.append(run_api(ctx, workload, label, q, csv, time_col="TIMESTAMP",
                              event_type="Traffic", events=n))
        if stream:
            o.rows.append(run_api(ctx, workload, label, q, csv, time_col="TIMESTAMP",
                                  event_type="Traffic", events=n, stream=True))
    return o


def traffic(ctx: Ctx) -> Outcome:
    """Aarhus congestion SEQ(a, b+, c), skip-till-next-match, at 1M and 7.1M events."""
    o = _traffic_rows(ctx, "2 traffic congestion", "traffic", queries.TRAFFIC,
                      _traffic_sizes(ctx), stream=True)
    for eng in ("kleene CLI (whole run)", "kleene CLI --stream (whole run)",
                "kleene API (engine only)", "kleene API, streamed"):
        rs = [(r.events or 0, r.peak_rss_mb) for r in o.rows
              if r.engine == eng and r.peak_rss_mb]
        if len(rs) == 2:
            (n0, m0), (n1, m1) = rs
            o.notes.append(f"traffic, {eng}: peak RSS {m0:.0f} MB at {n0:,} events vs "
                           f"{m1:.0f} MB at {n1:,} ({m1 / m0:.2f}x)")
    return o


def selective(ctx: Ctx) -> Outcome:
    """Selective filters (<1% pass) on all Aarhus events: vectorized filtering."""
    sizes: tuple[int | None, ...] = (1_000_000,) if ctx.quick else (None,)
    return _traffic_rows(ctx, "3 selective", "selective", queries.SELECTIVE, sizes)


# ---------------------------------------------------------------------------------------------
# 4. AND of three types + negation vs the OR of its 6 permutations
# ---------------------------------------------------------------------------------------------


def and_or(ctx: Ctx) -> Outcome:
    """AND of three types + negation vs the OR of its 6 permutations."""
    o = Outcome()
    n = 100_000 if ctx.quick else 1_000_000
    csv = datasets.market_csv(n)
    for name, text, variant in (("and3", queries.AND3, "AND(Buy, Sell, Quote), NOT Cancel, Trade"),
                                ("or6", queries.OR6, "OR of the 6 SEQ permutations")):
        ctx.log(f"and/or: {name}")
        q = _query_file(ctx, name, text)
        o.rows.append(run_api(ctx, "4 AND vs OR", variant, q, csv, time_col="ts",
                              type_col="type", id_col="id", events=n))
    a, b = o.rows
    if a.matches is not None and b.matches is not None:
        o.checks["and3 matches == or6 matches"] = {"equal": a.matches == b.matches,
                                                   "and3": a.matches, "or6": b.matches}
    if a.seconds and b.seconds:
        o.notes.append(f"AND vs OR: OR-of-permutations takes {b.seconds / a.seconds:.2f}x "
                       "the AND's engine time")
    return o


# ---------------------------------------------------------------------------------------------
# 5. skip-till-any-match Kleene explosion and the cap
# ---------------------------------------------------------------------------------------------


def explosion(ctx: Ctx) -> Outcome:
    """skip-till-any-match Kleene whose match count explodes; the cap."""
    o = Outcome()
    scale = 4 if ctx.quick else 1
    # Per symbol an event comes about every 5 s, so a window W holds ~W/5 s events of a symbol
    # and the number of b-subsets between a and c grows as 2^(W/5 s).
    for n, window, options, label in (
            (20_000, "20 seconds", {}, "WITHIN 20 s"),
            (20_000, "20 seconds", {"count_only": True}, "WITHIN 20 s, count_only"),
            (20_000, "60 seconds", {}, "WITHIN 60 s, default caps (on_cap=error)"),
            (5_000, "60 seconds", {"on_cap": "truncate", "count_only": True,
                                   "max_runs_per_partition": 1000},
             "WITHIN 60 s, on_cap=truncate, max_runs_per_partition=1000, count_only"),
            # building the matches: without max_matches_per_call, one push over 20k events
            # reached 18 GB here; the per-call cap bounds it (peak RSS ~ runs + cap x ~0.7 KB)
            (1_000, "60 seconds", {"on_cap": "truncate"},
             "WITHIN 60 s, on_cap=truncate (default max_matches_per_call=2M)"),
            (1_000, "60 seconds", {"on_cap": "truncate", "max_matches_per_call": 200_000},
             "WITHIN 60 s, on_cap=truncate, max_matches_per_call=200k")):
        n //= scale
        csv = datasets.stock_csv(n)
        name = "explode_" + window.split()[0]
        q = _query_file(ctx, name, queries.EXPLODE.format(window=window))
        ctx.log(f"explosion: {label}")
        row = run_api(ctx, "5 Kleene explosion", label, q, csv, time_col="ts",
                      event_type="Stock", id_col="id", events=n, options=options,
                      runtime=True, repeats=1 if ctx.quick else None, timeout=600,
                      mem_limit_mb=4000)
        matches = row.matches or row.extra.get("counters", {}).get("matches")
        row.matches = matches
        if "capacity_error" in row.extra:
            row.extra["note"] = ("stopped by CapacityError: seconds = time until the error; "
                                 "events/s counts the whole input, not only what was processed")
        if matches and row.seconds:
            row.extra["matches_per_s"] = round(matches / row.seconds)
        o.rows.append(row)
    return o


WORKLOADS: dict[str, Callable[[Ctx], Outcome]] = {
    "stock": stock,
    "traffic": traffic,
    "selective": selective,
    "and-or": and_or,
    "explosion": explosion,
}


def cleanup(ctx: Ctx) -> None:
    """Remove the big match outputs of a run (the query files stay for inspection)."""
    for pattern in ("*.jsonl", "*.csv"):
        for p in ctx.work.glob(pattern):
            os.unlink(p)
