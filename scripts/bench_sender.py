#!/usr/bin/env python3
"""Sender throughput: single synchronous sends versus batched asyncio sends, in one run
against the same emulator; prints one JSON object.

    .venv/bin/python scripts/bench_sender.py [--messages 500] [--emulator moto|fauxqs|both]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from benchkit import EmulatorProcess, client, fauxqs_installed

from sqsdelay import logs
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import AsyncSender, Message, Sender
from sqsdelay.settings import Settings


def rate(count: int, started: float) -> float:
    return round(count / (time.perf_counter() - started), 1)


def bench(kind: str, messages: int) -> dict[str, Any]:
    emulator = EmulatorProcess(kind)
    out: dict[str, Any] = {
        "emulator": f"{emulator.name} (separate process, 127.0.0.1)",
        "messages": messages,
    }
    try:
        for route, delay in (("direct", 10), ("delay-queue", 3600)):
            # a fresh destination per measurement keeps queue depth (and moto's cost) equal
            for mode in ("single_sync", "batched_async"):
                s = Settings(
                    endpoint_url=emulator.url,
                    region="us-east-1",
                    queue_prefix=f"{route}-{mode}-".replace("_", "-"),
                )
                Installer(s, client=client(emulator.url)).run(["orders"])
                batch = [Message(f"m{i}", delay=delay) for i in range(messages)]
                started = time.perf_counter()
                if mode == "single_sync":
                    sender = Sender(s, client=client(emulator.url))
                    for m in batch:
                        sender.send("orders", m.body, delay=m.delay)
                else:

                    async def go(s: Settings = s, batch: list[Message] = batch) -> None:
                        async with AsyncSender(s) as sender:
                            await sender.send_batch("orders", batch)

                    asyncio.run(go())
                out[f"{route}_{mode}_msgs_per_s"] = rate(messages, started)
        for route in ("direct", "delay-queue"):
            out[f"{route}_speedup"] = round(
                out[f"{route}_batched_async_msgs_per_s"] / out[f"{route}_single_sync_msgs_per_s"], 1
            )
    finally:
        emulator.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument(
        "--emulator",
        choices=["moto", "fauxqs", "both"],
        default="both" if fauxqs_installed() else "moto",
    )
    args = parser.parse_args()
    logs.configure("json", "WARNING")  # per-message events would measure logging
    kinds = ["moto", "fauxqs"] if args.emulator == "both" else [args.emulator]
    print(json.dumps({k: bench(k, args.messages) for k in kinds}, indent=2))


if __name__ == "__main__":
    main()
