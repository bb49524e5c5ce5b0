"""One local SparkSession for the whole test session (start-up costs about 5 s here)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # kleene_spark_helpers


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] session configured by kleene (UTC, few shuffle partitions, RocksDB); the
    same one the Spark backends of the conformance suite use (kleene.spark.backend)."""
    from kleene.spark.backend import local_session

    session = local_session()
    yield session
    session.stop()
