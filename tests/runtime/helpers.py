"""Shared helpers for the engine tests: small streams, match keys and streaming drivers."""

from __future__ import annotations

import random
from typing import Any

from kleene.api import analyze
from kleene.events import EventBatch, Match
from kleene.plans import evaluate, start
from kleene.runtime.engine import Runtime
from kleene.testing.timeline import events


def random_stream(seed: int, n: int = 40, types: str = "ABC", keys: str = "uv") -> EventBatch:
    """A reproducible stream: types, integer timestamps (with ties), x in 0..9, key k."""
    rng = random.Random(seed)
    ts = 0
    recs = []
    for i in range(n):
        ts += rng.choice([0, 1, 1, 2])
        t = rng.choice(types)
        recs.append({"id": f"{t.lower()}{i}", "type": t, "ts": ts, "x": rng.randint(0, 9),
                     "k": rng.choice(keys)})
    return EventBatch.from_records(recs)


def x_events(spec: str, **x: int) -> EventBatch:
    """``events(spec)`` (``name@ts`` tokens, the type from the name) with attribute ``x`` of
    each named event, e.g. ``x_events("a1@1 b1@2", a1=0, b1=5)``."""
    attrs: dict[str, Any] = {name: {"x": v} for name, v in x.items()}
    return events(spec, **attrs)


def keys(ms: list[Match]) -> list[tuple[Any, ...]]:
    """Comparable form of a match list."""
    return [m.key() for m in ms]


def match_dicts(ms: list[Match]) -> list[tuple[Any, ...]]:
    """Comparable form of a match list (bindings and values as dicts: their order ignored)."""
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


def run_streaming(rt: Runtime, batch: EventBatch, sizes: list[int],
                  watermark_lag_us: int | None = None) -> list[Match]:
    """Push ``batch`` in slices of the given sizes (cycled), advancing the watermark to each
    slice's last timestamp minus ``watermark_lag_us`` when given; then close."""
    out: list[Match] = []
    i = k = 0
    n = len(batch)
    while i < n:
        size = sizes[k % len(sizes)]
        k += 1
        part = batch.slice(i, size)
        i += size
        out += rt.push(part)
        if watermark_lag_us is not None:
            out += rt.advance(int(part.ts[-1]) - watermark_lag_us)
    return out + rt.close()


def bounded(query: str, batch: EventBatch, **options: Any) -> list[Match]:
    """The bounded evaluation."""
    return evaluate(analyze(query), batch, **options)


def streamed(query: str, batch: EventBatch, sizes: list[int], lag: int | None = None,
             **options: Any) -> list[Match]:
    """The same query run through push/advance/close."""
    return run_streaming(start(analyze(query), **options), batch, sizes, lag)


def streamed_with_snapshots(query: str, batch: EventBatch, step: int = 7,
                            **options: Any) -> list[Match]:
    """Push ``batch`` in slices of ``step``, restoring a fresh runtime from a snapshot after
    every slice; then close."""
    aq = analyze(query)
    rt = start(aq, **options)
    out: list[Match] = []
    for i in range(0, len(batch), step):
        out += rt.push(batch.slice(i, step))
        blob = rt.snapshot()
        rt = start(aq, **options)
        rt.restore(blob)
    return out + rt.close()
