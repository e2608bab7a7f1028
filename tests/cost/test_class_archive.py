"""The JVM class-data archive of the cost report (SQSDELAY_SPARK_CLASS_ARCHIVE): its options,
a failed dump, the setting, and the command as a user runs it twice. Apart from
test_cost_report_processes.py, so that the two files' long tests run on different workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.cost_events import write_event_log

pytestmark = pytest.mark.spark


def test_class_data_archive_options_and_a_failed_dump(tmp_path: Path) -> None:
    from sqsdelay.cost import classarchive

    archive = tmp_path / "spark.jsa"
    assert classarchive.use_option(archive) == ""  # none yet: start without sharing
    assert classarchive.use_option(None) == ""
    classlist = classarchive.classlist_for(archive)
    assert classarchive.record_option(classlist) == f"-XX:DumpLoadedClassList={classlist}"
    classlist.write_text("java/lang/Object id: 0\n")
    # A dump that fails (here: no such Java) leaves nothing behind, and no archive.
    assert not classarchive.dump(archive, classlist, str(tmp_path / "no-java"), "x.jar")
    assert list(tmp_path.iterdir()) == []
    archive.write_bytes(b"x")
    assert classarchive.use_option(archive).startswith(f"-XX:SharedArchiveFile={archive} ")


def test_one_report_at_a_time_records_and_dumps(tmp_path: Path) -> None:
    """Reports run back to back before the first dump is done start no dump of their own;
    a claim and a class list left by a report that died are swept once stale."""
    import os
    import time

    from sqsdelay.cost import classarchive

    archive = tmp_path / "cache" / "spark.jsa"
    assert classarchive.claim(archive)
    assert not classarchive.claim(archive)  # the first one's dump is not done
    classlist = classarchive.classlist_for(archive)
    classlist.write_text("java/lang/Object id: 0\n")
    classarchive.release(archive, classlist)
    assert list(archive.parent.iterdir()) == []
    assert classarchive.claim(archive)
    dead = classarchive.classlist_for(archive).with_name("spark.jsa.999.classlist")
    dead.write_text("")
    old = time.time() - classarchive.STALE_SECONDS - 60
    for leftover in archive.parent.iterdir():
        os.utime(leftover, (old, old))
    assert classarchive.claim(archive)  # the stale claim taken over, the dead list swept
    assert [p.name for p in archive.parent.iterdir()] == ["spark.jsa.lock"]
    # The background dump gives the claim up whatever happens (here: no such Java).
    args = classlist.with_name(f"{classlist.name}.args")
    args.write_text(f"{tmp_path / 'no-java'}\nx.jar\n")
    classlist.write_text("java/lang/Object id: 0\n")
    assert classarchive.main([str(archive), str(classlist)]) == 1
    assert list(archive.parent.iterdir()) == []


# A stand-in for `java -Xshare:dump`: writes part of its archive, says its pid, then works
# on (sleeps) until killed.
FAKE_JAVA = """#!/bin/sh
for a in "$@"; do case "$a" in -XX:SharedArchiveFile=*) out="${a#*=}";; esac; done
echo $$ > "$0.pid"
printf half > "$out"
exec sleep 600
"""


def fake_dump(tmp_path: Path, archive: Path) -> tuple[int, Path]:
    """A background dump of `archive`, as a first report leaves it, caught half-way: the
    pid of its stand-in JVM and its half-written file."""
    from sqsdelay.cost import classarchive

    java = tmp_path / "java"
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    assert classarchive.claim(archive)
    classlist = classarchive.classlist_for(archive)
    classlist.write_text("java/lang/Object id: 0\n")
    assert classarchive.dump_in_background(archive, classlist, str(java), "x.jar")
    partial = wait_for(lambda: next(archive.parent.glob("*.partial"), None), timeout=60)
    jvm = int(wait_for(lambda: java.with_name("java.pid").read_text().strip(), timeout=60))
    return jvm, partial


def running(pid: int) -> bool:
    """Alive and not a zombie (nothing may reap a killed dump's processes in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_report_starting_stops_the_dump_and_never_uses_its_half_archive(
    tmp_path: Path,
) -> None:
    """`stop_dump` (what a report does before its JVM starts): the dump and its JVM are
    killed, its half-written file, list and claim swept, and no archive is there to map: the
    report may claim, record and dump again. A claim that names no dump (a report still
    recording) is left alone."""
    from sqsdelay.cost import classarchive

    archive = tmp_path / "cache" / "spark.jsa"
    assert not classarchive.stop_dump(archive)  # nothing runs
    assert classarchive.claim(archive)
    assert not classarchive.stop_dump(archive)  # a report's claim, recording
    assert [p.name for p in archive.parent.iterdir()] == ["spark.jsa.lock"]
    classarchive.release(archive)

    jvm, partial = fake_dump(tmp_path, archive)
    dumper = int(archive.with_name("spark.jsa.lock").read_text().split()[0])
    assert running(dumper) and running(jvm) and partial.read_text() == "half"
    assert classarchive.stop_dump(archive)
    assert not running(dumper) and not running(jvm)
    assert list(archive.parent.iterdir()) == []  # no partial, list, arguments or claim
    assert classarchive.use_option(archive) == ""  # the report starts without sharing
    assert classarchive.claim(archive)  # and may record and dump again
    classarchive.release(archive)

    # A dump that died without giving its claim up (killed, out of memory): swept.
    jvm, partial = fake_dump(tmp_path, archive)
    dumper = int(archive.with_name("spark.jsa.lock").read_text().split()[0])
    os.killpg(dumper, signal.SIGKILL)
    wait_for(lambda: not running(dumper) and not running(jvm), timeout=10)
    assert classarchive.stop_dump(archive)
    assert list(archive.parent.iterdir()) == []


