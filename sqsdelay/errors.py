"""Typed errors. Each message says what went wrong and what to do about it."""


class SqsDelayError(Exception):
    """Base class of every error sqsdelay raises on purpose."""


class InvalidInput(SqsDelayError, ValueError):
    """Input that is refused before any call to SQS (CLI exit code 2)."""


class InvalidDelay(InvalidInput):
    pass


class MessageDelayTooLong(InvalidInput):
    """A delay above 900 s while unrestricted delayed delivery is disabled on the sender."""


class InvalidQueueName(InvalidInput):
    pass


class InvalidMessage(InvalidInput):
    pass


class TooManyAttributes(InvalidMessage):
    pass


class MessageTooLarge(InvalidMessage):
    pass


class ConfigError(InvalidInput):
    pass


class SqsOperationError(SqsDelayError):
    """An SQS call failed at run time (CLI exit code 1)."""

    def __init__(self, operation: str, queue: str, code: str, detail: str) -> None:
        self.operation = operation
        self.queue = queue
        self.code = code
        self.detail = detail
        super().__init__(f"{operation} on queue {queue!r} failed: {code}: {detail}")


class QueueMissing(SqsOperationError):
    def __init__(self, operation: str, queue: str, hint: str) -> None:
        super().__init__(operation, queue, "QueueDoesNotExist", hint)


class DelayQueueMissing(QueueMissing):
    """The receiver has no delay queue, so it cannot accept delays above the native limit."""

    def __init__(self, operation: str, queue: str, destination: str, command: str) -> None:
        super().__init__(
            operation,
            queue,
            f"the destination {destination!r} has no delay queue, so it does not accept delays "
            f"above the native limit; create its delay queue with: {command}",
        )
        self.destination = destination


class RegistryError(SqsDelayError):
    """The registry of scheduled messages did not answer or refused (throttled, denied, a
    missing table): nothing was sent or changed (CLI exit code 1)."""

    def __init__(self, operation: str, table: str, code: str, detail: str) -> None:
        self.operation = operation
        self.table = table
        self.code = code
        self.detail = detail
        super().__init__(
            f"{operation} on the registry table {table!r} failed: {code}: {detail[:300]} "
            "(check SQSDELAY_REGISTRY_TABLE, `sqsdelay install` and the role's dynamodb "
            "grants, then retry)"
        )


class BatchSendError(SqsDelayError):
    """Some entries of a batch were not sent. Carries the full result: nothing is hidden."""

    def __init__(self, result: object, failed: int, total: int) -> None:
        self.result = result
        super().__init__(f"{failed} of {total} messages were not sent; see .result.failed")


class ReceiveUnavailable(SqsDelayError):
    """Receives kept failing for longer than SQSDELAY_MAX_RECEIVE_FAILURE_SECONDS: the worker
    exits (code 1) so that its supervisor (ECS) replaces it."""


class PageTokenInvalid(InvalidInput):
    """A console page link whose continuation token was changed, or made for another query."""


class GuardInProgress(SqsDelayError):
    """Another copy of this message is being handled now (or its run crashed less than the
    in-progress expiry ago): leave this copy undeleted (in Lambda, report it as a batch item
    failure) and it comes back after its visibility timeout."""


class GuardTableMissing(ConfigError):
    """The idempotency guard's DynamoDB table does not exist (the message says how to make
    it): the handler did not run."""


class GuardError(SqsDelayError):
    """DynamoDB refused or did not answer the guard's claim: the handler did not run."""


class InvalidSchedule(InvalidInput):
    """A recurring schedule that EventBridge Scheduler would refuse (its cron or rate, time
    zone, name, dates, window, or a message over the limit): refused before any call."""


class ScheduleSyncError(SqsDelayError):
    """`schedule sync` stopped at a failed call. `changed` lists what it had already done
    (e.g. `created nightly`), so the group's state is known; running it again finishes."""

    def __init__(self, failed: str, code: str, detail: str, changed: list[str]) -> None:
        self.failed = failed
        self.code = code
        self.detail = detail
        self.changed = changed
        done = "; ".join(changed) if changed else "nothing"
        super().__init__(
            f"{failed} failed: {code}: {detail[:300]}. Already changed: {done}. Fix the cause "
            "and run the same sync again: it changes only what still differs"
        )


class InvalidTag(InvalidInput):
    """A send's tag (`tags=`, `--tag NAME=VALUE`) outside the rules: too many, or a name or
    value too long or with characters the registry's index does not take."""
