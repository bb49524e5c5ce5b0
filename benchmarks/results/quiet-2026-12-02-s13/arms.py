"""Several arms of the whole `kleene run` on the 1M stock file (NFA plan), alternating round
by round; wall (perf_counter around the child) and CPU (wait4), medians, and each arm's
ratio to the first, pair by pair (same round). An arm is LABEL=SRC:WORKERS[:VAR=VALUE,...]
(VAR=VALUE pairs go into the child's environment: e.g. the tl2 knobs of session 13).

    python benchmarks/results/quiet-2026-12-02-s13/arms.py ROUNDS ARM [ARM ...]
"""
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from benchmarks import datasets, queries  # noqa: E402

rounds = int(sys.argv[1])
arms = []
for spec in sys.argv[2:]:
    label, rest = spec.split("=", 1)
    src, workers, *env = rest.split(":")
    extra = dict(kv.split("=", 1) for kv in env[0].split(",")) if env else {}
    arms.append((label, src, int(workers), extra))
csv = datasets.stock_csv(1_000_000)
qf = Path("/tmp/arms_stock.kleene")
qf.write_text(queries.STOCK)
env0 = {k: v for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}


def run(src: str, workers: int, extra: dict[str, str]) -> tuple[float, float, str]:
    out = f"/tmp/arms_{workers}.jsonl"
    cmd = [sys.executable, "-m", "kleene", "run", str(qf), "-i", str(csv), "--event-type",
           "Stock", "--plan", "nfa", "--workers", str(workers), "-q", "-o", out]
    if extra.get("TL2"):  # the session-13 knob wrapper (BPW, OB)
        cmd = [sys.executable, extra["TL2"], *cmd[3:]]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env={**env0, **extra, "PYTHONPATH": src}, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    assert status == 0, (cmd, status)
    return wall, ru.ru_utime + ru.ru_stime, hashlib.sha256(Path(out).read_bytes()).hexdigest()


res: dict[str, list[tuple[float, float]]] = {a[0]: [] for a in arms}
digests = set()
run(arms[0][1], 1, {})  # warm-up (page cache, byte code)
for r in range(rounds):
    print("load", open("/proc/loadavg").read().split()[:3], flush=True)
    for label, src, workers, extra in arms:
        w, c, d = run(src, workers, extra)
        digests.add(d)
        res[label].append((w, c))
        print(f"  round {r} {label}: wall {w:.3f} cpu {c:.3f}", flush=True)
assert len(digests) == 1, "outputs differ"
base = [x[0] for x in res[arms[0][0]]]
for label, *_ in arms:
    wall = [x[0] for x in res[label]]
    pairs = [b / a for a, b in zip(wall, base, strict=True)]
    print(f"{label:>12}: wall median {statistics.median(wall):.3f} s (min {min(wall):.3f}), "
          f"CPU {statistics.median(x[1] for x in res[label]):.3f} s; "
          f"{arms[0][0]}/{label} pairs median {statistics.median(pairs):.3f} "
          f"({min(pairs):.2f}-{max(pairs):.2f}), ratio of medians "
          f"{statistics.median(base) / statistics.median(wall):.3f}")
print("outputs byte-identical across the arms")