@dataclass(frozen=True)
class FirstRun:
    """The command's first run (no archive yet) beside a dump that a report before it left
    running, and what it left, as seen the moment it returned."""

    done: subprocess.CompletedProcess[str]
    env: dict[str, str]
    root: Path  # the runs' output directories
    cache: Path  # the user's cache directory of sqsdelay (XDG_CACHE_HOME)
    cached: list[str]  # the files in it
    dump: list[bool]  # the stand-in dump and its JVM running, its half archive there
    dumper: int  # the stand-in dump's pid
    claim: str  # the claim's text: the dump that now runs, and its list
    archive: Path  # where the default setting (auto) keeps the archive


def cost_report(
    env: dict[str, str], root: Path, name: str, *settings: str, java: str = ""
) -> subprocess.CompletedProcess[str]:
    """`sqsdelay cost-report` of the test event log into `root/name`, as a user runs it;
    `java` goes to its JVMs."""
    args = ["cost-report", "--input", str(root / "events.jsonl"), "--output", str(root / name)]
    options = f"{env.get('JAVA_TOOL_OPTIONS', '')} {java}".strip()
    return subprocess.run(
        [sys.executable, "-m", "sqsdelay", *settings, *args],
        env={**env, "JAVA_TOOL_OPTIONS": options},
        capture_output=True,
        text=True,
        timeout=600,
    )


def ran(done: subprocess.CompletedProcess[str]) -> str:
    """The report's output, once checked: it ran, its dump stayed quiet, no progress bar."""
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[cds]" not in done.stdout + done.stderr  # the dump stays quiet
    assert "[Stage " not in done.stderr  # Spark's progress bar is for a terminal
    return done.stdout


# One first run for both tests below, which had one each: a report costs about 40 CPU-s (a
# JVM, a Spark session, the job). Each test asserts on what the run left when it returned
# (kept here), so either may run alone or first; the real dump, if no test waited for it, is
# stopped at the end: the suite needs no archive (a core back).
@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FirstRun]:
    from sqsdelay.cost import classarchive

    root = tmp_path_factory.mktemp("class-archive")
    write_event_log(root)
    env = {k: v for k, v in os.environ.items() if k != "SQSDELAY_SPARK_CLASS_ARCHIVE"}
    env["XDG_CACHE_HOME"] = str(root / "cache")
    with pytest.MonkeyPatch.context() as m:  # the file the command's `auto` names
        m.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
        archive = classarchive.class_archive_file("auto")
    assert archive is not None
    lock = archive.with_name(f"{archive.name}.lock")
    try:
        # A first report's dump, caught half-way (a stand-in: a real one would cost a core).
        jvm, partial = fake_dump(root, archive)
        dumper = int(lock.read_text().split()[0])
        # the cycle is the worker's setting, not a flag of its own
        done = cost_report(env, root, "first", "--max-native-delay-seconds", "300")
        yield FirstRun(
            done=done,
            env=env,
            root=root,
            cache=archive.parent,
            cached=sorted(p.name for p in archive.parent.iterdir()),
            dump=[running(dumper), running(jvm), partial.exists()],
            dumper=dumper,
            claim=lock.read_text() if lock.exists() else "",
            archive=archive,
        )
    finally:
        classarchive.stop_dump(archive)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_report_run_beside_the_dump_stops_it_and_dumps_again(first_run: FirstRun) -> None:
    """The command as a user runs it right after a first report whose dump still runs: the
    dump is gone before the report's JVM starts (its half archive never mapped, the report
    records a class list as a first run does) and the report leaves a dump of its own."""
    ran(first_run.done)
    assert first_run.dump == [False, False, False]  # dump, its JVM, its half archive: gone
    assert (first_run.root / "first" / "report.html").exists()
    # Its own dump (a real one), from the list it recorded: the retry.
    again, listed = first_run.claim.split()
    assert int(again) != first_run.dumper and Path(listed).name.endswith(".classlist")
    assert Path(listed).name.startswith(first_run.archive.name)  # the file `auto` names


