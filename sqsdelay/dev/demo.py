"""`sqsdelay demo`: the whole system end to end on the embedded emulator, with a compressed
cycle, a live table, and the cost report on the events it recorded."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from sqsdelay import logs
from sqsdelay.aws.clients import observe, sync_client
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.aws.worker import WorkerThread
from sqsdelay.core.metrics import LATENESS, WINDOWS
from sqsdelay.core.outcomes import Stats
from sqsdelay.dev.emulator import Emulator, percentile
from sqsdelay.extras import MissingExtra, require
from sqsdelay.settings import Settings

CYCLE = 3  # seconds standing in for SQS's 900 s
DESTINATIONS = ["reminders", "billing"]
PLAN = [
    ("reminders", 1),
    ("billing", 3),
    ("reminders", 5),
    ("billing", 8),
    ("reminders", 11),
    ("billing", 16),
    ("reminders", 23),
]
# The demo polls its destinations every 50 ms or so and the emulator answers within tens of
# ms: its own lateness is the worker's plus that. On a loaded machine a send or a round of
# polls takes longer, so each row also keeps how long the demo was blind to it (`Row.blind`).
LATENESS_TOLERANCE = 0.5
PARK_AFTER = 10  # seconds: longer delays wait in (emulated) EventBridge Scheduler
CANCELLED = ("billing", 19)  # parked, then cancelled: must never arrive
LOOP_CANCELLED = ("reminders", 9)  # cancelled after its first cycle, while it loops
RESCHEDULED = ("billing", 6, 14)  # looping, moved from 6 s to 14 s after the send


@dataclass
class Row:
    name: str
    destination: str
    delay: int
    route: str = ""
    message_id: str | None = None
    due: float = 0.0
    cycles: int = 0
    delivered: float | None = None
    copies: int = 0
    cancelled: bool = False
    to_cancel: bool = False  # cancel it once the worker has moved it once
    # How much later than the worker the demo may see it: the send's duration (`due` is
    # taken before it) and the time since the demo last looked at its queue.
    blind: float = 0.0

    @property
    def lateness(self) -> float | None:
        return None if self.delivered is None else self.delivered - self.due


def _clock(t: float | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t).strftime("%H:%M:%S.%f")[:-4]


def _table(rows: list[Row], started: float) -> Table:
    table = Table(
        title=f"sqsdelay demo — {time.time() - started:5.1f} s "
        f"(one {CYCLE} s cycle stands in for 900 s)"
    )
    for col in (
        "message",
        "destination",
        "delay",
        "route",
        "cycles",
        "due",
        "delivered",
        "lateness",
    ):
        table.add_column(col, justify="right" if col in ("delay", "cycles", "lateness") else "left")
    for r in rows:
        late = r.lateness
        style = "" if late is None else ("red" if late < 0 else "green")
        table.add_row(
            r.name,
            r.destination,
            f"{r.delay} s",
            r.route,
            str(r.cycles),
            _clock(r.due),
            _clock(r.delivered),
            "" if late is None else f"{late:+.2f} s",
            style=style,
        )
    return table


def _count_cycles(events: Path, rows: list[Row]) -> None:
    by_group = {r.message_id: r for r in rows if r.message_id}
    counts = dict.fromkeys(by_group, 0)
    with events.open(encoding="utf-8") as f:
        for line in f:
            if '"delay.requeued"' in line or '"delay.handed_over"' in line:
                group = json.loads(line).get("message_id")
                if group in counts:
                    counts[group] += 1
    for group, n in counts.items():
        by_group[group].cycles = n


def run(
    output: Path,
    console: Console | None = None,
    *,
    timeout: float = 60,
    console_port: int | None = None,
) -> int:
    """The demo; with `console_port`, the web console on the demo's data on that port, open
    from the start and, after the deliveries, until Ctrl-C."""
    console = console or Console(width=max(110, Console().width))
    output.mkdir(parents=True, exist_ok=True)
    events = output / "events.jsonl"
    events.unlink(missing_ok=True)
    emf_lines: list[str] = []  # what CloudWatch Logs would turn into metrics
    with open(os.devnull, "w") as quiet, Emulator() as emu, contextlib.ExitStack() as later:
        # Events go to the file only: the cost report reads it, the screen shows the table.
        # DEBUG, so that every hop's delay.requeued is there to count the cycles.
        logs.configure("json", "DEBUG", stream=quiet, file=events)
        settings = Settings(
            endpoint_url=emu.url,
            region="us-east-1",
            queue_prefix="demo-",
            max_native_delay_seconds=CYCLE,
            visibility_timeout_seconds=5,
            wait_time_seconds=1,
            stats_interval_seconds=5,
            parking="scheduler",
            scheduler_role_arn="arn:aws:iam::123456789012:role/sqsdelay-scheduler",
            park_after_seconds=PARK_AFTER,
            registry="dynamodb",
            registry_table="demo-scheduled",
        )
        console.print(
            Panel.fit(
                f"SQS emulator (moto) on {emu.url}\n"
                f"Delay queues cycle every {CYCLE} s here, standing in for SQS's 900 s:\n"
                f"a delay above {CYCLE} s goes through <queue>-delay.fifo and the worker moves\n"
                f"it on each cycle; a shorter one goes straight to the queue with DelaySeconds.\n"
                f"Above {PARK_AFTER} s a message is parked in EventBridge Scheduler (emulated)\n"
                f"until one cycle before it is due. With the registry (DynamoDB, emulated),\n"
                f"one parked and one looping message are cancelled, and one is rescheduled.\n"
                f"Events are recorded in {events}",
                title="sqsdelay demo",
            )
        )
        installer = Installer(settings)
        installer.run(DESTINATIONS)
        installer.schedule_group(DESTINATIONS)
        installer.registry_table(DESTINATIONS)
        sqs = sync_client(settings)
        own = Stats()  # the sender's and the demo application's SQS calls, for the bill
        observe(own, sqs)
        sender = Sender(settings, client=sqs)
        if console_port is not None:
            console_url = _open_console(later, settings, sender, console_port)
            console.print(f"Web console on the demo's data: [bold]{console_url}[/bold]")
        urls = {d: sqs.get_queue_url(QueueName=f"demo-{d}")["QueueUrl"] for d in DESTINATIONS}
        plan = [*PLAN, RESCHEDULED[:2], LOOP_CANCELLED, CANCELLED]
        rows = [Row(f"demo-{i}", dest, delay) for i, (dest, delay) in enumerate(plan)]
        moved, looping, gone = rows[-3:]
        looping.to_cancel = True
        started = time.time()
        with (
            WorkerThread(settings, DESTINATIONS, write_metrics=emf_lines.append) as running,
            Live(_table(rows, started), console=console, refresh_per_second=4) as live,
        ):
            for r in rows:
                before = time.time()
                r.due = before + r.delay
                body = json.dumps({"demo": r.name})
                result = sender.send(r.destination, body, delay=r.delay, id=r.name)
                r.blind = time.time() - before
                r.route, r.message_id = result.route, result.message_id
            status, due_ms = sender.reschedule(moved.destination, moved.name, delay=RESCHEDULED[2])
            if status == "rescheduled":
                moved.due, moved.route = due_ms / 1000, f"rescheduled to {RESCHEDULED[2]} s"
            _cancel(sender, gone)
            live.console.print(_scheduled(sender))
            deadline = time.monotonic() + RESCHEDULED[2] + max(d for _, d in PLAN) + timeout
            by_name = {r.name: r for r in rows}
            looked = dict.fromkeys(urls.values(), started)  # when each queue was last asked
            # Wait for every message, and past the cancelled one's due time (it must not come).
            while time.monotonic() < deadline and (
                any(r.delivered is None and not r.cancelled for r in rows)
                or time.time() < gone.due + CYCLE
            ):
                for url in urls.values():
                    asked = time.time()
                    resp = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
                    now = time.time()
                    for m in resp.get("Messages", []):
                        row = by_name[json.loads(m["Body"])["demo"]]
                        row.copies += 1
                        if row.delivered is None:
                            row.delivered, row.blind = now, row.blind + now - looked[url]
                        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                    looked[url] = asked
                _count_cycles(events, rows)
                if looping.to_cancel and looping.cycles >= 1:  # moved once: it is looping
                    looping.to_cancel = False
                    _cancel(sender, looping)
                live.update(_table(rows, started))
                time.sleep(0.05)
        if console_port is not None:
            _wait_for_ctrl_c(console, console_url)
    lost = [r.name for r in rows if r.delivered is None and not r.cancelled]
    early = [r.name for r in rows if r.lateness is not None and r.lateness < 0]
    early += [f"{r.name} (cancelled)" for r in rows if r.cancelled and r.delivered is not None]
    late = [r.lateness for r in rows if r.lateness is not None]
    console.print()
    cancelled = sum(r.cancelled for r in rows)
    console.print(
        f"delivered {sum(r.delivered is not None for r in rows)}/{len(rows) - cancelled} "
        f"(and {cancelled} cancelled), parked {sum('parked' in r.route for r in rows)}, "
        f"early {len(early)}, "
        f"max lateness {max(late, default=0):.2f} s, duplicates "
        f"{sum(max(0, r.copies - 1) for r in rows)}"
    )
    if console_port is None:
        console.print("To see and steer it in the web console: sqsdelay demo --console")
    if lost or early:
        console.print(f"[red]FAILED: lost {lost}, early {early}[/red]")
        return 1
    (output / "metrics.jsonl").write_text("".join(emf_lines), encoding="utf-8")
    if not _compare_metrics(emf_lines, rows, console, running.worker.max_lag_s):
        return 1
    calls = running.worker.stats.calls + own.calls
    return _cost_report(events, output, console, calls, datetime.fromtimestamp(started, UTC))


# Messages for the console to show and steer: due in 1 to 24 hours, so parked (emulated
# EventBridge Scheduler); "send now" moves a schedule to now and the demo's worker hands the
# message over.
CONSOLE_MESSAGES = 24


def _open_console(
    stack: contextlib.ExitStack, settings: Settings, sender: Sender, port: int
) -> str:
    require("console", "the demo's console (--console)")
    from sqsdelay.console.server import ServerThread

    server = stack.enter_context(ServerThread(settings, port=port))
    for i in range(CONSOLE_MESSAGES):
        customer = {"DataType": "String", "StringValue": f"customer-{i % 5}"}
        sender.send(
            DESTINATIONS[i % 2],
            json.dumps({"demo": f"later-{i:02d}"}),
            delay=3600 * (1 + i),
            id=f"later-{i:02d}",
            attributes={"customer": customer},
        )
    return server.url


def _wait_for_ctrl_c(console: Console, url: str) -> None:
    console.print()
    console.print(
        f"The deliveries are done. The console stays open on {url} (scheduled, dead letters, "
        "health): press Ctrl-C to close it; the demo then checks its results.",
        soft_wrap=True,  # one line, whatever the terminal's width: the URL stays whole
    )
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(1)


def _cancel(sender: Sender, row: Row) -> None:
    row.cancelled = sender.cancel(row.destination, row.name) == "cancelled"
    row.route += ", cancelled" if row.cancelled else ", too late to cancel"


def _scheduled(sender: Sender) -> Table:
    """What the registry holds (`sqsdelay scheduled`), soonest first."""
    table = Table(title="sqsdelay scheduled reminders / billing (the registry)")
    for col in ("due at (UTC)", "message id", "destination", "state", "route"):
        table.add_column(col)
    records = [r for d in DESTINATIONS for r in sender.scheduled(d, state=None)]
    for record in sorted(records, key=lambda r: r.due_ms):
        row = record.as_dict()
        table.add_row(
            row["due_at"][11:23], row["message_id"], row["destination"], row["state"], row["route"]
        )
    return table


def _compare_metrics(
    lines: list[str], rows: list[Row], console: Console, worker_lag: float = 0.0
) -> bool:
    """The worker's metrics (its EMF lines) next to what the demo measured itself; whether
    they agree: the same hand-overs and requeues, lateness within the demo's polling and
    the worker's largest loop lag (`worker_lag`)."""
    values: dict[str, list[float]] = {}
    for line in "".join(lines).splitlines():
        obj = json.loads(line)
        for directive in obj["_aws"]["CloudWatchMetrics"]:
            if ["Destination"] in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    values.setdefault(metric["Name"], []).extend(obj[metric["Name"]])
    worker = [r for r in rows if r.delivered is not None and r.route != "direct"]
    looped = [r for r in rows if r.route != "direct"]
    measured = [r.lateness or 0.0 for r in worker]
    # Each measured lateness is the worker's plus at most its row's blind time, so each order
    # statistic (p50, p99, max) is too. A worker whose loop lags reads a receive's answer
    # late: it hands the message over about that much late (a first receive's remaining
    # delay counts from the broker's receive time: late, never early, whatever the local
    # clock did), and its clock offset, sampled by the same late reads, hides about as much
    # from the metric (seen: 1.27 s measured, 0.04 s metric, in a saturated `make test`).
    # An allowance, not a bound: the emulator's own slowness before the answer is not in it.
    blind = max((r.blind for r in worker), default=0.0)
    tolerance = LATENESS_TOLERANCE + blind + worker_lag
    late = [v / 1000 for v in values.get(LATENESS, [])]
    due = {name: int(sum(values.get(name, []))) for _, name in WINDOWS}
    table = Table(title="metrics (EMF, metrics.jsonl) next to the table above")
    for col in ("", "from the metrics", "measured", "agree"):
        table.add_column(col, justify="left" if not col else "right")
    checks = [
        ("hand-overs", sum(values.get("HandedOver", [])), len(worker), 0.0),
        (
            "requeues (due within 1 h)",
            due["DueWithin1h"],
            sum(r.cycles for r in looped) - len(worker),
            0.0,
        ),
        (
            "cancelled, dropped by the worker",
            sum(values.get("Cancelled", [])),
            sum(r.cancelled and "parked" not in r.route for r in rows),
            0.0,
        ),
        *(
            (
                f"lateness {p}",
                percentile(late, q) or 0.0,
                percentile(measured, q) or 0.0,
                tolerance,
            )
            for p, q in (("p50", 50), ("p99", 99), ("max", 100))
        ),
    ]
    agree = True
    for label, metric, own, allowed in checks:
        ok = abs(metric - own) <= allowed
        agree &= ok
        shown = (f"{metric:.2f} s", f"{own:.2f} s") if allowed else (f"{metric:.0f}", f"{own:.0f}")
        table.add_row(label, *shown, "yes" if ok else "[red]no[/red]")
    later = ", ".join(f"{name} {n}" for name, n in due.items() if n and name != "DueWithin1h")
    console.print(table)
    console.print(
        f"lateness agrees within {tolerance:.2f} s: {LATENESS_TOLERANCE} s plus {blind:.2f} s "
        f"the demo was slow to see (its slowest send or poll) plus {worker_lag:.2f} s the "
        "worker's loop ran late"
    )
    console.print(
        f"due windows (requeues counted by time left): DueWithin1h {due['DueWithin1h']}"
        + (f", {later}" if later else "")
    )
    return agree


