"""taskiq on SQS with delays and retry backoffs of any length: a drop-in replacement for
taskiq-aio-sqs's broker.

    from sqsdelay.taskiq import SQSBroker  # instead of: from taskiq_aio_sqs import SQSBroker
    broker = SQSBroker("myapp-tasks")

taskiq-aio-sqs validates the `delay` label to 0-900 s and refuses it on a FIFO queue, and
SQS itself stops at 15 minutes: `task.kicker().with_labels(delay=86400).kiq()` fails, and so
does every retry of `SmartRetryMiddleware` whose backoff passes 15 minutes. This subclass
sends such a task (any delay beyond SQSDELAY_MAX_NATIVE_DELAY_SECONDS, to the millisecond,
and any delay into a FIFO queue, in its group) through sqsdelay to the queue's delay queue,
with the body and group taskiq-aio-sqs would have sent; `sqsdelay worker <queue>` hands it
over when it is due and the taskiq worker runs it as an ordinary message. A shorter delay,
and no delay, are sent by taskiq-aio-sqs itself, a fraction of a second rounded up
(taskiq-aio-sqs rounds "2.5" to 2 s): never early. The rule: `core/taskiq_delay.py`. A
task of 1 MiB or more goes to the broker's `s3_extended_bucket_name` bucket on both routes,
with the pointer taskiq-aio-sqs writes, under a key of its own per kick
(`core/taskiq_offload.py`).

What this relies on in taskiq-aio-sqs 2.1 (`taskiq_aio_sqs/sqs_broker.py`, `SQSBroker`):
- `kick(message)` sends a `BrokerMessage`, reading its `delay` label (default: the
  broker's `delay_seconds`); the native route calls it with the label rounded up.
- `build_kick_kwargs(message, queue, queue_url)`, its documented extension point, gives the
  `MessageBody`, `MessageGroupId` (a FIFO or fair queue: the `group_id` label, else the task
  name) and any `MessageAttributes` a subclass adds; the sqsdelay route sends those. It is
  called without the `delay` label, which it would refuse beyond 900 s.
- `_resolve_queue(message)` (private) maps the `queue` label to the queue's `SQSQueue` and
  URL, as `kick` does; `_aws_endpoint_url`, `_aws_region`, `_aws_access_key_id` and
  `_aws_secret_access_key` (private) are the constructor's arguments, which sqsdelay's own
  clients use too. Hence the pin `taskiq-aio-sqs>=2.1,<2.2`.
- `s3_extended_bucket_name` and `_s3_client` (private, opened by `startup`) write a large
  task's object, inside `handle_exceptions`, as `_send_single_message` does.

With OpenTelemetry (`sqsdelay[otel]`, docs/opentelemetry.md) the broker adds a middleware
(`TraceContext`) that puts the active W3C trace context into a kicked task's labels (its
body: taskiq-aio-sqs hands a task no message attributes), whatever the route, and runs each
task in a `process <queue>` span linked to it, or its child (SQSDELAY_OTEL_PARENT=child).

The task id is sqsdelay's message id: with SQSDELAY_REGISTRY=dynamodb, `await
broker.cancel(task_id)` (or `sqsdelay cancel <queue> <task_id>`) cancels a scheduled task.
A retry keeps its task id and is a new send: never deduplicated away. With
`use_task_id_for_deduplication`, a FIFO kick's `MessageDeduplicationId` goes on as the send's
`deduplication_id` (a retry's: one of its own per retry, `core/taskiq_delay.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from sqsdelay import deprecations, errors, otel
from sqsdelay.core import delays, framework_queues, taskiq_delay, taskiq_offload
from sqsdelay.extras import require

require("taskiq", "sqsdelay.taskiq")

import taskiq_aio_sqs  # noqa: E402
from taskiq import ScheduledTask, ScheduleSource, TaskiqMiddleware  # noqa: E402
from taskiq.kicker import AsyncKicker  # noqa: E402
from taskiq_aio_sqs import exceptions as sqs_exceptions  # noqa: E402

from sqsdelay.settings import Settings  # noqa: E402

if TYPE_CHECKING:
    from taskiq import TaskiqMessage, TaskiqResult
    from taskiq.message import BrokerMessage

    from sqsdelay.aws.sender import AsyncSender, Message
    from sqsdelay.core.types import CancelOutcome

_DELAY_LABEL = "delay"


class InvalidDelay(errors.InvalidDelay, sqs_exceptions.BrokerConfigError):
    """A `delay` label that is no delay, a due time without a time zone, or either beyond
    SQSDELAY_MAX_DELAY_SECONDS: caught as
    sqsdelay's `InvalidDelay` or as taskiq-aio-sqs's `BrokerConfigError` (which its own
    label errors are). `kiq` raises taskiq's `SendTaskError` from it."""

    def __init__(self, message: str) -> None:
        sqs_exceptions.BrokerConfigError.__init__(self, error=message)


