"""The benchmark queries, in kleene's canonical language (one constant per workload)."""

from __future__ import annotations

from itertools import permutations

#: Workload 1: increasing run between a and c, per symbol, contiguous (issue 5's query).
STOCK = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price
PARTITION BY symbol
WITHIN 10 minutes
USING strict-contiguity
"""

#: Workload 2: per-sensor congestion on the Aarhus data (avgSpeed in km/h).
TRAFFIC = """PATTERN SEQ(Traffic a, Traffic+ b[], Traffic c)
WHERE a.avgSpeed >= 40 AND b[i].avgSpeed < 20 AND c.avgSpeed >= 40
PARTITION BY REPORT_ID
WITHIN 2 hours
USING skip-till-next-match
"""

#: Workload 3: selective one-variable filters on Aarhus: vehicleCount >= 30 passes 0.82 % of
#: the events and avgSpeed >= 110 passes 0.68 % (measured on all 7.1M).
SELECTIVE = """PATTERN SEQ(Traffic a, Traffic b)
WHERE a.vehicleCount >= 30 AND b.avgSpeed >= 110
PARTITION BY REPORT_ID
WITHIN 30 minutes
"""

_AND_TAIL = "PARTITION BY symbol\nWITHIN 1 seconds\n"

#: Workload 4a: AND of three types, then a negation, then a closing event (LogCEP's shapes).
AND3 = f"""PATTERN SEQ(AND(Buy a, Sell b, Quote c), NOT(Cancel n), Trade e)
{_AND_TAIL}"""


def _or_of_permutations() -> str:
    # A variable may be bound in one OR branch only, so branch k renames a, b, c, n, e to
    # ak, bk, ck, nk, ek; the match counts of AND3 and OR6 must then be equal.
    types = {"a": "Buy", "b": "Sell", "c": "Quote"}
    branches = []
    for k, order in enumerate(permutations("abc"), 1):
        items = ", ".join(f"{types[v]} {v}{k}" for v in order)
        branches.append(f"SEQ({items}, NOT(Cancel n{k}), Trade e{k})")
    return "PATTERN OR(\n  " + ",\n  ".join(branches) + f")\n{_AND_TAIL}"


#: Workload 4b: the same query with the AND written out as the OR of its 6 SEQ orders.
OR6 = _or_of_permutations()

#: Workload 5: skip-till-any-match with a Kleene variable: every subset of the events between a
#: and c is a match, so the count explodes with the window.
EXPLODE = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE c.price > a.price
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
"""
