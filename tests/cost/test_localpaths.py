"""Which inputs are refused as missing before Spark starts: only certainly local files."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqsdelay.cost.localpaths import certainly_local, missing


@pytest.mark.parametrize(
    "path",
    ["file:/x", "file:///x", "dbfs:/mnt/x", "hdfs:/x", "s3://b/k", "events/{jan,feb}.json",
     "events/*.json", "events/2026-0?.json", "events/[ab].json"],
)  # fmt: skip
def test_what_spark_reads_is_never_checked_here(path: str) -> None:
    assert not certainly_local(path) and missing([path]) == []


def test_a_plain_path_is_checked_unless_the_default_file_system_may_be_hdfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PYSPARK_GATEWAY_PORT", "HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    absent, present = str(tmp_path / "absent"), str(tmp_path)
    assert missing([absent, present]) == [absent]
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")  # under spark-submit
    assert missing(["/user/hadoop/events"]) == []
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop/conf")
    assert missing(["/user/hadoop/events"]) == []
