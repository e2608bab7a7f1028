"""The report's SparkSession: started with the settings measured for this job
(docs/spark-session.md), or the caller's, and stopped when the report started it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from typing import Any

# The largest temporary direct I/O buffer the report's JVM keeps for reuse (spark_session).
MAX_CACHED_IO_BUFFER = 1 << 20


def spark_session(
    master: str | None = None,
    *,
    fast_start: bool = False,
    driver_memory: str = "1g",
    java_options: str = "",
) -> Any:
    """A SparkSession: local[2] by default, or whatever spark-submit configured.
    `java_options` go to the driver JVM (the class-data archive's, see `classarchive`)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # A local master's executors are threads of the driver: the loopback serves them and
    # needs no name lookup. A cluster's executors run on other hosts and reach the driver at
    # the address Spark's own settings give it (SPARK_LOCAL_IP, spark.driver.host in
    # spark-defaults.conf, else the host's name); a loopback pinned here would send them to
    # their own host (tests/cost/test_cost_report_cluster.py).
    local = (master or "local").startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.appName("sqsdelay-cost-report")
        .config("spark.sql.session.timeZone", "UTC")
        # A collect (toPandas without Arrow, as on Spark 3.5) opens a socket that Python
        # must connect to within this time, or the JVM gives up and Python waits forever on
        # it. The default 15 s was missed at nice 10 on a saturated machine (a 300 s hang
        # in a fresh-clone `make test`); a busy driver host is no reason to lose a report.
        .config("spark.python.authenticate.socketTimeout", "600s")
    )
    # spark-submit starts the JVM first and hands Python its gateway; only then does its
    # --master apply. (SparkConf() cannot see it before the gateway is attached.)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or not submitted:
        log4j = resources.files("sqsdelay").joinpath("data/log4j2.properties")
        java = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{log4j}"
        # Parquet reads a column chunk (up to a row group, 128 MiB) into a heap buffer; the
        # JDK copies it through a temporary direct buffer of the same size and by default
        # keeps one per thread for good: 170 MiB of the report's peak. Larger ones are freed.
        java += f" -Djdk.nio.maxCachedBufferSize={MAX_CACHED_IO_BUFFER}"
        if fast_start:  # halves start-up; fine for tests, 3x slower on big jobs
            java += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        if java_options:
            java += " " + java_options
        builder = (
            builder.master(master or "local[2]")
            .config("spark.ui.enabled", "false")
            # Spark's progress bar is for someone watching a terminal: in a log (CI, a
            # container's, a captured run) it is noise.
            .config("spark.ui.showConsoleProgress", str(_on_terminal()).lower())
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", driver_memory)
            .config("spark.driver.extraJavaOptions", java)
            .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        )
        if local:
            builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
                "spark.driver.host", "127.0.0.1"
            )
        # glibc makes up to 8 malloc arenas per core for a threaded process such as the
        # JVM; two keep its native memory (the RSS outside the heap) down. Only the JVM
        # launched here sees the variable.
        with _environment(MALLOC_ARENA_MAX="2"):
            return builder.getOrCreate()
    return builder.getOrCreate()


def _on_terminal() -> bool:
    """Whether standard error is a terminal (it may be closed or replaced)."""
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """These environment variables, unless already set, while the block runs."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def spark_running() -> bool:
    """Whether this process already has a SparkContext (a caller's session to leave alone)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def stop_spark(spark: Any, timeout: float = 120.0) -> None:
    """Stop the session and the JVM this process launched, and wait for it to exit. The JVM
    otherwise lives until Python exits, holding its heap while the report is drawn. Under
    spark-submit the JVM launched Python and is left alone."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()  # the gateway exits when its stdin closes
    # A JVM slow to shut down finishes on its own; the report need not wait for ever.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    # A later session in this process then launches a fresh JVM.
    SparkContext._gateway = None
    SparkContext._jvm = None
