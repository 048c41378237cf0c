"""A local SparkSession wired for the connector (demo, benchmarks, tests).

Python workers must run this interpreter and import this copy of shareq, and Spark must bind to
loopback; none of that is Spark's default, so it is set here once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def worker_environment() -> None:
    """Point PySpark workers at this interpreter and make ``shareq`` importable there."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = os.environ.get("PYTHONPATH", "")
    if PACKAGE_ROOT not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, path) if p)


def local_spark(app_name: str = "shareq", *, cores: int = 2, master: str | None = None, **conf: str) -> Any:
    """A ``local[cores]`` session (or one on ``master``, e.g. a standalone cluster's ``spark://`` URL)
    on 127.0.0.1, UI off, few shuffle partitions, format "shareq" registered."""
    worker_environment()
    from pyspark.sql import SparkSession

    from . import register

    builder = (
        SparkSession.builder.master(master or f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
