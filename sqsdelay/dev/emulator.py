"""The embedded SQS emulator: a moto server in a thread, on loopback only.

moto implements EventBridge Scheduler's API but never fires a schedule, so the emulator
adds `ScheduleRunner`: it fires due one-time schedules whose target is the universal
`sqs:sendMessage`, as Scheduler does. It is part of the emulator and never talks to AWS.
moto's CloudWatch answers a percentile statistic (p99) with an internal error; the emulator
computes it (`percentile`), so that `sqsdelay inspect` can be run against it.
moto's DynamoDB reads, checks and writes an item without a lock, so two conditional writes
on one item at the same moment can both succeed (4 of 300 items with 8 writers at once,
`docs/registry.md`); DynamoDB serialises them. The emulator does too (`_serialise_moto_writes`):
the registry's cancel-versus-claim race is then the one DynamoDB has.
moto's SQS forgets a FIFO deduplication id once its message is deleted, and its long poll
misses messages of a group that was in flight when the poll started; the emulator keeps
SQS's five-minute window and answers long polls as SQS does (`sqs_fidelity`).
moto's Lambda has no recursive loop detection configuration (Get/PutFunctionRecursionConfig)
and its CloudFormation drops a function's `RecursiveLoop`; the emulator keeps one per function,
`Terminate` until put as Lambda does (`_teach_moto_recursion_config`), so that `sqsdelay
inspect --lambda` runs against it as written. moto's deleted event source mapping of an SQS
queue goes on invoking its function; the emulator disables it as it is deleted.
The emulator runs under every test and demo, so its own cost counts: the runner reads moto's
schedules in place and calls the API only once one is due, and moto's lookup of a request's
service (a folder listing and its URL patterns, per request) is kept per host.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from sqsdelay.core import cron, parking, recurring
from sqsdelay.dev import sqs_fidelity
from sqsdelay.extras import require


class Emulator:
    """`with Emulator() as emu: emu.url` runs a moto SQS server on 127.0.0.1."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", *, schedules: bool = True) -> None:
        require("emulator", "the embedded emulator")
        from moto.server import ThreadedMotoServer

        _teach_moto_percentiles()
        _memoise_moto_dispatch()
        _serialise_moto_writes()
        _teach_moto_recursion_config()
        _untrigger_deleted_mappings()
        sqs_fidelity.mend()
        self._server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        self.url = ""
        self._schedules = schedules
        self.runner: ScheduleRunner | None = None

    def start(self, timeout: float = 10.0) -> str:
        # werkzeug logs every request at INFO; the emulator should be quiet.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        deadline = time.monotonic() + timeout
        while True:  # wait until it answers HTTP
            try:
                with urllib.request.urlopen(self.url + "/moto-api/", timeout=1):  # noqa: S310
                    if self._schedules:
                        self.runner = ScheduleRunner(self.url, in_process=True).start()
                    return self.url
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()
        self._server.stop()

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def percentile(values: list[float], p: float) -> float | None:
    """Nearest rank: the smallest value with at least p % of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def _mend(owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
    """Replaces `owner.name` by `wrap(original)`, once: every emulator of a process (the
    suite starts many) mends the same moto classes."""
    original = getattr(owner, name)
    if getattr(original, "sqsdelay", False):
        return
    mended = wrap(original)
    mended.sqsdelay = True
    setattr(owner, name, mended)


def _teach_moto_percentiles() -> None:
    from moto.cloudwatch.models import Statistics

    def wrap(original: Any) -> Any:
        def get(self: Any, stat: str) -> Any:
            match = re.fullmatch(r"p(\d{1,2}(?:\.\d+)?)", stat)
            if match is None:
                return original(self, stat)
            return percentile(self.metric_single_values_list, float(match.group(1)))

        return get

    _mend(Statistics, "get_statistics_for_type", wrap)


def _memoise_moto_dispatch() -> None:
    """moto's server finds the service of every request by listing its package's folder (a
    `stat` per service) and trying its URL patterns in turn, under one lock: a fifth of its
    CPU per SQS request. The answer depends on the host alone, so it is kept per host."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    def wrap(original: Any) -> Any:
        found: dict[str | None, Any] = {}

        def get(self: Any, host: str | None) -> Any:
            if host in found:
                return found[host]
            backend = original(self, host)
            if len(found) < _HOSTS_KEPT:  # hosts come from requests: keep a bounded few
                found[host] = backend
            return backend

        return get

    _mend(DomainDispatcherApplication, "get_backend_for_host", wrap)


