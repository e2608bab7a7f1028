"""What the console's pages read and its actions do, through the project's own flows: the
sender's list, cancel and reschedule (`aws/sender.py`), `inspect`'s checks and counts and
`replay-errors` (`aws/operations.py`), the metrics `inspect` prints (`aws/cloudwatch.py`).
No rule is written here a second time: this module checks the console's input, calls them,
and logs who did what (never a body)."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from sqsdelay.aws import operations
from sqsdelay.aws.cloudwatch import MetricsReport, read_metrics
from sqsdelay.aws.sender import Sender
from sqsdelay.core import identity, message_tags, page_tokens, registry
from sqsdelay.core.parked import ParkedList
from sqsdelay.core.registry_pages import Page, PageQuery
from sqsdelay.errors import InvalidInput
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.console")
MAX_SELECTED = 50  # ids per action: one page
STATES = (*registry.STATES, "all")
Action = Literal["cancel", "cancel-tag", "reschedule", "send-now", "replay", "pause", "resume"]
TAGGED_SHOWN = 100  # rows the tag filter lists (the count is of all)


@dataclass(frozen=True)
class Filters:
    """The Scheduled page's filters, as the form sent them (checked by `query`)."""

    state: str = "scheduled"
    due_after: datetime | None = None
    due_before: datetime | None = None
    id_prefix: str = ""
    tag: str = ""  # NAME=VALUE: the messages sent with it (core/message_tags.py)


@dataclass
class ActionResult:
    """One row of what an action did: the message (or the tag, or the destination) it was
    for, what became of it, and a detail (a due time, or why not)."""

    message_id: str
    outcome: str
    detail: str = ""


@dataclass
class Health:
    queues: list[operations.QueueState]
    metrics: MetricsReport | None
    problems: int = 0
    fixes: list[str] = field(default_factory=list)
    pauses: list[operations.PauseState] = field(default_factory=list)


