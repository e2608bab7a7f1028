"""A Spark standalone cluster for the tests: a master and its workers on 127.0.0.1, started
with the pyspark distribution's own `spark-class` (the pip package has no sbin/start-*.sh),
each a JVM of its own under this process, and the executors the workers start for an
application in their own processes and working directories (`<root>/worker-N/app-*/M`).

Every process of the cluster (the daemons, their executors, the executors' Python workers)
carries `MARK=<root>` in its environment, so that `leftovers` finds any of them still alive
once `standalone_cluster` has stopped the cluster, whatever became of the process tree."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MARK = "SQSDELAY_TEST_STANDALONE"
# The JVM flags of every process of the cluster, the executors included (they inherit the
# workers' environment): the suite's JIT (tests/conftest.py) and the collector of the suite's
# own session (sqsdelay/cost/session.py's fast_start). And the master's REST server off: it
# listens on a fixed port (6066), which a second cluster on the machine would find taken.
JAVA = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
MASTER_OPTIONS = "-Dspark.master.rest.enabled=false"
# The daemons' and executors' logs at WARN (a tenth of the lines, a few CPU-seconds less),
# but for the lines the tests read: the master's start and its workers, the executors' tasks.
LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = info
"""
STARTED = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")


@dataclass
class Cluster:
    root: Path
    url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def executor_dirs(self) -> list[Path]:
        """The working directories the workers gave the executors (one per executor)."""
        return sorted(self.root.glob("worker-*/app-*/*"))


def _spark_class() -> tuple[Path, Path]:
    import pyspark

    home = Path(pyspark.__file__).parent
    return home, home / "bin" / "spark-class"


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _wait(
    what: str, check: Callable[[], object], procs: list[subprocess.Popen[bytes]], timeout: float
) -> str:
    """Polls `check()` until it returns a string; fails at the deadline or when a daemon died."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return str(found)
        dead = [p.args for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s, or a daemon exited: {dead}")
        time.sleep(0.1)


@contextlib.contextmanager
def standalone_cluster(
    root: Path, workers: int = 2, cores: int = 1, memory: str = "512m", timeout: float = 120
) -> Iterator[Cluster]:
    """A master and `workers` workers of `cores` cores and `memory` each (what they offer to
    executors, not their own heap), stopped with everything they started on the way out."""
    home, spark_class = _spark_class()
    conf = root / "conf"  # the daemons' (the executors' class path has it too)
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "log4j2.properties").write_text(LOG4J)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",  # a master's and a worker's heap: a few objects each
        "SPARK_MASTER_OPTS": MASTER_OPTIONS,
        "JAVA_TOOL_OPTIONS": JAVA,
        MARK: str(root),
    }
    cluster = Cluster(root)

    def start(name: str, *args: str) -> Path:
        log = root / f"{name}.log"
        with open(log, "wb") as out:
            cluster.processes.append(
                subprocess.Popen(
                    [str(spark_class), *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=root,
                    start_new_session=True,  # its executors with it, for `stop`
                )
            )
        return log

    try:
        master = start(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        )
        cluster.url = _wait(
            "the master",
            lambda: (m := STARTED.search(_text(master))) and m.group(1),
            cluster.processes,
            timeout,
        )
        for n in range(workers):
            work = root / f"worker-{n}"
            work.mkdir()
            start(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                *("--cores", str(cores), "--memory", memory, "--work-dir", str(work)),
                cluster.url,
            )
        _wait(
            f"{workers} workers registered",
            lambda: _text(master).count("Registering worker") >= workers,
            cluster.processes,
            timeout,
        )
        yield cluster
    finally:
        stop(cluster)


def stop(cluster: Cluster, timeout: float = 60) -> None:
    """Workers first (each stops its executors), then the master; SIGKILL for any group
    still there at the deadline."""
    for proc in reversed(cluster.processes):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in reversed(cluster.processes):
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    for pid in leftovers(cluster.root):  # an executor or Python worker in a group of its own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def leftovers(root: Path) -> list[int]:
    """The live processes of the cluster under `root` (its mark in their environment)."""
    mark = f"{MARK}={root}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark in environ + b"\0" and state != "Z":  # a zombie is dead, only not yet waited
            found.append(int(entry))
    return found