_HOSTS_KEPT = 1024

_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
# One for all tables: writes are few in the emulator, and one lock is easy to reason about.
WRITE_LOCK = threading.RLock()


def _serialise_moto_writes() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    def wrap(original: Any) -> Any:
        def write(self: Any, *args: Any, **kwargs: Any) -> Any:
            with WRITE_LOCK:
                return original(self, *args, **kwargs)

        return write

    for name in _WRITES:
        _mend(DynamoDBBackend, name, wrap)


# Lambda's default for a function whose configuration was never put (Lambda developer guide,
# "Use Lambda recursive loop detection").
RECURSIVE_LOOP_DEFAULT = "Terminate"
_RECURSIVE_LOOP = "sqsdelay_recursive_loop"  # kept on moto's function object: it dies with it


def _teach_moto_recursion_config() -> None:
    from moto.awslambda import urls
    from moto.awslambda.exceptions import InvalidParameterValueException
    from moto.awslambda.models import LambdaFunction
    from moto.awslambda.responses import LambdaResponse

    if getattr(LambdaResponse, "get_function_recursion_config", None) is not None:
        return  # taught already, or moto learnt it: then its own answer stands
    # The flask app of a moto service is built from this table at its first request, so the
    # route is in place for every emulator started after this.
    route = r"{0}/(?P<api_version>[^/]+)/functions/(?P<function_name>[\w_:%-]+)/recursion-config/?$"
    urls.url_paths[route] = LambdaResponse.dispatch

    def function(self: Any) -> Any:  # the path ends in /functions/NAME/recursion-config
        name = urllib.parse.unquote(self.path.split("?")[0].rstrip("/").split("/")[-2])
        return self.backend.get_function(name)  # ResourceNotFoundException if unknown

    def get(self: Any) -> str:
        loop = getattr(function(self), _RECURSIVE_LOOP, RECURSIVE_LOOP_DEFAULT)
        return json.dumps({"RecursiveLoop": loop})

    def put(self: Any) -> str:
        loop = self.json_body.get("RecursiveLoop")
        if loop not in ("Allow", "Terminate"):
            raise InvalidParameterValueException(
                f"RecursiveLoop must be Allow or Terminate: {loop!r}"
            )
        setattr(function(self), _RECURSIVE_LOOP, loop)
        return json.dumps({"RecursiveLoop": loop})

    LambdaResponse.get_function_recursion_config = get  # type: ignore[attr-defined]
    LambdaResponse.put_function_recursion_config = put  # type: ignore[attr-defined]

    original = LambdaFunction.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def from_template(
        cls: Any, resource_name: str, template: dict[str, Any], *a: Any, **kw: Any
    ) -> Any:
        fn = original(cls, resource_name, template, *a, **kw)
        loop = template.get("Properties", {}).get("RecursiveLoop")
        if loop is not None:
            setattr(fn, _RECURSIVE_LOOP, loop)
        return fn

    LambdaFunction.create_from_cloudformation_json = classmethod(from_template)  # type: ignore[method-assign,assignment]


def _untrigger_deleted_mappings() -> None:
    """moto's DeleteEventSourceMapping forgets a mapping but leaves it on its SQS queue, which
    goes on invoking the function at each send, with every visible message (the sent one
    included): a function built from a zip fails to start Docker and the messages come back;
    one built from an image fails the send itself. A deleted mapping invokes nothing on
    AWS; here it is disabled as it is deleted. (Streams' mappings are not mended: this
    project maps queues only.)"""
    from moto.awslambda.models import LambdaBackend

    def wrap(original: Any) -> Any:
        def delete(self: Any, uuid: str) -> Any:
            mapping = original(self, uuid)
            if mapping is not None:
                mapping.enabled = False
            return mapping

        return delete

    _mend(LambdaBackend, "delete_event_source_mapping", wrap)


