"""Issue 15 old against new in one run: the whole `kleene run` on the 1M stock file, NFA plan,
--workers 1 and 2, for two source trees, the four arms alternating; wall (perf_counter around
the child) and CPU (wait4), medians, each tree's 2-worker speed-up pair by pair.

    python benchmarks/results/quiet-2026-12-01-s12/ab15.py OLD_SRC NEW_SRC [ROUNDS]
"""
import hashlib, os, statistics, subprocess, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from benchmarks import datasets, queries  # noqa: E402

old, new = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
csv = datasets.stock_csv(1_000_000)
qf = Path("/tmp/ab15_stock.kleene")
qf.write_text(queries.STOCK)
env0 = {k: v for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}


def run(src: str, workers: int) -> tuple[float, float, str]:
    out = f"/tmp/ab15_{workers}.jsonl"
    cmd = [sys.executable, "-m", "kleene", "run", str(qf), "-i", str(csv), "--event-type",
           "Stock", "--plan", "nfa", "--workers", str(workers), "-q", "-o", out]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env={**env0, "PYTHONPATH": src}, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    assert status == 0, (cmd, status)
    return wall, ru.ru_utime + ru.ru_stime, hashlib.sha256(Path(out).read_bytes()).hexdigest()


arms = [(old, 1), (new, 1), (old, 2), (new, 2)]
res: dict[tuple[str, int], list[tuple[float, float]]] = {a: [] for a in arms}
digests = set()
run(new, 1)  # warm-up (page cache, byte code)
for r in range(rounds):
    print("load", open("/proc/loadavg").read().split()[:3], flush=True)
    for a in arms:
        w, c, d = run(*a)
        digests.add(d)
        res[a].append((w, c))
        print(f"  round {r} {'old' if a[0] == old else 'new'} w{a[1]}: wall {w:.3f} cpu {c:.3f}",
              flush=True)
assert len(digests) == 1, "outputs differ"
for name, src in (("old", old), ("new", new)):
    w1 = [x[0] for x in res[(src, 1)]]
    w2 = [x[0] for x in res[(src, 2)]]
    pairs = [a / b for a, b in zip(w1, w2)]
    print(f"{name}: 1 worker {statistics.median(w1):.3f} s, 2 workers {statistics.median(w2):.3f} s, "
          f"ratio of medians {statistics.median(w1) / statistics.median(w2):.3f}, pairs "
          f"{min(pairs):.2f}-{max(pairs):.2f} (median {statistics.median(pairs):.3f}); CPU 1w "
          f"{statistics.median(x[1] for x in res[(src, 1)]):.3f}, 2w "
          f"{statistics.median(x[1] for x in res[(src, 2)]):.3f}")
print("outputs byte-identical across the four arms")
