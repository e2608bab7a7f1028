"""Read the schedulers' own declarations as recurring schedules, so that moving off beat is
one command (`sqsdelay schedule sync --celery-app module:app`, `--taskiq-broker
module:broker`, `--dramatiq-module module`; docs/schedules.md, "Moving off beat"):

- Celery: `app.conf.beat_schedule` (crontab in the app's zone, an interval, not solar);
- taskiq: the `schedule` labels of the broker's tasks (cron and cron_offset, interval);
- Dramatiq: actors decorated with `sqsdelay.dramatiq.periodic(...)`.

Each entry becomes a `RecurringSchedule` whose occurrence is the message that library's SQS
transport would send for it (body and attributes), straight into the queue its worker
reads: no beat or scheduler process runs. Every entry is read before any call; one that
cannot map is refused (`InvalidSchedule`) naming it and saying why. The pure rules are
`core/schedule_sources.py`.
"""

from __future__ import annotations

import importlib
import uuid
from base64 import b64encode
from collections.abc import Iterable
from typing import Any, Final

from sqsdelay.core import queue_names
from sqsdelay.core import schedule_sources as rules
from sqsdelay.core.recurring import RecurringSchedule, occurrence_id
from sqsdelay.errors import ConfigError, InvalidSchedule

# A Dramatiq message's id cannot carry the occurrence (its body is base64): one per schedule
_IDS: Final = uuid.UUID("6f1d3c0e-2b8a-4e57-9a51-0d4c1e7b9f21")
# Celery's beat options that map to the task message; others are refused by name
_CELERY_OPTIONS: Final = frozenset({"queue", "routing_key", "exchange", "priority"})
PERIODIC_ATTRIBUTE: Final = "sqsdelay_periodic"


