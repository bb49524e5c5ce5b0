"""The measured process for the Python-API variants: read a CSV, compile, run, report.

Run by the harness as ``python -m benchmarks.child --query-file Q --csv F ...`` so that each
measurement has its own process (and so its own peak RSS). Reading is done here with pyarrow
(not timed as engine time): the point of these variants is the engine alone, ``run_s`` is the
time of ``CompiledQuery.run(batch)`` only. Prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv


def _to_batch(table: pa.Table, *, time_col: str, event_type: str | None, type_col: str | None,
              id_col: str | None, first_row: int = 0) -> Any:
    from kleene.events import EventBatch, TimeInfo

    n = table.num_rows
    cols: dict[str, Any] = {
        "__id": (table.column(id_col) if id_col
                 else pa.array(range(first_row, first_row + n), pa.int64())),
        "__ts": table.column(time_col).cast(pa.int64()),
        "__type": (table.column(type_col).cast(pa.string()) if type_col
                   else pa.array([event_type or "Event"] * n, pa.string())),
    }
    for name in table.column_names:
        if name not in (time_col, id_col, type_col):
            cols[name] = table.column(name)
    return EventBatch(pa.table(cols), TimeInfo(kind="datetime"))


def _convert(time_col: str) -> pacsv.ConvertOptions:
    return pacsv.ConvertOptions(column_types={time_col: pa.timestamp("us")})


def load_batch(csv: Path | str, *, time_col: str, event_type: str | None = None,
               type_col: str | None = None, id_col: str | None = None) -> Any:
    """Read a time-ordered CSV into one kleene ``EventBatch`` (naive datetimes, microseconds)."""
    table = pacsv.read_csv(csv, convert_options=_convert(time_col))
    return _to_batch(table, time_col=time_col, event_type=event_type, type_col=type_col,
                     id_col=id_col)


def iter_batches(csv: Path | str, *, time_col: str, event_type: str | None = None,
                 type_col: str | None = None, id_col: str | None = None,
                 block_bytes: int = 4 << 20) -> Iterator[Any]:
    """Stream a time-ordered CSV as ``EventBatch``es of about ``block_bytes`` of text each."""
    reader = pacsv.open_csv(csv, read_options=pacsv.ReadOptions(block_size=block_bytes),
                            convert_options=_convert(time_col))
    first = 0
    for rb in reader:
        yield _to_batch(pa.Table.from_batches([rb]), time_col=time_col, event_type=event_type,
                        type_col=type_col, id_col=id_col, first_row=first)
        first += rb.num_rows


def _parse_option(text: str) -> tuple[str, Any]:
    key, _, raw = text.partition("=")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def _stream(args: argparse.Namespace, result: dict[str, Any]) -> int:
    """Read and push block by block; ``run_s`` covers reading, matching and close()."""
    import kleene

    options = dict(_parse_option(o) for o in args.option)
    text = Path(args.query_file).read_text()
    q = kleene.compile(text, name=Path(args.query_file).stem, **options)
    t0 = time.perf_counter()
    rt = q.start()
    n = matches = 0
    for batch in iter_batches(args.csv, time_col=args.time_col, event_type=args.event_type,
                              type_col=args.type_col, id_col=args.id_col):
        n += len(batch)
        matches += len(rt.push(batch))
    matches += len(rt.close())
    result.update(events=n, run_s=time.perf_counter() - t0, matches=matches)
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--query-file", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--time-col", required=True)
    p.add_argument("--event-type")
    p.add_argument("--type-col")
    p.add_argument("--id-col")
    p.add_argument("--engine", default=None)
    p.add_argument("--option", action="append", default=[],
                   help="KEY=VALUE passed to kleene.compile (VALUE parsed as JSON if it can be)")
    p.add_argument("--runtime", action="store_true",
                   help="use the streaming runtime (start/push/close) with the options, and "
                        "report its counters (truncated runs and matches)")
    p.add_argument("--stream", action="store_true",
                   help="read the CSV block by block and push each block to the streaming "
                        "runtime (memory stays bounded if the engine's state is); the time "
                        "then includes reading")
    p.add_argument("--out", help="write the matches as JSON Lines here")
    args = p.parse_args(argv)
    result: dict[str, Any] = {}
    try:
        import kleene

        if args.stream:
            return _stream(args, result)
        t0 = time.perf_counter()
        batch = load_batch(args.csv, time_col=args.time_col, event_type=args.event_type,
                           type_col=args.type_col, id_col=args.id_col)
        t1 = time.perf_counter()
        result.update(events=len(batch), read_s=t1 - t0)
        options = dict(_parse_option(o) for o in args.option)
        if args.engine:
            options["engine"] = args.engine
        text = Path(args.query_file).read_text()
        q = kleene.compile(text, name=Path(args.query_file).stem, **options)
        t2 = time.perf_counter()
        c2 = time.process_time()
        result["compile_s"] = t2 - t1
        matches: list[Any] | None
        rt = None
        try:
            if args.runtime:
                rt = q.start()
                matches = rt.push(batch)
                matches += rt.close()
            else:
                matches = q.run(batch)
        except kleene.CapacityError as e:
            result.update(run_s=time.perf_counter() - t2, capacity_error=str(e),
                          capacity_error_attrs={k: v for k, v in vars(e).items()
                                                if isinstance(v, (int, float, str))}
                          if hasattr(e, "__dict__") else {})
            matches = None
        else:
            result.update(run_s=time.perf_counter() - t2, matches=len(matches),
                          run_cpu_s=time.process_time() - c2)
        counters = getattr(rt, "counters", None)
        if counters is not None and dataclasses.is_dataclass(counters):
            result["counters"] = dataclasses.asdict(counters)  # type: ignore[arg-type]
        if matches is not None and args.out:
            with open(args.out, "w") as f:
                for m in matches:
                    f.write(json.dumps(m.to_record(batch.time)) + "\n")
    except Exception as e:  # reported, not raised: the harness prints "error: ..."
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()[-2000:]
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
