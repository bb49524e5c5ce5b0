"""Rebuild the traffic and glucose slices in examples/data from the full data sets.

Usage: python examples/data/make_slices.py AARHUS_2014_08_CSV_GZ CGM_GLUCOSE_CSV_GZ

* ``aarhus_traffic_week.csv.gz``: the readings of the eight road segments in SENSORS (the ones
  with the most congestion-and-clearing episodes that week) from 2014-08-04 00:00 to
  2014-08-10 23:55, columns TIMESTAMP, REPORT_ID, avgSpeed, vehicleCount, in the source's order
  (by TIMESTAMP, then REPORT_ID).
* ``cgm_glucose_2010-08.csv.gz``: every reading of August 2010, unchanged (all three columns,
  the source's order); it holds the 1,061 ``isig`` values ``nil`` of the full file.

Both are written byte-for-byte from the source lines (no re-formatting of values).
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

SENSORS = ("179202", "179038", "190338", "195525", "180790", "184972", "180872", "180764")
KEEP = ("TIMESTAMP", "REPORT_ID", "avgSpeed", "vehicleCount")
HERE = Path(__file__).resolve().parent


def traffic(src: str, dest: Path) -> None:
    """Write the traffic week slice."""
    with gzip.open(src, "rt", encoding="utf-8") as f, \
            gzip.GzipFile(dest, "wb", compresslevel=9, mtime=0) as raw:
        header = next(f).rstrip("\n").split(",")
        idx = [header.index(c) for c in KEEP]
        raw.write((",".join(KEEP) + "\n").encode())
        for line in f:
            cells = line.rstrip("\n").split(",")
            ts = cells[header.index("TIMESTAMP")]
            if "2014-08-04" <= ts[:10] <= "2014-08-10" and cells[header.index("REPORT_ID")] \
                    in SENSORS:
                raw.write((",".join(cells[i] for i in idx) + "\n").encode())


def glucose(src: str, dest: Path) -> None:
    """Write the glucose month slice."""
    with gzip.open(src, "rt", encoding="utf-8") as f, \
            gzip.GzipFile(dest, "wb", compresslevel=9, mtime=0) as raw:
        raw.write(next(f).encode())
        for line in f:
            if line.split(",")[1].startswith("2010-08"):
                raw.write(line.encode())


if __name__ == "__main__":
    traffic(sys.argv[1], HERE / "aarhus_traffic_week.csv.gz")
    glucose(sys.argv[2], HERE / "cgm_glucose_2010-08.csv.gz")
