"""Turn a run into ``results/<date>.json`` and a markdown section for docs/benchmarks.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "—" if x is None else format(x, fmt)


def _secs(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def markdown(doc: dict[str, Any]) -> str:
    """The machine, one table of every row, then the ratios, checks and notes."""
    m = doc["machine"]
    lines = [
        f"### Run of {m['date_utc']}",
        "",
        f"Machine: {m['nproc']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, {m['os']}; "
        f"Python {m['python']}; {m['java']}; kleene commit {m['kleene_commit']}"
        + (" (with uncommitted changes in src/)" if m.get("kleene_worktree_dirty") else "")
        + ".",
        f"Command: `{doc['command']}`; {doc['repeats']} repeats, medians. The machine was "
        "shared with other work: the load column is the 1-minute load average before each "
        "repeat.",
        "",
        "| workload | variant | engine | events | seconds (median) | events/s | matches | "
        "peak RSS (MB) | load (1 min) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in doc["rows"]:
        if r["status"] != "ok" and r["seconds"] is None:
            lines.append(f"| {r['workload']} | {r['variant']} | {r['engine']} | "
                         f"{_num(r['events'])} | {r['status']} | | | | |")
            continue
        status = "" if r["status"] == "ok" else f" ({r['status']})"
        loads = ", ".join(f"{x:.1f}" for x in r["load_1min"])
        lines.append(
            f"| {r['workload']} | {r['variant']}{status} | {r['engine']} | {_num(r['events'])} | "
            f"{_secs(r['seconds'])} | {_num(r['events_per_s'])} | {_num(r['matches'])} | "
            f"{_num(r['peak_rss_mb'])} | {loads} |")
    if doc["notes"]:
        lines += ["", "Ratios and findings:", ""] + [f"* {n}" for n in doc["notes"]]
    if doc["checks"]:
        lines += ["", "Checks:", ""]
        for k, v in doc["checks"].items():
            lines.append(f"* {k}: `{json.dumps(v, default=str)}`")
    extra = [(r, r["extra"]) for r in doc["rows"] if r["extra"]]
    if extra:
        lines += ["", "Details per row:", ""]
        for r, e in extra:
            shown = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in e.items()}
            lines.append(f"* {r['workload']} / {r['variant']} / {r['engine']}: "
                         f"`{json.dumps(shown, default=str)}`")
    timings = sorted({(r["engine"], r["timing"]) for r in doc["rows"] if r["timing"]})
    if timings:
        lines += ["", "What is timed:", ""] + [f"* {e}: {t}" for e, t in timings]
    return "\n".join(lines) + "\n"


def write(doc: dict[str, Any], results_dir: Path, stamp: str) -> tuple[Path, Path]:
    """Write ``<stamp>.json`` and ``<stamp>.md`` (``<stamp>-2``... if taken); return both."""
    results_dir.mkdir(parents=True, exist_ok=True)
    base, k = stamp, 1
    while (results_dir / f"{stamp}.json").exists():  # never overwrite an earlier run
        k += 1
        stamp = f"{base}-{k}"
    j = results_dir / f"{stamp}.json"
    md = results_dir / f"{stamp}.md"
    j.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    md.write_text(markdown(doc))
    return j, md