class MessageTooLarge(errors.MessageTooLarge, sqs_exceptions.ExtendedBucketNameMissingError):
    """Too large for SQS once sqsdelay's attributes are added, and the broker has no
    `s3_extended_bucket_name` to offload it to (with one, the sqsdelay route offloads as
    taskiq-aio-sqs does): caught as sqsdelay's `MessageTooLarge` or as taskiq-aio-sqs's
    `ExtendedBucketNameMissingError` (a `BrokerConfigError`), which its own route raises."""

    __template__ = "SQS Broker configuration error: {error}"

    def __init__(self, message: str) -> None:
        sqs_exceptions.BrokerConfigError.__init__(self, error=message)


def _broker_over_env(settings: Settings, broker: dict[str, Any]) -> Settings:
    """`settings` with the broker's values in the fields `Settings(...)` was not given: those
    equal to what the environment alone gives (pydantic-settings does not say where a value
    came from). Without `settings=`, the broker's are laid over the environment the same way
    (`deprecations.settings_of`'s `over_env`): one rule for both forms."""
    try:
        env_only: Settings | None = type(settings)()
    except ValueError:  # the environment alone is not valid: fill what is unset only
        env_only = None
    update = {
        k: v
        for k, v in broker.items()
        if getattr(settings, k) == (getattr(env_only, k) if env_only is not None else None)
    }
    return settings.model_copy(update=update)


