import asyncio
from datetime import UTC, datetime, timedelta

from sqsdelay.sender import AsyncSender, Message, Sender

sender = Sender()  # settings from SQSDELAY_* variables
sender.send("orders", '{"id": 1}', delay=timedelta(days=3))
sender.send("orders", "x", deliver_at=datetime.now(UTC) + timedelta(hours=5))
sender.send_batch("orders", [Message("a", delay=10), Message("b", delay=7200)])


async def main() -> None:
    async with AsyncSender() as s:  # the same behaviour on asyncio
        await s.send("orders", "x", delay=3600)


asyncio.run(main())