class ScheduleRunner:
    """Fires the emulator's due one-time `at(...)` schedules into its SQS: the universal
    target's input is the SendMessage request; a failed send goes to the schedule's
    dead-letter queue; `ActionAfterCompletion: DELETE` deletes the schedule after firing.
    Recurring `cron(...)`/`rate(...)` schedules fire as Scheduler fires them
    (`core/cron.py`: the schedule's zone and its DST rules; a rate from its StartDate), with
    Scheduler's context keyword `<aws.scheduler.scheduled-time>` filled in; an occurrence
    before the runner first saw the schedule (or its last change: a resume) is not fired."""

    def __init__(
        self,
        url: str,
        *,
        interval: float = 0.2,
        region: str = "us-east-1",
        in_process: bool = False,
        clock: Callable[[], float] = time.time,
        groups: frozenset[str] | None = None,
    ) -> None:
        """`in_process`: the moto server at `url` runs in this process, so that the runner may
        read its schedules in place before it calls the API (`any_due_in_moto`). `clock`:
        the time it fires by (a test's virtual clock); `groups`: only these groups' schedules
        (another runner, on another clock, fires the rest)."""
        import boto3

        kwargs: dict[str, Any] = {
            "endpoint_url": url,
            "region_name": region,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self._scheduler = boto3.client("scheduler", **kwargs)
        self._sqs = boto3.client("sqs", **kwargs)
        self._interval = interval
        self._clock = clock
        self._groups = groups
        # recurring schedules: (group, name) -> (its LastModificationDate, fired up to, next,
        # first seen: a rate without a StartDate counts from it)
        self._recurring: dict[tuple[str, str], tuple[Any, float, float | None, float]] = {}
        self._due = any_due_in_moto(region, self._recurring_due) if in_process else None
        self.api_calls: Counter[str] = Counter()  # by operation: the emulator's own cost
        self._scheduler.meta.events.register("before-call.scheduler", self._counted)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="schedule-runner", daemon=True)
        self.fired = 0
        self.dead_lettered = 0

    def start(self) -> ScheduleRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _counted(self, model: Any, **_: Any) -> None:
        self.api_calls[model.name] += 1

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):  # the server may be stopping
                if self._any_due(self._clock()):
                    self.fire_due(self._clock())

    def _any_due(self, now: float) -> bool:
        """Listing and reading every schedule through the API five times a second cost an
        idle emulator 5 % of a core, more with messages parked: the server's own schedules
        are read first where it can, the API called once one is due. A moto whose insides
        cannot be read (another version) is asked through the API, as before."""
        if self._due is None:
            return True
        try:
            return self._due(now)
        except Exception:
            return True

    def fire_due(self, now: float) -> int:
        """Fire every schedule due at `now`; returns how many fired."""
        fired = 0
        # a paused recurring schedule is read too: its occurrences pass unfired (skipped)
        pages = self._scheduler.get_paginator("list_schedules").paginate()
        for page in pages:
            for summary in page.get("Schedules", []):
                if self._groups is not None and summary["GroupName"] not in self._groups:
                    continue
                known = (summary["GroupName"], summary["Name"]) in self._recurring
                if summary.get("State") != "ENABLED" and not known:
                    continue  # a disabled one-time schedule (or one never seen enabled)
                schedule = self._scheduler.get_schedule(
                    Name=summary["Name"], GroupName=summary["GroupName"]
                )
                expression = schedule.get("ScheduleExpression", "")
                if expression.startswith(("cron(", "rate(")):
                    fired += self._fire_recurring(schedule, now)
                    continue
                if schedule.get("State") != "ENABLED" or not _due(expression, now):
                    continue
                self._fire(schedule)
                fired += 1
        return fired

    def _recurring_due(self, group: str, name: str, modified: Any, now: float) -> bool:
        """Read in place: whether a recurring schedule may have an occurrence due (unknown
        or changed since last read: yes, the API is asked)."""
        if self._groups is not None and group not in self._groups:
            return False
        seen = self._recurring.get((group, name))
        if seen is None or round(seen[0] or 0, 3) != round(modified or 0, 3):
            return True
        return seen[2] is not None and seen[2] <= now

    def _fire_recurring(self, schedule: dict[str, Any], now: float) -> int:
        key = (schedule["GroupName"], schedule["Name"])
        modified = schedule.get("LastModificationDate")
        stamp = modified.timestamp() if isinstance(modified, datetime) else modified
        seen = self._recurring.get(key)
        try:
            expression = cron.parse_expression(schedule["ScheduleExpression"])
            zone = schedule.get("ScheduleExpressionTimezone") or "UTC"
        except Exception:
            return 0  # Scheduler would have refused it
        if seen is None or round(seen[0] or 0, 3) != round(stamp or 0, 3):
            # first seen, or changed (a resume): from now on, as Scheduler skips the past
            seen = (stamp, now - 1e-6, None, now)
        start = schedule.get("StartDate")
        if isinstance(expression, cron.Rate) and start is None:
            start = datetime.fromtimestamp(seen[3], UTC)  # without a start: at once, then on
        times = cron.fire_times(
            expression,
            zone,
            after=datetime.fromtimestamp(seen[1], UTC),
            start=start,
            end=schedule.get("EndDate"),
        )
        fired = 0
        following: float | None = None
        for when in times:
            if when.timestamp() > now:
                following = when.timestamp()
                break
            if fired < _MOST_AT_ONCE and schedule.get("State") == "ENABLED":
                self.fire_occurrence(schedule, when)
                fired += 1
        self._recurring[key] = (stamp, now, following, seen[3])
        return fired

    def fire_occurrence(self, schedule: dict[str, Any], when: datetime) -> None:
        """Send one occurrence as Scheduler does: the input with its time filled in (a test
        calls it again for a duplicate delivery)."""
        target = schedule["Target"]
        if target["Arn"] != parking.SEND_MESSAGE_TARGET:
            return
        text = recurring.substituted(target["Input"], when)
        try:
            self._sqs.send_message(**parking.send_message_of(text))
            self.fired += 1
        except Exception as exc:
            self._dead_letter(schedule, text, exc)

    def _fire(self, schedule: dict[str, Any]) -> None:
        target = schedule["Target"]
        if target["Arn"] == parking.SEND_MESSAGE_TARGET:
            try:
                self._sqs.send_message(**parking.send_message_of(target["Input"]))
                self.fired += 1
            except Exception as exc:
                self._dead_letter(schedule, target["Input"], exc)
        if schedule.get("ActionAfterCompletion") == "DELETE":
            self._scheduler.delete_schedule(Name=schedule["Name"], GroupName=schedule["GroupName"])
        else:  # one-time: done; Scheduler leaves it, but never fires it again
            self._scheduler.update_schedule(
                **{k: schedule[k] for k in _UPDATE_KEYS if k in schedule}, State="DISABLED"
            )

    def _dead_letter(self, schedule: dict[str, Any], text: str, error: Exception) -> None:
        """As Scheduler's dead letter: the input as the body, and its attributes about the
        failure (parking.SCHEDULER_DEAD_LETTER_ATTRIBUTES)."""
        target = schedule["Target"]
        arn = target.get("DeadLetterConfig", {}).get("Arn")
        if not arn:
            return
        account, name = arn.split(":")[4:6]
        url = self._sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)
        code = getattr(error, "response", {}).get("Error", {}).get("Code") or type(error).__name__
        said = {
            "ERROR_CODE": code,
            "ERROR_MESSAGE": str(error)[:1000] or code,
            "EXECUTION_ID": uuid.uuid4().hex,
            "SCHEDULE_ARN": schedule.get("Arn") or schedule["Name"],
            "TARGET_ARN": target["Arn"],
        }
        attributes: dict[str, Any] = {
            k: {"DataType": "String", "StringValue": v} for k, v in said.items()
        }
        self._sqs.send_message(
            QueueUrl=url["QueueUrl"], MessageBody=text, MessageAttributes=attributes
        )
        self.dead_lettered += 1