# Two reports (the first run's, beside a stand-in dump: the test above), a dump of 16,000
# classes between them (about 70 CPU-s, at nice 19) and the driver's session: 170 s alone,
# and past the suite's 300 s once beside the whole suite. A hang guard, as the wheel test's.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cost_report_cli_starts_the_second_time_from_the_class_archive(
    first_run: FirstRun, tmp_path: Path
) -> None:
    """The command as a user runs it, with the default class-data archive (auto): the first
    run writes an archive into the user cache directory, the second starts from it."""
    printed = ran(first_run.done)
    # rich wraps the long path at 80 columns
    assert "Batched (this worker)" in printed and "report.html" in printed.replace("\n", "")
    summary = first_run.root / "first" / "summary.json"
    assert json.loads(summary.read_text())["cycle_seconds"] == 300
    # The command did not wait for the dump: it runs in a process of its own once the report
    # is written, from the first run's class list, and leaves the archive and nothing else.
    cached = first_run.cached
    assert not [f for f in cached if f.endswith(".jsa")]
    assert [f for f in cached if f.endswith(".classlist")]
    cache = first_run.cache

    def written_alone() -> list[Path]:
        files = list(cache.iterdir())
        return files if [f.suffix for f in files] == [".jsa"] else []

    (archive,) = wait_for(written_alone, timeout=600, interval=0.5)
    assert archive == first_run.archive and archive.stat().st_size > 10_000_000
    written = archive.stat().st_mtime_ns
    # It fits the driver's JVM and class path, and Spark's classes come from it: with
    # -Xshare:on a JVM that cannot map its archive refuses to start (the launcher's JVM maps
    # the JDK's own), and each JVM logs where every class came from.
    loads = tmp_path / "class-loads"
    loads.mkdir()
    java = f"-Xshare:on -Xlog:class+load=info:file={loads}/%p.log"
    ran(cost_report(first_run.env, first_run.root, "second", java=java))
    assert (first_run.root / "second" / "report.html").exists()
    logged = "".join(f.read_text() for f in loads.iterdir())
    assert "org.apache.spark.deploy.SparkSubmit source: shared objects file" in logged
    assert "org.apache.spark.sql.SparkSession source: shared objects file" in logged
    assert list(cache.iterdir()) == [archive] and archive.stat().st_mtime_ns == written


def test_class_archive_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsdelay.cost.classarchive import class_archive_file

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    auto = class_archive_file(Settings(spark_class_archive="auto").spark_class_archive)
    assert auto is not None and auto.parent == tmp_path / "sqsdelay"
    assert auto == class_archive_file("auto")  # stable for one Java and pyspark
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "another-jdk"))
    assert class_archive_file("auto") != auto  # another Java, another archive
    assert class_archive_file(Settings(spark_class_archive="off").spark_class_archive) is None
    mine = Settings(spark_class_archive=tmp_path / "x.jsa").spark_class_archive
    assert class_archive_file(mine) == tmp_path / "x.jsa"
    monkeypatch.setenv("SQSDELAY_SPARK_CLASS_ARCHIVE", "off")
    assert Settings().spark_class_archive == "off"
    monkeypatch.setenv("SQSDELAY_SPARK_CLASS_ARCHIVE", str(tmp_path / "y.jsa"))
    assert Settings().spark_class_archive == tmp_path / "y.jsa"
