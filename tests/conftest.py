"""Shared fixtures: one moto server over HTTP on 127.0.0.1 for the whole suite."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsdelay import logs
from sqsdelay.dev.emulator import Emulator
from sqsdelay.settings import Settings
from tests.support.cpu_log import pytest_runtest_protocol  # noqa: F401 (a hook: TEST_CPU_LOG)

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
for _name in list(os.environ):
    if _name.startswith("SQSDELAY_"):  # the suite must not pick up a developer's settings
        del os.environ[_name]
# Spark runs in the suite must not leave a class-data archive in the developer's cache;
# the one test of that default lifts this.
os.environ["SQSDELAY_SPARK_CLASS_ARCHIVE"] = "off"
# Every JVM the suite starts (the reports run as commands, spark-submit, the wheel's) compiles
# with C1 only, as the suite's own session does (fast_start): on these tiny inputs the C2
# compiler's work never pays back. Measured: one `sqsdelay cost-report` of the test event log
# took 40 s of CPU, 26 s with this. The JIT tier changes no result.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")


# Seconds each of the longest files took in `make unit` (2026-11-26, 3 workers, nothing else
# running). Only the order of the run comes from it: an outdated figure costs time, not a test.
LONGEST_FILES = {
    "tests/cost/test_emr_venv.py": 300,  # `make spark35` only, beside the main suite
    "tests/cost/test_class_archive.py": 172,
    "tests/integration/test_wheel.py": 169,
    "tests/cost/test_cost_report.py": 168,
    "tests/integration/test_registry.py": 164,
    "tests/integration/test_worker.py": 152,
    "tests/integration/test_container.py": 151,
    "tests/cost/test_cost_report_processes.py": 140,
    "tests/cost/test_cost_report_cluster.py": 140,  # measured alone, 2026-11-28 (load 5)
    "tests/cost/test_bill.py": 121,
    "tests/integration/test_celery.py": 117,
    "tests/integration/test_console.py": 163,  # measured alone, 2026-11-27 (SOON_S 75)
    "tests/integration/test_taskiq.py": 100,  # measured alone, 2026-11-27 (load 9)
    "tests/integration/test_parking.py": 110,
    "tests/integration/test_worker_process.py": 70,
    "tests/integration/test_consumer_worker.py": 68,  # measured alone, 2026-11-27
    "tests/integration/test_consumer.py": 50,
    "tests/integration/test_deployed.py": 65,
    "tests/integration/test_metrics.py": 57,
    "tests/integration/test_dramatiq.py": 51,
    "tests/integration/test_discovery.py": 50,
    "tests/cost/test_fold.py": 48,
    "tests/integration/test_fifo.py": 37,
    "tests/integration/test_cli.py": 34,
    "tests/integration/test_fix_hints.py": 33,
    "tests/cost/test_cost_parity.py": 33,
    "tests/integration/test_emulator_fidelity.py": 31,
    "tests/integration/test_idle_queues.py": 28,
    "tests/integration/test_fair_queues_and_traces.py": 25,
    "tests/core/test_step.py": 24,
}


# The files whose tests run on the suite's own SparkSession (the `spark` fixture below, one
# per pytest worker): one worker takes them all, so the suite starts and warms up one JVM
# for them rather than one on each worker (about 30 CPU-s each). test_cost_report_processes
# is among them for its spark-submit test's embedded run; test_class_archive, whose
# processes need no session, runs on another worker.
SHARED_SPARK_FILES = frozenset(
    f"tests/cost/{name}.py"
    for name in (
        "test_cost_report",
        "test_cost_report_processes",
        "test_bill",
        "test_fold",
        "test_cost_parity",
        "test_emr_template",
        "test_months_sql",
        "test_collect",
        "test_cost_report_cluster",
    )
)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: pytest without xdist has no spec for it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the SHARED_SPARK_FILES as one unit of work."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SparkFilesTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path: str = super()._split_scope(nodeid)
            return "the shared SparkSession's files" if path in SHARED_SPARK_FILES else path

    return SparkFilesTogether(config, log)


# Files that keep a core busy from start to end (Spark's JVMs, pip installing into new
# environments); the others mostly wait on servers, subprocesses and compressed cycles.
BUSY_FILES = ("tests/integration/test_wheel.py", "tests/integration/test_container.py")
BUSY = pytest.StashKey[set[Path]]()  # the busy files' paths, for pytest_runtest_setup


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that wait first, then the busy ones (the Spark tests, the packaging tests),
    each the longest first. `make test` hands whole files to its workers (`--dist loadfile
    --no-loadscope-reorder`) in this order. The busy files then run once the other lanes
    (the scripts, Spark 3.5) have finished: started beside them and beside each other, they
    starved the timing tests of CPU and a report passed its 300 s. And a long file that
    started last would leave the other workers waiting on it at the end. The sort is stable,
    so each file stays in one piece."""
    root = config.rootpath
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    busy = {item.path for item in items if item.get_closest_marker("spark")}
    busy |= {root / name for name in BUSY_FILES}

    # The shared SparkSession's files are one unit of work: it sorts by their sum.
    shared = sum(LONGEST_FILES.get(name, 0) for name in SHARED_SPARK_FILES)

    def order(item: pytest.Item) -> tuple[bool, int, bool]:
        name = item.path.relative_to(root).as_posix()
        seconds = shared if name in SHARED_SPARK_FILES else LONGEST_FILES.get(name, 0)
        return item.path in busy, -seconds, item.path not in slow

    items.sort(key=order)
    config.stash[BUSY] = busy


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A worker that reaches the busy files lowers its CPU priority (nice 10, inherited by
    the JVMs and pips it starts): they need CPU time, not promptness, while the timing tests
    of the other workers measure lateness on a machine that is busy for the whole run. The
    busy files come last, so the worker never runs a timing test again."""
    if item.path in item.config.stash.get(BUSY, set()) and os.nice(0) < 10:
        os.nice(10 - os.nice(0))


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    with Emulator() as emulator:
        yield emulator.url


@pytest.fixture
def prefix() -> str:
    """A unique queue prefix per test, so tests never see each other's messages."""
    return f"t{uuid.uuid4().hex[:8]}-"


