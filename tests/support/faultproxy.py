"""A TCP proxy on 127.0.0.1 that can cut connections: a real network fault for the worker.

It pipes bytes both ways and sniffs client requests for the SQS API name (boto3's JSON
protocol sends it in the X-Amz-Target header). `cut(api, times)` drops the connection of the
next `times` requests to that API before they reach the server; `cut_responses(share)` lets
that share of requests (drawn at random, seeded) reach the server and drops the connection
before its answer comes back: the call took effect, and the client never hears of it.
`down()` refuses and drops everything until `up()`.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import threading
from urllib.parse import urlparse


class FaultProxy:
    def __init__(self, upstream_url: str) -> None:
        parsed = urlparse(upstream_url)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._cuts: dict[bytes, int] = {}
        self._down = False
        self.cut_count = 0
        self.responses_cut = 0
        self.requests = 0
        self._response_share = 0.0
        self._random = random.Random(0)
        self._closing = False
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, api: str, times: int = 1) -> None:
        with self._lock:
            self._cuts[f"AmazonSQS.{api}".encode()] = times

    def cut_responses(self, share: float, seed: int = 0) -> None:
        with self._lock:
            self._response_share, self._random = share, random.Random(seed)

    def _cut_response(self, data: bytes) -> bool:
        """Whether to lose the answer to this request (only a chunk that starts a request
        is drawn for)."""
        if b"X-Amz-Target" not in data and b"x-amz-target" not in data:
            return False
        with self._lock:
            self.requests += 1
            if self._random.random() < self._response_share:
                self.responses_cut += 1
                return True
        return False

    def down(self) -> None:
        with self._lock:
            self._down = True
            sockets = list(self._sockets)
        for s in sockets:  # established connections die too
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def up(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        self.down()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _should_cut(self, data: bytes) -> bool:
        with self._lock:
            if self._down:
                return True
            for api, left in self._cuts.items():
                if left > 0 and api in data:
                    self._cuts[api] = left - 1
                    self.cut_count += 1
                    return True
        return False

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self._upstream, timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets.update((client, server))
        lose_answer = False
        try:
            while True:
                readable, _, _ = select.select([client, server], [], [], 60)
                if not readable:
                    return
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    if src is client and self._should_cut(data):
                        return  # drop the request on the floor and close the connection
                    if src is client:
                        lose_answer = lose_answer or self._cut_response(data)
                    elif lose_answer:
                        return  # the server did the work: close before the answer is passed
                    (server if src is client else client).sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._sockets.difference_update((client, server))
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
