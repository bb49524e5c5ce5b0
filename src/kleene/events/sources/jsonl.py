"""JSON Lines files: one JSON object per line, typed by Arrow's JSON reader; a block Arrow
cannot parse is read line by line, and each line that is not an object is a bad row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..badrows import BadRow
from .base import FileSource, Raw, columns, open_stream, read_block


def _json_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _fallback(chunk: bytes, first_line: int, start: int) -> Raw:
    """Parse a JSON Lines chunk line by line (the slow path: only when Arrow's parser failed)."""
    records: list[dict[str, Any]] = []
    ids: list[int] = []
    bad: list[BadRow] = []
    row = start
    for k, raw_line in enumerate(chunk.split(b"\n")):
        text = raw_line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        line = first_line + k
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            bad.append(BadRow(row, f"not valid JSON: {e.msg} at character {e.pos + 1}",
                              line=line, text=text[:200]))
        else:
            if isinstance(value, dict):
                records.append(value)
                ids.append(row)
            else:
                bad.append(BadRow(row, "not a JSON object (JSON Lines needs one {...} per line)",
                                  line=line, text=text[:200]))
        row += 1
    table, text_cols = columns(records, _json_text)
    return Raw(table, np.array(ids, dtype=np.int64), text_cols, bad, row - start)


def _read_block(pj: Any, chunk: bytes, schema: pa.Schema | None) -> pa.Table:
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
    return pj.read_json(pa.BufferReader(chunk),
                        read_options=pj.ReadOptions(use_threads=False, block_size=len(chunk) + 1),
                        parse_options=parse)


class JsonlSource(FileSource):
    """JSON Lines (``.jsonl``, ``.ndjson``, ``.json``), in blocks of whole lines."""

    format = "jsonl"
    extensions = (".jsonl", ".ndjson", ".json")

    def chunks(self) -> Iterator[Raw]:
        import pyarrow.json as pj

        path, opts = self.path, self.options
        stream = open_stream(path, self.tracker)
        schema: pa.Schema | None = None
        leftover = b""
        start = 0
        line = 1
        seen_any = False
        try:
            while True:
                data = read_block(stream, opts.block_bytes, path)
                buf = leftover + data
                if not data:
                    chunk, leftover = buf, b""
                else:
                    cut = buf.rfind(b"\n")
                    if cut < 0:
                        leftover = buf
                        continue
                    chunk, leftover = buf[: cut + 1], buf[cut + 1:]
                if chunk.strip():
                    seen_any = True
                    try:
                        table = _read_block(pj, chunk, schema)
                        if schema is None and any(pa.types.is_timestamp(f.type)
                                                  for f in table.schema):
                            # Arrow turns ISO strings into timestamps and forgets whether they
                            # had a zone; keep them as text so the time column is read like CSV's
                            as_text = pa.schema([(f.name, pa.string()) for f in table.schema
                                                 if pa.types.is_timestamp(f.type)])
                            table = _read_block(pj, chunk, as_text)
                        n = table.num_rows
                        ids = np.arange(start, start + n, dtype=np.int64)
                        raw = Raw(table, ids, frozenset(), [], n)
                    except pa.ArrowException:
                        raw = _fallback(chunk, line, start)
                    if schema is None and raw.table.num_columns:
                        schema = pa.schema([f for f in raw.table.schema
                                            if f.name not in raw.text_cols])
                    yield raw
                    start += raw.rows
                line += chunk.count(b"\n")
                if not data:
                    break
        finally:
            stream.close()
        if not seen_any:
            raise InputError("the file is empty (expected one JSON object per line)", path=path)


__all__ = ["JsonlSource"]
