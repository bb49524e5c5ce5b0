"""Rebuild examples/data/nycflights13_sample.csv.gz from nycflights13's flights.csv(.gz).

Usage: python examples/data/make_sample.py PATH/TO/flights.csv.gz

Keeps every 2013 departure (cancelled flights dropped) of the aircraft listed in TAILNUMS,
ordered by actual departure time (the source file is not in time order), and adds
``dep_time_utc``: the actual departure instant in UTC,
computed as ``time_hour`` (the scheduled departure hour, already in UTC) + ``minute`` (the
scheduled minute) + ``dep_delay`` (minutes). This avoids the dataset's date trap (flights that
left after midnight carry the previous day's year/month/day) and needs no time-zone database.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

TAILNUMS = ("N725MQ", "N722MQ", "N723MQ", "N258JB", "N353JB", "N328AA")
COLUMNS = ("dep_time_utc", "tailnum", "carrier", "flight", "origin", "dest", "dep_delay",
           "arr_delay", "air_time", "distance")


def main(src: str, dest: str) -> None:
    """Write the sample."""
    t = pcsv.read_csv(src, convert_options=pcsv.ConvertOptions(null_values=["NA"]))
    t = t.filter(pc.and_(pc.is_in(t["tailnum"], pa.array(TAILNUMS)),
                         pc.is_valid(t["dep_delay"])))
    minutes = pc.add(t["minute"], t["dep_delay"]).cast(pa.int64())
    sched = pc.cast(t["time_hour"], pa.timestamp("us", "UTC")).cast(pa.int64())
    dep = pc.add(sched, pc.multiply(minutes, 60_000_000)).cast(pa.timestamp("us", "UTC"))
    iso = pc.strftime(dep.cast(pa.timestamp("s", "UTC")), format="%Y-%m-%dT%H:%M:%SZ")
    t = t.append_column("dep_time_utc", iso).select(list(COLUMNS))
    t = t.take(pc.sort_indices(t, sort_keys=[("dep_time_utc", "ascending")]))
    opts = pcsv.WriteOptions(quoting_style="none", quoting_header="none")
    with pa.CompressedOutputStream(dest, "gzip") as out:
        pcsv.write_csv(t, out, write_options=opts)
    print(f"{dest}: {t.num_rows} flights of {len(TAILNUMS)} aircraft", file=sys.stderr)


if __name__ == "__main__":
    here = Path(__file__).parent
    main(sys.argv[1], str(here / "nycflights13_sample.csv.gz"))