def _cost_report(
    events: Path,
    output: Path,
    console: Console,
    calls: Counter[tuple[str, str]],
    started: datetime,
) -> int:
    try:
        require("spark", "the cost report")
    except MissingExtra as missing:  # the delivery above is the demo; the report is a bonus
        console.print(f"cost report skipped: {missing}", markup=False)
        return 0
    from sqsdelay.cost.options import ReportRequest
    from sqsdelay.cost.pricing import load_pricing
    from sqsdelay.cost.render.terminal import reconciliation_table
    from sqsdelay.cost.run import run_report
    from sqsdelay.dev.demo_bill import cur_lines, write_bill

    pricing = load_pricing()
    # What AWS would list for the SQS requests the demo really made, as a CUR 2.0 export.
    bill = write_bill(output / "bill.parquet", cur_lines(calls, started, pricing, "us-east-1"))
    with console.status("cost report on the recorded events (Spark, local mode)"):
        report = run_report(
            ReportRequest(
                inputs=[str(events)],
                output=str(output / "cost-report"),
                pricing=pricing,
                cycle_seconds=CYCLE,
                bills=[str(bill)],
                registry_table="demo-scheduled",
                schedule_group="sqsdelay",
            ),
            fast_start=True,
        )
    s = report.summary
    console.print(
        f"cost report: {s['messages']} messages, {s['delayed_messages']} through "
        f"delay queues (cycle {CYCLE} s); open {output / 'cost-report' / 'report.html'}"
    )
    console.print(reconciliation_table(s))
    console.print(
        f"The bill ({bill}) lists the SQS requests the demo really made, priced at list. "
        f"A minute of traffic rounds to 0.00 USD; the requests show the difference: the "
        f"demo's worker polls every second where the estimate assumes 20 s long polls."
    )
    for note in s["bill_notes"]:
        console.print(note, markup=False)
    return 0