def load(spec: str, what: str) -> Any:
    """`module:attribute` (or `module` alone for a module)."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what} {spec!r}: cannot import {module_name!r} ({exc})") from None
    if not attribute:
        return module
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigError(f"{what} {spec!r}: {module_name} has no {attribute!r}") from None


def _checked(
    source: str, pairs: Iterable[tuple[str, RecurringSchedule]]
) -> list[RecurringSchedule]:
    listed = list(pairs)
    rules.unique(source, ((entry, s.name) for entry, s in listed))
    return [s for _, s in listed]


def _schedule(source: str, entry: str, **fields: Any) -> RecurringSchedule:
    try:
        return RecurringSchedule.of(**fields)
    except InvalidSchedule as exc:
        raise rules.refused(source, entry, str(exc)) from None


# ---- Celery ----


def from_celery(app: Any) -> list[RecurringSchedule]:
    """`app.conf.beat_schedule` as recurring schedules into the Celery queues' SQS names
    (`queue_name_prefix` included), each occurrence the task message kombu's SQS transport
    sends, its task id `NAME@<scheduled time>`."""
    from celery import schedules as celery_schedules

    beat = dict(app.conf.beat_schedule or {})
    out = []
    for entry, spec in beat.items():
        if not isinstance(spec, dict) or "task" not in spec or "schedule" not in spec:
            raise rules.refused("beat entry", entry, "needs 'task' and 'schedule'")
        name = rules.schedule_name("beat entry", entry)
        timing = _celery_timing(app, entry, spec, celery_schedules)
        options = dict(spec.get("options") or {})
        unknown = sorted(set(options) - _CELERY_OPTIONS)
        if unknown:
            raise rules.refused(
                "beat entry",
                entry,
                f"options {unknown} do not map to a schedule (a countdown, "
                "eta or expires is relative to each run, which Scheduler's message cannot "
                "say): shift the cron instead, or drop them; queue, routing_key, exchange "
                "and priority map",
            )
        if spec.get("relative"):
            raise rules.refused(
                "beat entry",
                entry,
                "relative=True rounds the interval to the clock: give a crontab instead",
            )
        queue, body, group = celery_message(
            app,
            spec["task"],
            list(spec.get("args") or ()),
            dict(spec.get("kwargs") or {}),
            options,
            occurrence_id(name),
        )
        schedule = _schedule(
            "beat entry", entry, name=name, queue=queue, body=body, group_id=group, **timing
        )
        out.append((entry, schedule))
    return _checked("beat entry", out)


def _celery_timing(app: Any, entry: str, spec: dict[str, Any], s: Any) -> dict[str, Any]:
    when = spec["schedule"]
    if isinstance(when, s.solar):
        raise rules.refused(
            "beat entry",
            entry,
            "solar schedules have no cron: Scheduler cannot fire at "
            "sunrise or sunset. Give a crontab near the event, or keep beat for this entry "
            "(leave it out of beat_schedule here)",
        )
    if isinstance(when, s.crontab):
        expression = rules.celery_cron(
            when._orig_minute,
            when._orig_hour,
            when._orig_day_of_month,
            when._orig_month_of_year,
            when._orig_day_of_week,
            entry,
        )
        return {"cron": expression, "timezone": celery_zone(app, entry)}
    if type(when) is s.schedule:
        seconds = when.run_every.total_seconds()
    elif isinstance(when, s.BaseSchedule):
        raise rules.refused(
            "beat entry",
            entry,
            f"{type(when).__name__} is a schedule class of its own, with no cron or rate "
            "Scheduler knows: give a crontab or an interval",
        )
    elif isinstance(when, int | float) and not isinstance(when, bool):
        seconds = float(when)
    else:
        seconds = rules.interval_seconds(when, "beat entry", entry)
    return {"rate": rules.rate_of(seconds, "beat entry", entry)}


def celery_zone(app: Any, entry: str) -> str:
    """The zone beat reads a crontab in: `timezone`, else UTC with `enable_utc`."""
    if app.conf.timezone:
        return rules.zone_name(app.conf.timezone, "beat entry", entry)
    if app.conf.enable_utc:
        return "UTC"
    raise rules.refused(
        "beat entry",
        entry,
        "the app runs crontabs in the machine's local time "
        "(enable_utc=False, no timezone): set app.conf.timezone to its IANA name",
    )


def celery_message(
    app: Any,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any],
    options: dict[str, Any],
    task_id: str,
) -> tuple[str, str, str | None]:
    """The SQS queue name, body and FIFO group of the message kombu's SQS transport sends
    for `app.send_task(task, args, kwargs, task_id=task_id, **options)`: Celery's protocol 2
    (`app.amqp.as_task_v2`), serialized by the app's task_serializer, the body encoded as
    kombu's virtual channel encodes it, the envelope JSON (kombu's SQS transport reads a
    body that is not base64 as it is: the task id stays readable for Scheduler to fill in)."""
    from kombu import serialization
    from kombu.transport.SQS import CHARS_REPLACE_TABLE
    from kombu.utils.json import dumps

    routed = app.amqp.router.route(dict(options), task, args, kwargs)
    queue = routed["queue"]
    routing_key = routed.get("routing_key") or queue.routing_key or queue.name
    exchange = routed.get("exchange") or (queue.exchange.name if queue.exchange else "")
    exchange = getattr(exchange, "name", exchange)
    message = app.amqp.as_task_v2(task_id, task, args, kwargs, origin="sqsdelay-schedule")
    serialized = serialization.dumps(  # type: ignore[no-untyped-call]
        message.body, serializer=app.conf.task_serializer
    )
    content_type, encoding, body = serialized
    encoded = body if isinstance(body, bytes) else body.encode(encoding or "utf-8")
    envelope = {
        "body": b64encode(encoded).decode(),
        "content-encoding": encoding,
        "content-type": content_type,
        "headers": message.headers,
        "properties": {
            **message.properties,
            "delivery_mode": 2,
            "delivery_info": {"exchange": exchange, "routing_key": routing_key},
            "priority": options.get("priority") or 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid5(_IDS, task_id)),
        },
    }
    transport = dict(app.conf.broker_transport_options or {})
    name = str(transport.get("queue_name_prefix", "")) + queue.name
    if name.endswith(".fifo"):
        sqs_name = name.removesuffix(".fifo").translate(CHARS_REPLACE_TABLE) + ".fifo"
    else:
        sqs_name = name.translate(CHARS_REPLACE_TABLE)
    group = "default" if queue_names.is_fifo(sqs_name) else None  # kombu's, as sqsdelay's
    return sqs_name, str(dumps(envelope)), group  # type: ignore[no-untyped-call]


# ---- taskiq ----


def from_taskiq(broker: Any) -> list[RecurringSchedule]:
    """The `schedule` labels of the broker's tasks, as taskiq's LabelScheduleSource reads
    them, each occurrence the message taskiq-aio-sqs sends (the broker's formatter's
    TaskiqMessage, its task id `NAME@<scheduled time>`) into the `queue` label's queue."""
    from taskiq.kicker import AsyncKicker

    out = []
    for task_name, task in sorted(broker.get_all_tasks().items()):
        entries = task.labels.get("schedule", [])
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise rules.refused("taskiq schedule", f"{task_name}[{i}]", "is not a mapping")
            given = entry.get("schedule_id") or (
                task_name if len(entries) == 1 else f"{task_name}-{i}"
            )
            where = f"{task_name} ({given})"
            name = rules.schedule_name("taskiq schedule", str(given))
            timing = rules.taskiq_timing(entry, "taskiq schedule", where)
            labels = {**dict(entry.get("labels") or {}), **task.labels}
            labels.pop("schedule", None)
            if labels.get("delay"):
                raise rules.refused(
                    "taskiq schedule",
                    where,
                    "a delay label delays each run, "
                    "which Scheduler's message cannot say: shift the cron",
                )
            kicker: AsyncKicker[Any, Any] = AsyncKicker(task_name, broker, labels).with_task_id(
                occurrence_id(name)
            )
            message = kicker._prepare_message(*entry.get("args", []), **entry.get("kwargs", {}))
            raw = broker.formatter.dumps(message).message
            try:
                body = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise rules.refused(
                    "taskiq schedule",
                    where,
                    "the broker's formatter writes "
                    "bytes that are not text, which SQS takes no body of: "
                    "use taskiq's JSON formatter",
                ) from None
            queue, group = _taskiq_queue(broker, message, where)
            schedule = _schedule(
                "taskiq schedule",
                where,
                name=name,
                queue=queue,
                body=body,
                group_id=group,
                **timing,
            )
            out.append((where, schedule))
    return _checked("taskiq schedule", out)


