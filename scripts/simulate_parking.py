#!/usr/bin/env python3
"""Parking in a virtual clock: requests, schedules and lateness of one message delayed 1 day,
30 days and 1 year, with and without parking, driving the real decision function.

    .venv/bin/python scripts/simulate_parking.py [--seed 1]

Unbatched SQS requests (sends, Scheduler's send included, receives and deletes); Scheduler
fires up to 60 s late; the broker's receive jitter is up to 1.5 s.
"""

from __future__ import annotations

import argparse
import json

from sqsdelay.cost.pricing import load_pricing, park_break_even_seconds
from sqsdelay.dev.simulation import simulate

DELAYS = {"1 day": 86_400, "30 days": 30 * 86_400, "1 year": 365 * 86_400}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    after = park_break_even_seconds(load_pricing())
    rows = []
    for name, delay in DELAYS.items():
        for parked in (False, True):
            r = simulate(delay, park_after_seconds=after if parked else None, seed=args.seed)
            rows.append(
                {
                    "delay": name,
                    "parking": "scheduler" if parked else "off",
                    "hops": r.hops,
                    "schedules": r.schedules,
                    "sqs_requests": r.sqs_requests,
                    "lateness_ms": r.lateness_ms,
                }
            )
    print(json.dumps({"park_after_seconds": after, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