# occurrences one read fires at most (a virtual clock that jumps a year)
_MOST_AT_ONCE = 1000


def any_due_in_moto(
    region: str, recurring_due: Callable[[str, str, Any, float], bool] | None = None
) -> Callable[[float], bool]:
    """Whether the moto server of this process holds an enabled schedule due at a time, in
    the account and Region the runner's API calls reach (read in place: no request). moto
    keeps one store per process: every emulator of a process sees the same schedules."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.scheduler.models import scheduler_backends

    def due(now: float) -> bool:
        # the account moto gives the runner's requests: MOTO_ACCOUNT_ID, read per request
        account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
        backend = scheduler_backends[account][region]
        # copies: the server's threads add and delete schedules meanwhile
        for group in list(backend.schedule_groups.values()):
            for schedule in list(group.schedules.values()):
                expression = schedule.schedule_expression
                if expression.startswith(("cron(", "rate(")):
                    modified = schedule.last_modified_date
                    if recurring_due is not None and recurring_due(
                        group.name, schedule.name, modified, now
                    ):
                        return True
                    continue
                if schedule.state == "ENABLED" and _due(expression, now):
                    return True
        return False

    return due


def _due(expression: str, now: float) -> bool:
    """Whether a schedule fires by `now`: an `at(...)` time past; another kind (or a time
    that does not parse) is never fired here."""
    try:
        fire_ms = parking.fire_ms_of(expression)
    except ValueError:
        return False
    return fire_ms is not None and fire_ms <= now * 1000


_UPDATE_KEYS = (
    "Name",
    "GroupName",
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "Target",
)
