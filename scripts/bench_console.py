#!/usr/bin/env python3
"""The web console with many scheduled messages: time to first byte of the Scheduled page
with N records of one destination in the registry (the embedded emulator's DynamoDB), the
AWS requests one page makes, and the console's memory with P pages open. Prints one JSON
object.

    cd scripts && ../.venv/bin/python bench_console.py [--messages 10000] [--pages 10] [--repeat 20]

The records are written with BatchWriteItem in the shape `registry.put` writes (10,000 sends
through the sender would take minutes and measure the sender). The console runs as
`sqsdelay console` in its own process, for its time to first byte and its memory (VmRSS,
VmHWM); the requests of one page are counted in this process, on the very calls the page
makes (`ConsoleService.destinations` and `.page`), by a botocore hook.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
from benchkit import EmulatorProcess, client, env_for, free_port

from sqsdelay import logs
from sqsdelay.aws.installer import Installer
from sqsdelay.core import registry
from sqsdelay.settings import Settings

DESTINATION = "orders"


def fill(settings: Settings, url: str, count: int) -> None:
    """`count` scheduled records of one destination, due from an hour on, a second apart."""
    table = settings.registry_table
    dynamodb = client(url, "dynamodb")
    now_ms = int(time.time() * 1000)
    destination = f"{settings.queue_prefix}{DESTINATION}"
    items = []
    for i in range(count):
        record = registry.Record(
            destination,
            f"m-{i:06d}",
            now_ms + 3_600_000 + i * 1000,
            "scheduled",
            "delay-queue",
            size_bytes=200 + i % 50,
            attribute_names=("tenant",),
        )
        flow = registry.put(table, record, now_ms, None)
        [call] = next(flow)
        items.append(call.params["Item"])
    for start in range(0, len(items), 25):
        chunk = [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]
        left: dict[str, Any] = {table: chunk}
        while left:
            left = dynamodb.batch_write_item(RequestItems=left).get("UnprocessedItems", {})


def ttfb(port: int, path: str, cookie: str) -> tuple[float, int, str]:
    """Seconds to the first byte of the answer (its status line), the status, the body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
    response = conn.getresponse()  # returns once the status line and headers have come
    first = time.perf_counter() - started
    body = response.read().decode()
    cookie_set = response.getheader("set-cookie") or ""
    conn.close()
    return first, response.status, body if not cookie_set else cookie_set + "\n" + body


def rss_mib(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return fields


def requests_of_one_page(settings: Settings, count: int) -> dict[str, Any]:
    """The AWS requests of one Scheduled page (its first, and one after it), counted."""
    calls: Counter[str] = Counter()

    def counted(model: Any, **_: Any) -> None:
        calls[f"{model.service_model.service_name}:{model.name}"] += 1

    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    session.events.register("before-call", counted)  # clients copy it when created
    from sqsdelay.console.service import ConsoleService, Filters

    service = ConsoleService(settings)
    destination = f"{settings.queue_prefix}{DESTINATION}"
    out: dict[str, Any] = {}
    token = None
    for name in ("first_page", "second_page"):
        calls.clear()
        service.destinations()
        query = service.query(destination, Filters())
        page, token = service.page(query, token)
        out[name] = {"rows": len(page.records), "requests": dict(calls)}
        if token is None:
            break
    # a filter that matches nothing: bounded, not a scan of the destination's records
    calls.clear()
    query = service.query(destination, Filters(id_prefix="no-such-id"))
    page, _ = service.page(query, None)
    out["filtered_page_matching_nothing"] = {
        "rows": len(page.records),
        "requests": dict(calls),
        "records_examined": page.examined,
        "of": count,
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--pages", type=int, default=10, help="pages open at once for the memory")
    ap.add_argument("--repeat", type=int, default=20, help="loads of the first page timed")
    args = ap.parse_args()
    logs.configure("json", "WARNING", stream=sys.stderr)
    emulator = EmulatorProcess("moto")
    prefix = f"bc{uuid.uuid4().hex[:6]}-"
    common = {"registry": "dynamodb", "registry_table": f"{prefix}scheduled"}
    env = env_for(emulator.url, prefix, **common)
    settings = Settings(
        endpoint_url=emulator.url, region="us-east-1", queue_prefix=prefix, **common
    )
    try:
        installer = Installer(settings)
        installer.run([DESTINATION])
        installer.registry_table([DESTINATION])
        started = time.perf_counter()
        fill(settings, emulator.url, args.messages)
        filled = time.perf_counter() - started
        port = free_port()
        with tempfile.TemporaryFile() as errors:
            console = subprocess.Popen(
                [sys.executable, "-m", "sqsdelay", "console", "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
            try:
                result = measure(console, port, prefix, args)
            finally:
                console.terminate()
                console.wait(timeout=30)
        result["requests"] = requests_of_one_page(settings, args.messages)
        result.update(
            {
                "emulator": emulator.name,
                "messages": args.messages,
                "fill_seconds": round(filled, 1),
            }
        )
        print(json.dumps(result))
    finally:
        emulator.stop()


def measure(console: subprocess.Popen[Any], port: int, prefix: str, args: Any) -> dict[str, Any]:
    # A guard, not a bar: 30 s passed twice in a fresh clone's scripts lane (nice 10, beside
    # the suite); the time to the first byte is measured from when it answers.
    deadline = time.monotonic() + 180
    while True:
        try:
            first, status, head = ttfb(port, "/signin", "")
            break
        except OSError:
            if console.poll() is not None:
                raise SystemExit(f"the console exited with {console.returncode}") from None
            if time.monotonic() > deadline:
                raise SystemExit("the console did not answer within 180 s") from None
            time.sleep(0.1)
    found = re.search(r"sqsdelay_console=([^;]+)", head)
    cookie = f"sqsdelay_console={found.group(1)}" if found else ""
    before = rss_mib(console.pid)
    path = f"/scheduled?destination={quote(prefix + DESTINATION)}"
    times, pages = [], []
    for _ in range(args.repeat):
        first, status, body = ttfb(port, path, cookie)
        assert status == 200, body[-500:]
        times.append(first)
    # P pages open: the first and each next one, by their continuation links
    link = path
    for _ in range(args.pages):
        _, status, body = ttfb(port, link, cookie)
        assert status == 200, body[-500:]
        pages.append(body.count("<tr data-id="))
        nxt = re.search(r'href="([^"]+)" id="next-page"', body)
        if nxt is None:
            break
        link = nxt.group(1).replace("&amp;", "&")
    return {
        "scheduled_page_ttfb_ms": {
            "first": round(times[0] * 1000, 1),
            "median": round(statistics.median(times) * 1000, 1),
            "max": round(max(times) * 1000, 1),
            "loads": len(times),
        },
        "pages_open": len(pages),
        "rows_per_page": pages,
        "console_rss_mib": {"started": before, f"after_{len(pages)}_pages": rss_mib(console.pid)},
    }


if __name__ == "__main__":
    main()
