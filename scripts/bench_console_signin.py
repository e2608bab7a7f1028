#!/usr/bin/env python3
"""The console's memory (and temporary disk) under a sign-in flood: unauthenticated POSTs to
/signin with many large fields, as one attacker without a token could send. Prints one JSON
object.

    cd scripts && ../.venv/bin/python bench_console_signin.py [--fields 300] [--field-kib 1024]
        [--requests 3] [--mode length|chunked|files]

The console runs as `sqsdelay console` with a token, in its own process (its VmRSS and VmHWM
read from /proc before and after). Each request is sent with http.client:
`length` with Content-Length, `chunked` without one, `files` as multipart file parts. Its
status is the console's answer, or `closed` when the console stopped reading and closed the
connection before the body was sent. Nothing needs AWS: the sign-in page calls nothing.
Against an older version: PYTHONPATH=<its tree> runs the console from there.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchkit import free_port

TOKEN = secrets.token_urlsafe(32)  # never sent: every request gives a wrong one
CHUNK = 64 * 1024


def vm(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = round(int(value.split()[0]) / 1024, 1)
    return found


def body(mode: str, fields: int, field_kib: int, boundary: str) -> Iterator[bytes]:
    """The form, streamed: `fields` fields of `field_kib` KiB, then the (wrong) token."""
    value = b"a" * CHUNK
    size = field_kib * 1024
    for i in range(fields):
        if mode == "files":
            yield (
                f'--{boundary}\r\nContent-Disposition: form-data; name="f{i}"; '
                f'filename="f{i}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
        else:
            yield f"f{i}=".encode()
        left = size
        while left > 0:
            yield value[: min(CHUNK, left)]
            left -= CHUNK
        yield b"\r\n" if mode == "files" else b"&"
    if mode == "files":
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="token"\r\n\r\n'
            f"wrong-token-wrong-token\r\n--{boundary}--\r\n"
        ).encode()
    else:
        yield b"token=wrong-token-wrong-token"


def send(port: int, mode: str, fields: int, field_kib: int) -> str:
    boundary = "benchboundary7MA4YWxkTrZu0gW"
    length = sum(len(c) for c in body(mode, fields, field_kib, boundary))
    content_type = (
        f"multipart/form-data; boundary={boundary}"
        if mode == "files"
        else "application/x-www-form-urlencoded"
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.putrequest("POST", "/signin")
        conn.putheader("Content-Type", content_type)
        conn.putheader("Origin", f"http://127.0.0.1:{port}")
        if mode == "chunked":
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(length))
        conn.endheaders()
        for chunk in body(mode, fields, field_kib, boundary):
            if mode == "chunked":
                conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            else:
                conn.send(chunk)
        if mode == "chunked":
            conn.send(b"0\r\n\r\n")
        return str(conn.getresponse().status)
    except (BrokenPipeError, ConnectionResetError):
        try:  # the answer may have come before the console closed the connection
            return str(conn.getresponse().status)
        except (http.client.HTTPException, OSError):
            return "closed"
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fields", type=int, default=300)
    parser.add_argument("--field-kib", type=int, default=1024)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--mode", choices=["length", "chunked", "files"], default="length")
    args = parser.parse_args()

    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SQSDELAY_")},
        "SQSDELAY_ENDPOINT_URL": "http://127.0.0.1:9",  # never called by the sign-in page
        "SQSDELAY_REGION": "us-east-1",
        "SQSDELAY_CONSOLE_TOKEN": TOKEN,
        "SQSDELAY_LOG_LEVEL": "ERROR",
    }
    with tempfile.TemporaryFile() as errors:
        console = subprocess.Popen(
            [sys.executable, "-m", "sqsdelay", "console", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=5).request(
                        "GET", "/signin"
                    )
                    break
                except OSError:
                    if console.poll() is not None or time.monotonic() > deadline:
                        errors.seek(0)
                        sys.exit(f"the console did not start: {errors.read().decode()[-2000:]}")
                    time.sleep(0.1)
            started = vm(console.pid)
            began = time.monotonic()
            statuses = [
                send(port, args.mode, args.fields, args.field_kib) for _ in range(args.requests)
            ]
            took = time.monotonic() - began
            after = vm(console.pid)
        finally:
            console.terminate()
            console.wait(timeout=30)
    out: dict[str, Any] = {
        "mode": args.mode,
        "requests": args.requests,
        "fields": args.fields,
        "field_kib": args.field_kib,
        "body_mib_each": round(args.fields * args.field_kib / 1024, 2),
        "statuses": statuses,
        "seconds": round(took, 2),
        "console_mib": {"started": started, "after": after},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