class SQSBroker(taskiq_aio_sqs.SQSBroker):
    """taskiq-aio-sqs's broker, with delays beyond SQS's 15 minutes, and delays into FIFO
    queues, sent through sqsdelay.

    It takes taskiq-aio-sqs's arguments, plus `settings`: sqsdelay's `Settings` (default:
    SQSDELAY_* from the environment). The broker's `endpoint_url` and `region_name` are
    sqsdelay's too, over SQSDELAY_REGION and SQSDELAY_ENDPOINT_URL, so that both send to one
    Region; only a value given in `Settings(...)` itself wins over the broker's. The same
    with or without `settings=`. `sqsdelay=` (a `Settings`, used as it is, or fields) is the
    deprecated form."""

    def __init__(
        self,
        sqs_queue_name: str,
        *,
        settings: Settings | None = None,
        sqsdelay: Settings | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(sqs_queue_name, **kwargs)
        broker_defaults = {"region": self._aws_region}
        if self._aws_endpoint_url:
            broker_defaults["endpoint_url"] = self._aws_endpoint_url
        if settings is not None:  # the broker's over the environment, as without settings=
            settings = _broker_over_env(settings, broker_defaults)
        settings = deprecations.settings_of(
            settings, sqsdelay, old_form="SQSBroker(sqsdelay=...)", over_env=broker_defaults
        )
        framework_queues.check_no_prefix(
            settings.queue_prefix, "taskiq", "taskiq-aio-sqs's SQS names"
        )
        self.sqsdelay_settings = settings
        if otel.enabled(settings):  # the context into the labels, the task's span from them
            self.add_middlewares(TraceContext(settings))
        self._sqsdelay_sender: AsyncSender | None = None
        self._sqsdelay_opening = asyncio.Lock()
        self._dedup_warned = False

    async def kick(self, message: BrokerMessage) -> None:
        """Send a task: with taskiq-aio-sqs within the native delay, else through sqsdelay."""
        _, queue, queue_url = self._resolve_queue(message)
        try:
            route = taskiq_delay.taskiq_route(
                message.labels.get(_DELAY_LABEL, self.delay_seconds),
                max_native_delay=self.sqsdelay_settings.max_native_delay_seconds,
                fifo=queue.is_fifo,
            )
        except errors.InvalidDelay as exc:
            raise InvalidDelay(str(exc)) from None
        if route.how == "native":
            await super().kick(_with_delay(message, route.delay_seconds))
            return
        # Everything but the delay as taskiq-aio-sqs (or a subclass of this) would send it.
        kwargs: dict[str, Any] = dict(
            await self.build_kick_kwargs(_with_delay(message, 0), queue, queue_url)
        )
        # The sender loads at startup: `import sqsdelay.taskiq` stays light.
        from sqsdelay.aws.sender import Message

        delayed = Message(
            kwargs["MessageBody"],
            delay=timedelta(milliseconds=route.delay_ms),
            attributes=kwargs.get("MessageAttributes", {}),
            id=message.task_id,
            group_id=kwargs.get("MessageGroupId"),
            # use_task_id_for_deduplication (FIFO queues): kept on every hop
            deduplication_id=taskiq_delay.deduplication_id(
                kwargs.get("MessageDeduplicationId"), message.labels.get("_retries")
            ),
        )
        delayed = self._with_room_for_dedup(queue.name, delayed, route)
        # A body taskiq-aio-sqs would offload, or one that sqsdelay's attributes make too
        # large: to S3, and the pointer through sqsdelay (`core/taskiq_offload.py`).
        if taskiq_offload.offloaded(delayed.body) or not self._fits(queue.name, delayed):
            bucket = self.s3_extended_bucket_name
            if not bucket:
                raise MessageTooLarge(_too_large(message.task_name, delayed.body))
            # A key per kick: a duplicate kick (sent nothing) leaves the first one's body.
            pointer = taskiq_offload.pointer(
                bucket, message.task_id, delayed.attributes, unique=uuid.uuid4().hex
            )
            delayed = replace(delayed, body=pointer.body, attributes=pointer.attributes)
            delayed = self._with_room_for_dedup(queue.name, delayed, route)  # one more now
            self._fits(queue.name, delayed, check=True)  # refused before the object is written
            with self.handle_exceptions(queue_name=queue.name):  # NoSuchBucket: its error
                await self._s3_client.put_object(
                    Body=message.message, Bucket=pointer.bucket, Key=pointer.key
                )
        sender = await self._sender()
        await sender.send(
            queue.name,
            delayed.body,
            delay=delayed.delay,
            attributes=delayed.attributes,
            id=delayed.id,
            group_id=delayed.group_id,
            deduplication_id=delayed.deduplication_id,
        )

    def _with_room_for_dedup(
        self, queue: str, delayed: Message, route: taskiq_delay.TaskiqRoute
    ) -> Message:
        """The message as it is sent: with its deduplication id, unless that attribute
        alone leaves no room (a subclass's attributes take SQS's ten), when it goes without
        it, with a warning, rather than not at all. Any other refusal is the send's own."""
        if delayed.deduplication_id is None:
            return delayed
        from sqsdelay.aws.sender import plan

        def refused_for_room(message: Message) -> bool:
            try:
                plan(queue, message, self.sqsdelay_settings, now=time.time())
            except errors.TooManyAttributes:
                return True
            except errors.InvalidInput:
                pass  # the send says why, as it would without a deduplication id
            return False

        bare = replace(delayed, deduplication_id=None)
        if not refused_for_room(delayed) or refused_for_room(bare):
            return delayed
        self._warn_dedup_not_kept(queue, route, len(delayed.attributes))
        return bare

    def _warn_dedup_not_kept(
        self, queue: str, route: taskiq_delay.TaskiqRoute, attributes: int
    ) -> None:
        """`use_task_id_for_deduplication` on a FIFO queue, and no room for the attribute
        that carries the deduplication id. With the registry, a re-kick of a task id still
        scheduled beyond the native delay is a duplicate and sends nothing, as SQS would
        drop it; a shorter delay, or any without the registry, is delivered once per kick.
        Said once per broker, where it happens, rather than silently."""
        native = self.sqsdelay_settings.max_native_delay_seconds
        recorded = self.sqsdelay_settings.registry == "dynamodb" and taskiq_delay.cancellable(
            route.delay_ms, max_native_delay=native
        )
        if recorded or self._dedup_warned:
            return
        self._dedup_warned = True
        from sqsdelay.logs import get_logger  # here: `import sqsdelay.taskiq` stays light

        get_logger("sqsdelay.taskiq").warning(
            "taskiq.deduplication_not_kept",
            queue=queue,
            delay_ms=route.delay_ms,
            attributes=attributes,
            detail=(
                "use_task_id_for_deduplication: a delayed kick into a FIFO queue carries its "
                "deduplication id in an attribute of sqsdelay's, and this task's "
                f"{attributes} attributes leave no room for it (SQS takes 10), so it is "
                "delivered once per kick (with SQSDELAY_REGISTRY=dynamodb and a delay beyond "
                f"{native} s, SQSDELAY_MAX_NATIVE_DELAY_SECONDS, a re-kick is a duplicate "
                "anyway): give the task fewer MessageAttributes"
            ),
        )

    def _fits(self, queue: str, delayed: Message, *, check: bool = False) -> bool:
        """Whether sqsdelay sends this message (its plan, no I/O): False when it is too
        large, unless `check`, which raises that too. A bad delay raises, before anything
        is sent."""
        from sqsdelay.aws.sender import plan

        try:
            plan(queue, delayed, self.sqsdelay_settings, now=time.time())
        except errors.MessageTooLarge as exc:
            if check:
                raise MessageTooLarge(str(exc)) from None
            return False
        except errors.InvalidDelay as exc:
            raise InvalidDelay(str(exc)) from None
        return True

    async def cancel(self, task_id: str, *, queue: str | None = None) -> CancelOutcome:
        """Cancel a task scheduled through sqsdelay by its task id (the default queue unless
        `queue` names another): `cancelled`, `too-late` (already handed over) or `unknown`.
        Needs SQSDELAY_REGISTRY=dynamodb (or parking)."""
        sender = await self._sender()
        return await sender.cancel(queue or self._default_queue.name, task_id)

    async def startup(self) -> None:
        await super().startup()
        # sqsdelay's clients open here, as taskiq-aio-sqs's do, not in the first long kick:
        # opening them (aioboto3, service models) took up to 2.5 s on a loaded machine, and
        # the first call opens the connection pool (aiohttp loads the CA bundle: 0.1 s idle,
        # 0.8 s at load 9), a lateness that the first delayed task would carry (its delay
        # counts from when SQS takes it).
        sender = await self._sender()
        await sender._client.get_queue_url(QueueName=self._default_queue.name)

    async def shutdown(self) -> None:
        await super().shutdown()
        if self._sqsdelay_sender is not None:
            sender, self._sqsdelay_sender = self._sqsdelay_sender, None
            await sender.__aexit__(None, None, None)

    async def _sender(self) -> AsyncSender:
        async with self._sqsdelay_opening:  # two kicks at once open one sender
            if self._sqsdelay_sender is None:
                import aioboto3

                from sqsdelay.aws.sender import AsyncSender

                sender = AsyncSender(self.sqsdelay_settings)
                if self._aws_access_key_id:
                    # Keys given to the broker are sqsdelay's too (else: the default chain).
                    sender._session = aioboto3.Session(
                        aws_access_key_id=self._aws_access_key_id,
                        aws_secret_access_key=self._aws_secret_access_key,
                    )
                self._sqsdelay_sender = await sender.__aenter__()
            return self._sqsdelay_sender


# The span of the task a receiver's callback runs: taskiq runs each message's pre_execute,
# task and post_execute in one asyncio task of its own, so a context variable is the task's.
_TASK_SPAN: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar(
    "sqsdelay_taskiq_span", default=None
)


class TraceContext(TaskiqMiddleware):
    """A task's OpenTelemetry span (`process <queue>`), linked to the kicker's trace context
    in the task's labels, or its child (SQSDELAY_OTEL_PARENT=child). The kick puts the
    active context there (`pre_send`) unless the labels have one: a retry keeps its
    original's, taskiq's own OpenTelemetryMiddleware writes the same names."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    def pre_send(self, message: TaskiqMessage) -> TaskiqMessage:
        message.labels.update(otel.missing_context(self.settings, message.labels))
        return message

    def pre_execute(self, message: TaskiqMessage) -> TaskiqMessage:
        default = getattr(getattr(self.broker, "_default_queue", None), "name", "")
        queue = str(message.labels.get("queue") or default)
        opened = otel.headers_span(self.settings, message.labels, queue, message.task_id)
        _TASK_SPAN.set((opened, opened.__enter__()))
        return message

    def on_error(
        self, message: TaskiqMessage, result: TaskiqResult[Any], exception: BaseException
    ) -> None:
        held = _TASK_SPAN.get()
        if held is not None:
            otel.failed(held[1], exception)

    def post_execute(self, message: TaskiqMessage, result: TaskiqResult[Any]) -> None:
        held = _TASK_SPAN.get()
        _TASK_SPAN.set(None)
        if held is not None:
            held[0].__exit__(None, None, None)


class ScheduleNotCancelled(errors.SqsDelayError):
    """`unschedule()` (taskiq's `delete_schedule`) did not cancel the task: it runs, or ran.
    `outcome` says why: `too-late` (handed over at its time), `unknown` (no scheduled task
    under that id in the registry) or `native` (sent with SQS's own `DelaySeconds`, which
    nothing takes back); `schedule_id`, `task_id` and `queue` say which. The message says
    what to do."""

    def __init__(
        self,
        message: str,
        *,
        outcome: Literal["too-late", "unknown", "native"],
        schedule_id: str,
        task_id: str,
        queue: str,
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.schedule_id = schedule_id
        self.task_id = task_id
        self.queue = queue


@dataclass(frozen=True)
class _Kicked:
    """What `add_schedule` sent, for `delete_schedule`: the id the task went under (the
    kicker's `with_task_id`, else the schedule id), its queue, its time, and whether it has a
    registry record to cancel."""

    task_id: str
    queue: str
    due: float  # epoch seconds
    cancellable: bool


# A schedule is remembered until this long after its time: a later unschedule is too late
# whatever it finds, and a worker whose retries go through a DelayedSource keeps no more.
_REMEMBERED_AFTER_DUE_SECONDS = 3600


class DelayedSource(ScheduleSource):
    """taskiq's `schedule_by_time` through sqsdelay, with no scheduler process: `add_schedule`
    kicks the task at once with the delay that ends at its time, so that
    `await task.kicker().schedule_by_time(DelayedSource(broker), when, ...)` runs it once at
    `when`, and `SmartRetryMiddleware(schedule_source=DelayedSource(broker))` retries so.
    The task id is the schedule id (or the kicker's `with_task_id`): `unschedule()` and
    `delete_schedule` cancel the id the task was sent under, with the registry, and raise
    `ScheduleNotCancelled` when it still runs: too late, not found, or a time within
    SQSDELAY_MAX_NATIVE_DELAY_SECONDS (sent with SQS's own `DelaySeconds`, which nothing can
    take back). Recurring schedules (cron, interval) are taskiq's scheduler's: refused here.

    What this relies on in taskiq 0.13: `ScheduleSource.add_schedule`/`delete_schedule`, and
    `schedule_by_time` handing over a `ScheduledTask` with the kicker's serialised labels,
    args and kwargs; the kick is `AsyncKicker(...).kiq`, so middlewares see it."""

    def __init__(self, broker: SQSBroker) -> None:
        self.broker = broker
        self._kicked: dict[str, _Kicked] = {}  # schedule id -> what was sent
        self._forget: list[tuple[float, str]] = []  # (when to forget, schedule id), a heap

    async def get_schedules(self) -> list[ScheduledTask]:
        return []  # nothing for a scheduler to poll: every task is in SQS already

    async def add_schedule(self, schedule: ScheduledTask) -> None:
        if schedule.time is None:
            raise errors.ConfigError(
                "DelayedSource takes schedule_by_time only: run taskiq's scheduler with a "
                "schedule source of its own for cron and interval schedules"
            )
        when = schedule.time
        if when.tzinfo is None:
            raise InvalidDelay(
                f"the time {when.isoformat()} has no time zone: give an aware datetime, "
                "e.g. datetime.now(timezone.utc) + timedelta(days=3)"
            )
        now = time.time()
        ms = delays.delay_milliseconds(deliver_at=when, now=now)
        task_id = schedule.task_id or schedule.schedule_id
        kicker: AsyncKicker[Any, Any] = AsyncKicker(
            task_name=schedule.task_name, broker=self.broker, labels=dict(schedule.labels)
        )
        await (
            kicker.with_task_id(task_id)
            .with_labels(delay=str(Decimal(ms) / 1000))
            .kiq(*schedule.args, **schedule.kwargs)
        )
        native = self.broker.sqsdelay_settings.max_native_delay_seconds
        queue = str(schedule.labels.get("queue") or self.broker._default_queue.name)
        due = now + ms / 1000
        self._remember(
            schedule.schedule_id,
            _Kicked(task_id, queue, due, taskiq_delay.cancellable(ms, max_native_delay=native)),
            now,
        )

    def _remember(self, schedule_id: str, kicked: _Kicked, now: float) -> None:
        while self._forget and self._forget[0][0] < now:
            _, old = heapq.heappop(self._forget)
            known = self._kicked.get(old)
            if known is not None and known.due + _REMEMBERED_AFTER_DUE_SECONDS < now:
                del self._kicked[old]
        self._kicked[schedule_id] = kicked
        heapq.heappush(self._forget, (kicked.due + _REMEMBERED_AFTER_DUE_SECONDS, schedule_id))

    async def delete_schedule(self, schedule_id: str) -> None:
        """Cancel the task of a schedule, under the id it was sent with. A schedule this
        source did not add (another process's) is looked for under the schedule id in the
        broker's default queue. Raises `ScheduleNotCancelled` when the task still runs."""
        kicked = self._kicked.get(schedule_id)
        if kicked is None:
            kicked = _Kicked(schedule_id, self.broker._default_queue.name, 0.0, True)
        native = self.broker.sqsdelay_settings.max_native_delay_seconds
        if not kicked.cancellable:
            self._kicked.pop(schedule_id, None)
            at = datetime.fromtimestamp(kicked.due, UTC).isoformat(timespec="milliseconds")
            raise ScheduleNotCancelled(
                f"the schedule {schedule_id!r} (task {kicked.task_id!r}) cannot be cancelled: "
                f"its time was within SQSDELAY_MAX_NATIVE_DELAY_SECONDS ({native} s) when it "
                f"was added, so it went to {kicked.queue!r} with SQS's own DelaySeconds, which "
                f"nothing can take back; it runs at {at}. Schedule a task you may cancel more "
                f"than {native} s ahead, or have the task check a flag of yours",
                outcome="native",
                schedule_id=schedule_id,
                task_id=kicked.task_id,
                queue=kicked.queue,
            )
        outcome = await self.broker.cancel(kicked.task_id, queue=kicked.queue)
        self._kicked.pop(schedule_id, None)
        if outcome == "cancelled":
            return
        if outcome == "too-late":
            why = "it was handed over at its time and runs (or ran): unschedule it before its time"
        else:
            why = (
                "the registry has no scheduled task under that id, so if it was sent it "
                "runs. Another process's schedule whose kicker gave with_task_id is found "
                "only by that id: `await broker.cancel(task_id, queue=...)`; a task kicked "
                "without SQSDELAY_REGISTRY=dynamodb has no record to cancel"
            )
        raise ScheduleNotCancelled(
            f"the schedule {schedule_id!r} (task {kicked.task_id!r} in {kicked.queue!r}) was "
            f"not cancelled ({outcome}): {why}",
            outcome=outcome,
            schedule_id=schedule_id,
            task_id=kicked.task_id,
            queue=kicked.queue,
        )


def _too_large(task_name: str, body: str) -> str:
    """Why a task without the bucket option cannot be sent, and what to do: the same for a
    body taskiq-aio-sqs itself would offload and one that sqsdelay's attributes push over."""
    if taskiq_offload.offloaded(body):
        why = (
            f"{len(body)} characters: taskiq-aio-sqs sends a body of 1 MiB or more through "
            "S3, on its own route too"
        )
    else:
        why = (
            f"{len(body.encode())} bytes: within SQS's limit alone, over it once sqsdelay's "
            "attributes (the delay, the id) are added"
        )
    return (
        f"the task {task_name!r} is {why}. Give the broker s3_extended_bucket_name=<bucket> "
        "(taskiq-aio-sqs's option: the body goes to S3 and SQS carries a pointer), or make "
        "the task's arguments smaller"
    )


def _with_delay(message: BrokerMessage, seconds: int) -> BrokerMessage:
    """The message with its `delay` label as whole seconds, for taskiq-aio-sqs, which
    would round a fraction down. 0 is no delay to it (a falsy label, which it also takes on
    a FIFO queue), where a missing label would be its `delay_seconds`. The body is
    unchanged: the task sees the labels it was kicked with."""
    return message.model_copy(update={"labels": {**message.labels, _DELAY_LABEL: seconds}})
