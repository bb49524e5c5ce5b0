"""Per-tree speed-ups pair by pair (same round) from an arms.py log:
    python pairs.py LOG ONE_WORKER_ARM TWO_WORKER_ARM [...more pairs]"""
import re
import statistics
import sys

walls: dict[str, list[float]] = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s+round (\d+) (\S+): wall ([\d.]+)", line)
    if m:
        walls.setdefault(m.group(2), []).append(float(m.group(3)))
args = sys.argv[2:]
for one, two in zip(args[::2], args[1::2], strict=True):
    pairs = [a / b for a, b in zip(walls[one], walls[two], strict=True)]
    print(f"{one}/{two}: ratio of medians {statistics.median(walls[one]) / statistics.median(walls[two]):.3f}, "
          f"pairs median {statistics.median(pairs):.3f} ({min(pairs):.2f}-{max(pairs):.2f}), "
          f"{sum(p >= 1.7 for p in pairs)}/{len(pairs)} pairs >= 1.7")
