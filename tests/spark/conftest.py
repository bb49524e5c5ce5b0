"""One local SparkSession for the whole test session (start-up costs about 5 s here)."""

from __future__ import annotations

import os
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
    """A local[2] session configured by kleene (UTC, few shuffle partitions, RocksDB)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from kleene.spark import get_session

    session = get_session("local[2]", conf={"spark.sql.shuffle.partitions": "4",
                                            "spark.ui.showConsoleProgress": "false",
                                            # hundreds of tiny stages: AQE re-planning
                                            # doubled the suite's time
                                            "spark.sql.adaptive.enabled": "false",
                                            "spark.driver.memory": "2g"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
