"""kleene's benchmark harness (issue 5, performance section).

Run everything with ``python -m benchmarks`` (or ``make bench``) from the repository root;
``python -m benchmarks --help`` lists the options (``--quick``, ``--only``, ``--repeats``...).
Every measurement runs in its own subprocess so that its peak RSS can be read back exactly.
Generated inputs are cached under ``benchmarks/.data/`` and results written to
``benchmarks/results/<date>.json`` plus a markdown table for ``docs/benchmarks.md``.
"""