@pytest.fixture
def make_settings(moto_url: str, prefix: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "endpoint_url": moto_url,
            "region": "us-east-1",
            "queue_prefix": prefix,
            "error_queue": "error",
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def sqs(moto_url: str) -> Any:
    return boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")


@pytest.fixture
def dynamodb(moto_url: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=moto_url, region_name="us-east-1")


@pytest.fixture
def env(moto_url: str, prefix: str) -> dict[str, str]:
    """Environment for running the CLI as a subprocess against the moto server."""
    return {
        **os.environ,
        "SQSDELAY_ENDPOINT_URL": moto_url,
        "SQSDELAY_REGION": "us-east-1",
        "SQSDELAY_QUEUE_PREFIX": prefix,
    }


def wait_for(condition: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """Poll until `condition()` is truthy; fail with a clear message at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def count_requests(client: Any) -> list[str]:
    """Record every request a boto3 client sends (to prove that nothing was sent)."""
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        sent.append(target.decode() if isinstance(target, bytes) else str(target))

    client.meta.events.register("before-send.sqs", record)
    return sent


@pytest.fixture(autouse=True)
def _logs_to_the_real_stderr() -> Iterator[None]:
    """A test that configures logging under capsys leaves it writing to a captured stream
    that is closed afterwards; point it back at stderr after every test."""
    yield
    logs.configure("json", "INFO", stream=sys.stderr)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole suite (one JVM start)."""
    from sqsdelay.cost.session import spark_session

    session = spark_session(fast_start=True)
    yield session
    session.stop()