def _taskiq_queue(broker: Any, message: Any, where: str) -> tuple[str, str | None]:
    """taskiq-aio-sqs's queue for the message (its `queue` label) and MessageGroupId."""
    queues = getattr(broker, "_queues", None)
    default = getattr(broker, "_default_queue", None)
    if queues is None or default is None:
        raise rules.refused(
            "taskiq schedule",
            where,
            "the broker is not taskiq-aio-sqs's SQSBroker (or sqsdelay.taskiq's)",
        )
    name = str(message.labels.get("queue", default.name))
    queue = queues.get(name)
    if queue is None:
        raise rules.refused(
            "taskiq schedule", where, f"its queue {name!r} is not one of the broker's (with_queues)"
        )
    fair = bool(getattr(broker, "_is_fair_queue", False))
    group = (
        str(message.labels.get("group_id", message.task_name)) if queue.is_fifo or fair else None
    )
    return name, group


# ---- Dramatiq ----


def from_dramatiq(module: Any) -> list[RecurringSchedule]:
    """The actors of `module` decorated with `sqsdelay.dramatiq.periodic`, each occurrence
    the message dramatiq-sqs sends for `actor.send(*args, **kwargs)` into
    `<namespace>_<queue>`. Its message id is one per schedule (dramatiq-sqs's body is
    base64, which Scheduler's keyword cannot be written into): the occurrence is in the
    message's attributes, and a Dramatiq worker reads none."""
    import dramatiq

    out = []
    actors = [a for a in vars(module).values() if isinstance(a, dramatiq.Actor)]
    for actor in sorted(actors, key=lambda a: a.actor_name):
        declared = getattr(actor, PERIODIC_ATTRIBUTE, None) or getattr(
            actor.fn, PERIODIC_ATTRIBUTE, []
        )
        for i, spec in enumerate(declared):
            given = spec.get("name") or (
                actor.actor_name if len(declared) == 1 else f"{actor.actor_name}-{i}"
            )
            where = f"{actor.actor_name} ({given})"
            name = rules.schedule_name("dramatiq actor", str(given))
            if actor.options.get("max_age") is not None:
                raise rules.refused(
                    "dramatiq actor",
                    where,
                    "max_age drops a message by the "
                    "time it was made, which is one per schedule here: "
                    "remove max_age from the actor",
                )
            broker = actor.broker
            if not hasattr(broker, "namespace"):
                raise rules.refused(
                    "dramatiq actor",
                    where,
                    "its broker is not dramatiq-sqs's SQSBroker (or sqsdelay.dramatiq's)",
                )
            message = actor.message_with_options(
                args=tuple(spec.get("args", ())), kwargs=dict(spec.get("kwargs") or {})
            ).copy(message_id=str(uuid.uuid5(_IDS, name)), message_timestamp=0)
            queue = (
                f"{broker.namespace}_{message.queue_name}"
                if broker.namespace
                else message.queue_name
            )
            timing = {k: spec[k] for k in ("cron", "rate") if spec.get(k) is not None}
            schedule = _schedule(
                "dramatiq actor",
                where,
                name=name,
                queue=queue,
                body=b64encode(message.encode()).decode(),
                timezone=spec.get("timezone") or "UTC",
                **timing,
            )
            out.append((where, schedule))
    return _checked("dramatiq actor", out)
