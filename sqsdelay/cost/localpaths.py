"""Which inputs are certainly local files, so that a missing one is refused before Spark
starts (0.4 s instead of a JVM start). Anything Spark may read otherwise is left to Spark:
a URI (`s3://`, `file:/x`, `dbfs:/mnt/x`, `hdfs:/x`), a glob (`events/{jan,feb}.json`), and
under spark-submit or a Hadoop configuration, a plain path (the default file system may be
HDFS: `/user/hadoop/events`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_GLOB = set("*?[]{}")


def default_fs_is_local() -> bool:
    """False under spark-submit (the JVM launched this Python and may default to HDFS) or
    with a Hadoop configuration (its core-site.xml may set fs.defaultFS)."""
    return not any(
        os.environ.get(name)
        for name in ("PYSPARK_GATEWAY_PORT", "HADOOP_CONF_DIR", "YARN_CONF_DIR")
    )


def certainly_local(path: str) -> bool:
    return not _SCHEME.match(path) and not (_GLOB & set(path)) and default_fs_is_local()


def session_fs_is_local(spark: object) -> bool:
    """Whether a running session reads plain paths from the local file system."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    return str(conf.get("fs.defaultFS") or "file:///").startswith("file:")


def missing(paths: list[str]) -> list[str]:
    """The paths that are certainly local files and do not exist."""
    return [p for p in paths if certainly_local(p) and not Path(p).exists()]
