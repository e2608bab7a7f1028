"""Building boto3 / aioboto3 SQS clients from settings (the only place that knows how)."""

import contextlib
import functools
import ipaddress
from collections.abc import Callable, Mapping
from importlib.metadata import version
from typing import Any, Literal
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

from sqsdelay.core import quotas
from sqsdelay.core.outcomes import Stats
from sqsdelay.core.queue_lookup import MISSING_QUEUE_CODES as MISSING_QUEUE_CODES  # worker.py
from sqsdelay.errors import ConfigError, QueueMissing, SqsOperationError
from sqsdelay.settings import Settings

# Standard retry mode backs off on throttling; our own code handles per-entry failures.
# A fixed User-Agent names sqsdelay in CloudTrail, and spares botocore from rebuilding its
# default one (sixteen sanitized components) twice per request: 9.5 % of the worker's time
# (docs/benchmarks.md, "Worker profile").
_BOTO_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=5,
    user_agent=f"sqsdelay/{version('sqsdelay')}",
)
# Long polls hold the connection for up to 20 s, so a polling client's read timeout must be
# longer; clients that never long-poll use the call timeout instead.
LONG_POLL_READ_TIMEOUT = quotas.LONG_POLL_SECONDS + 10


def _is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_kwargs(
    settings: Settings,
    *,
    max_pool: int = 10,
    read_timeout: float | None = None,
    validate: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for `client("sqs", ...)`, shared by boto3 and aioboto3. The worker
    passes `validate=False`: it only sends what SQS returned to it, and botocore's client-side
    parameter validation was a tenth of its CPU (docs/benchmarks.md, "Worker profile")."""
    timeout = read_timeout or settings.call_timeout_seconds
    config = Config(
        read_timeout=timeout, max_pool_connections=max_pool, parameter_validation=validate
    )
    kwargs: dict[str, Any] = {"config": _BOTO_CONFIG.merge(config)}
    session = boto3.session.Session()
    region = settings.region or session.region_name
    if settings.endpoint_url:
        kwargs["endpoint_url"] = settings.endpoint_url
        # A local emulator accepts any credentials; only there do we supply placeholders.
        if _is_loopback(settings.endpoint_url):
            region = region or "us-east-1"
            if session.get_credentials() is None:
                kwargs["aws_access_key_id"] = "testing"
                kwargs["aws_secret_access_key"] = "testing"  # noqa: S105 - emulator only
    if not region:
        raise ConfigError("no AWS region configured: set SQSDELAY_REGION (or AWS_REGION)")
    kwargs["region_name"] = region
    return kwargs


def sync_client(settings: Settings) -> Any:
    return boto3.client("sqs", **client_kwargs(settings))


def service_kwargs(settings: Settings, **kwargs: Any) -> dict[str, Any]:
    """As `client_kwargs`, for EventBridge Scheduler and CloudWatch: SQSDELAY_ENDPOINT_URL
    applies only when it is a local emulator (which serves every API); elsewhere it is an
    SQS endpoint."""
    out = client_kwargs(settings, **kwargs)
    if settings.endpoint_url and not _is_loopback(settings.endpoint_url):
        del out["endpoint_url"]
    return out


ExtraService = Literal["scheduler", "dynamodb"]


def sync_service(settings: Settings, service: ExtraService | Literal["cloudwatch"]) -> Any:
    """A boto3 client of a service other than SQS."""
    return boto3.client(service, **service_kwargs(settings))


def extra_services(settings: Settings) -> list[ExtraService]:
    """The services besides SQS that senders and workers call with these settings:
    Scheduler when parking, DynamoDB with the registry."""
    used: dict[ExtraService, bool] = {
        "scheduler": settings.parking == "scheduler",
        "dynamodb": settings.registry == "dynamodb",
    }
    return [service for service, on in used.items() if on]


def sync_clients(
    settings: Settings, given: Mapping[str, Any] | None = None, stats: Stats | None = None
) -> dict[str, Any]:
    """The SQS client and the extra services these settings call (`extra_services`), as
    boto3 clients: each the one `given`, or a new one (counted in `stats`, if any). The one
    place the sender and the Lambda handler make their set."""
    given = given or {}
    made: dict[str, Callable[[], Any]] = {"sqs": functools.partial(sync_client, settings)}
    for extra in extra_services(settings):
        made[extra] = functools.partial(sync_service, settings, extra)
    clients: dict[str, Any] = {}
    for service, make in made.items():
        clients[service] = given.get(service)
        if clients[service] is None:
            clients[service] = make()
            if stats is not None:
                observe(stats, clients[service])
    return clients


async def async_clients(
    settings: Settings,
    session: Any,
    stack: contextlib.AsyncExitStack,
    *,
    max_pool: int,
    validate: bool = True,
    stats: Stats | None = None,
    given: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """As `sync_clients`, with an aioboto3 `session`, each client entered on `stack`: the
    async sender's and the worker's calls (the worker's SQS client skips validation,
    `client_kwargs`; the other services' never do). A client `given` is used as it is (not
    entered, not counted); `session` is only touched for the others."""
    given = given or {}
    clients = {service: c for service, c in given.items() if c is not None}
    made: list[Any] = []
    if "sqs" not in clients:
        sqs = client_kwargs(settings, max_pool=max_pool, validate=validate)
        made.append(await stack.enter_async_context(session.client("sqs", **sqs)))
        clients["sqs"] = made[-1]
    for service in extra_services(settings):
        if service not in clients:
            made.append(await async_service(settings, session, stack, service, max_pool=max_pool))
            clients[service] = made[-1]
    if stats is not None:
        for client in made:
            observe(stats, client)
    return clients


async def async_service(
    settings: Settings,
    session: Any,
    stack: contextlib.AsyncExitStack,
    service: ExtraService,
    *,
    max_pool: int = 10,
) -> Any:
    """An aioboto3 client of a service other than SQS, entered on `stack` (as `sync_service`
    makes a boto3 one)."""
    kwargs = service_kwargs(settings, max_pool=max_pool)
    return await stack.enter_async_context(session.client(service, **kwargs))


def error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "Unknown"))
    return type(exc).__name__


def translate(exc: Exception, operation: str, queue: str) -> SqsOperationError:
    """Turn a botocore failure into a typed error naming the operation and the queue."""
    code = error_code(exc)
    if code in MISSING_QUEUE_CODES:
        # Only QueueResolver knows which `sqsdelay install` command would create it.
        return QueueMissing(operation, queue, "queue does not exist")
    if isinstance(exc, ClientError):
        detail = str(exc.response.get("Error", {}).get("Message", "")) or str(exc)
    elif isinstance(exc, BotoCoreError):
        detail = str(exc)
    else:
        detail = repr(exc)
    return SqsOperationError(operation, queue, code, detail)


# botocore's own list of throttling error codes (the one its standard retry mode backs off on).
_THROTTLING = ThrottledRetryableChecker()


def observe(stats: Stats, client: Any) -> None:
    """Count every call a boto3 or aioboto3 client makes, with the queue or schedule group it
    names, and every attempt the service throttled (botocore retries those on its own)."""
    service = str(client.meta.service_model.service_name)

    def count(model: Any, params: dict[str, Any], **_: Any) -> None:
        queue = params.get("QueueName") or str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
        stats.calls[(model.name, queue or str(params.get("GroupName", "")))] += 1
        stats.tally.calls[(service, model.name)] += 1

    def throttled(response: Any, operation: Any, **_: Any) -> None:
        if response is None:  # the attempt failed before any answer: not throttling
            return
        context = RetryContext(attempt_number=1, parsed_response=response[1])
        if _THROTTLING.is_retryable(context):
            stats.tally.throttled[(service, operation.name)] += 1

    client.meta.events.register("before-parameter-build", count)
    client.meta.events.register("needs-retry", throttled)