class ConsoleService:
    def __init__(self, settings: Settings, *, read_only: bool = False) -> None:
        self.settings = settings
        self.read_only = read_only
        self.registry_on = settings.registry_table_name() is not None
        self._sender = Sender(settings)
        self._secret = secrets.token_bytes(32)  # page tokens: valid for this process only
        self._lock = threading.Lock()  # one flow at a time through the shared sender

    # -- reading ---------------------------------------------------------------------

    def destinations(self) -> list[str]:
        """The destinations whose delay queues are under the prefix (`inspect --all`)."""
        return operations.discovered(self.settings)

    def known(self, destination: str) -> str:
        """`destination`, if it is one of the prefix's; `InvalidInput` otherwise."""
        found = self.destinations()
        if destination not in found:
            shown = ", ".join(found[:10]) or "none yet: sqsdelay install DESTINATION"
            raise InvalidInput(
                f"unknown destination {destination[:80]!r}: pick one of the list ({shown})"
            )
        return destination

    def query(self, destination: str, filters: Filters) -> PageQuery:
        if filters.state not in STATES:
            raise InvalidInput(f"state {filters.state[:40]!r}: give one of {', '.join(STATES)}")
        if len(filters.id_prefix) > 128:
            raise InvalidInput("the id prefix is longer than an id (128 characters)")
        after = filters.due_after
        before = filters.due_before
        if after is not None and before is not None and after >= before:
            raise InvalidInput("'due after' must be earlier than 'due before'")
        return PageQuery(
            destination=destination,
            state=None if filters.state == "all" else cast(registry.State, filters.state),
            due_after_ms=int(after.timestamp() * 1000) if after is not None else None,
            due_before_ms=int(before.timestamp() * 1000) if before is not None else None,
            id_prefix=filters.id_prefix,
        )

    def page(self, query: PageQuery, token: str | None) -> tuple[Page, str | None]:
        """One page from the continuation token of the previous one; the next page's token."""
        fingerprint = query.fingerprint()
        start = page_tokens.opened(token, fingerprint, self._secret) if token else None
        with self._lock:
            page = self._sender.scheduled_page(query, start)
        following = (
            page_tokens.seal(page.next_key, fingerprint, self._secret) if page.next_key else None
        )
        return page, following

    def tagged(self, destination: str, tag: str, state: str) -> tuple[int, list[registry.Record]]:
        """How many messages carry `tag` (NAME=VALUE), and up to `TAGGED_SHOWN` of their
        records in `state` (or all), soonest first."""
        if state not in STATES:
            raise InvalidInput(f"state {state[:40]!r}: give one of {', '.join(STATES)}")
        chosen = message_tags.parse(tag)
        with self._lock:
            matched, records = self._sender.tagged(destination, chosen, limit=TAGGED_SHOWN)
        return matched, [r for r in records if state in ("all", r.state)]

    def parked(self, destination: str) -> ParkedList | None:
        """Without the registry: the destination's parked messages (None: parking is off)."""
        if self.settings.parking != "scheduler":
            return None
        with self._lock:
            return self._sender.parked(destination)

    def dead_letters(self, destination: str, scan: int = 100) -> list[operations.DeadLetter]:
        return operations.dead_letters(self.settings, destination, scan=scan)

    def health(self, destinations: list[str]) -> Health:
        states = operations.inspect(self.settings, destinations) if destinations else []
        result = Health(states, None)
        for st in states:
            result.problems += sum(not p.warning for p in st.report.problems)
            result.fixes += [p.fix for p in st.report.problems if p.fix not in result.fixes]
        if destinations:
            physical = [self._sender.resolver.trio(d).destination for d in destinations]
            result.metrics = read_metrics(self.settings, physical)
            result.pauses = operations.pause_states(self.settings, destinations)
        return result

    # -- acting ------------------------------------------------------------------------

    def _writable(self) -> None:
        if self.read_only:
            raise InvalidInput("this console is read-only (started with --read-only)")

    def _ids(self, ids: list[str]) -> list[str]:
        """Every id checked before anything is done: bad input changes nothing."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            raise InvalidInput("select at least one message")
        if len(unique) > MAX_SELECTED:
            raise InvalidInput(f"select at most {MAX_SELECTED} messages at once")
        for message_id in unique:
            identity.check_message_id(message_id)
        return unique

    def cancel(self, who: str, destination: str, ids: list[str]) -> list[ActionResult]:
        self._writable()
        chosen = self._ids(ids)
        self.known(destination)
        with self._lock:
            out = [ActionResult(i, self._sender.cancel(destination, i)) for i in chosen]
        self._logged(who, "cancel", destination, out)
        return out

    def cancel_tagged(self, who: str, destination: str, tag: str, confirmed: str) -> ActionResult:
        """Cancel every message sent with `tag`, as `cancel --tag` does, once the user
        confirmed the count the page showed: refused when it changed since (reload)."""
        self._writable()
        chosen = message_tags.parse(tag)
        self.known(destination)
        if not confirmed.isdigit():
            raise InvalidInput("confirm the count first: the button asks before it cancels")
        with self._lock:
            counted = self._sender.cancel_tagged(destination, chosen, dry_run=True)
            if counted.matched != int(confirmed):
                raise InvalidInput(
                    f"{counted.matched} messages carry {tag} now, not the {confirmed} you "
                    "confirmed: reload the page and confirm again; nothing was cancelled"
                )
            done = self._sender.cancel_tagged(destination, chosen)
        shown = ", ".join(f"{k} {n}" for k, n in done.outcomes.items())
        out = ActionResult(f"tag {tag}", f"{done.outcomes['cancelled']} cancelled", shown)
        log.info(
            "console.action",
            who=who,
            action="cancel-tag",
            destination=destination,
            tag=tag,
            matched=done.matched,
            outcomes=done.outcomes,
        )
        return out

    def reschedule(self, who: str, destination: str, message_id: str, at: datetime) -> ActionResult:
        self._writable()
        [chosen] = self._ids([message_id])
        self.known(destination)
        with self._lock:
            status, due_ms = self._sender.reschedule(destination, chosen, at=at)
        out = ActionResult(
            chosen, status, registry.iso_utc(due_ms) if status == "rescheduled" else ""
        )
        self._logged(who, "reschedule", destination, [out])
        return out

    def send_now(self, who: str, destination: str, message_id: str) -> ActionResult:
        """Reschedule to now: the worker hands it over at its next receive, or its
        schedule is moved to now when it is parked."""
        self._writable()
        [chosen] = self._ids([message_id])
        self.known(destination)
        with self._lock:
            status, due_ms = self._sender.reschedule(destination, chosen, delay=0)
        out = ActionResult(
            chosen, status, registry.iso_utc(due_ms) if status == "rescheduled" else ""
        )
        self._logged(who, "send-now", destination, [out])
        return out

    def replay(self, who: str, destination: str, ids: list[str]) -> list[ActionResult]:
        self._writable()
        chosen = self._ids(ids)
        self.known(destination)
        result = operations.replay_errors(
            self.settings, destination, limit=len(chosen), scan=1000, only=frozenset(chosen)
        )
        out = [ActionResult(i, "replayed") for i in result.replayed]
        out += [ActionResult(i, "skipped", why) for i, why in result.skipped.items() if i in chosen]
        out += [ActionResult(i, "failed", why) for i, why in result.failed.items()]
        out += [
            ActionResult(i, "replayed, not deleted", why) for i, why in result.not_deleted.items()
        ]
        done = {o.message_id for o in out}
        out += [
            ActionResult(i, "unknown", "not in the error queue") for i in chosen if i not in done
        ]
        self._logged(who, "replay", destination, out)
        return out

    def set_paused(self, who: str, destination: str, paused: bool) -> ActionResult:
        """Pause or resume a destination, as `sqsdelay pause` and `resume` do."""
        self._writable()
        self.known(destination)
        state = operations.set_paused(self.settings, destination, paused)
        out = ActionResult(destination, "paused" if paused else "resumed", state.since or "")
        self._logged(who, "pause" if paused else "resume", destination, [out])
        return out

    def _logged(self, who: str, action: Action, destination: str, out: list[ActionResult]) -> None:
        log.info(
            "console.action",
            who=who,
            action=action,
            destination=destination,
            message_ids=[o.message_id for o in out],
            outcomes={o.message_id: o.outcome for o in out},
        )

    def refused(self, who: str, action: str, reason: str, **fields: Any) -> None:
        log.warning("console.refused", who=who, action=action, reason=reason, **fields)
