"""How sends are traced (`Tracing`): a send span per message (`Producer`, `sqsdelay.otel`'s
when OpenTelemetry is on), the warning when its context found no room, and the ambient X-Ray
trace; `NoTracing` when there is none. Protocols only: the flows (`send_flows.py`) take one,
the senders give `sqsdelay.otel`'s."""

from __future__ import annotations

from typing import Protocol

from sqsdelay.core.send import PlannedSend


class Producer(Protocol):
    """A message's send span (`sqsdelay.otel.Producer`): the trace context to carry, and its
    end."""

    carrier: dict[str, str]

    def sent(
        self, queue: str, sqs_message_id: str | None, message_id: str, due_ms: int
    ) -> None: ...

    def failed(self, exc: BaseException | None) -> None: ...


class Tracing(Protocol):
    """How sends are traced: a span per message (None: OpenTelemetry is off), the warning
    when its context found no room, and the ambient X-Ray trace (_X_AMZN_TRACE_ID)."""

    def start(self, destination: str) -> Producer | None: ...

    def placed(self, planned: PlannedSend) -> None: ...

    def ambient(self) -> str | None: ...


class NoTracing:
    def start(self, destination: str) -> Producer | None:
        return None

    def placed(self, planned: PlannedSend) -> None:
        return None

    def ambient(self) -> str | None:
        return None
