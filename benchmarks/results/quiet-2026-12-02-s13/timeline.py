"""A wall-clock timeline of one `kleene run` and its forked workers (session 13): stamps on
entry and exit of the run's main steps, written to stderr as ``[pid] seconds > name``, the
seconds counted from ``T0`` (an epoch time in the environment, e.g. ``date +%s.%N`` just
before the command) or from this process's start. ``BPW`` in the environment sets
``parallel.BUCKETS_PER_WORKER``.

    T0=$(date +%s.%N) PYTHONPATH=src python timeline.py run QUERY -i FILE ... 2> timeline.txt
"""
import atexit
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

T0 = float(os.environ.get("T0", time.time()))


def stamp(what: str) -> None:
    os.write(2, f"[{os.getpid()}] {time.time() - T0:7.3f} {what}\n".encode())


stamp("python up")
import kleene.cli.main as m  # noqa: E402

stamp("cli imported")
import kleene.events.sources.csvrange as cr  # noqa: E402
import kleene.events.writers as wr  # noqa: E402
import kleene.runtime.parallel as par  # noqa: E402

stamp("parallel imported")
if os.environ.get("BPW") and hasattr(par, "BUCKETS_PER_WORKER"):
    par.BUCKETS_PER_WORKER = int(os.environ["BPW"])


def wrap(owner: Any, name: str) -> None:
    f: Callable[..., Any] = getattr(owner, name)

    def g(*a: Any, **k: Any) -> Any:
        stamp(f"> {name}")
        try:
            return f(*a, **k)
        finally:
            stamp(f"< {name}")
    setattr(owner, name, g)


for n in ["_in_parts", "_sample_look", "_estimated_events", "_unread_columns_as_text",
          "_compile", "_read_part", "_check_schema", "_jsonl_texts", "_summary"]:
    wrap(m, n)
for n in ["run_parts", "_merged", "_read_part", "_worker_runtime", "_worker_result",
          "_write_lines", "_read_lines", "_fork", "_reply"]:
    wrap(par, n)
wrap(cr, "csv_byte_ranges")
wrap(wr.JsonLinesWriter, "write_texts")
_target = m.output_target


@contextlib.contextmanager
def target(*a: Any, **k: Any) -> Iterator[Any]:
    stamp("> output_target")
    with _target(*a, **k) as t:
        yield t
        stamp("< output_target body")
    stamp("< output_target")


m.output_target = target  # type: ignore[assignment]
atexit.register(lambda: stamp("atexit"))
sys.argv = ["kleene", *sys.argv[1:]]
try:
    m.main()
finally:
    stamp("main done")
