"""A TCP proxy on 127.0.0.1 that can cut connections: a real network fault for the worker.

It pipes bytes both ways and sniffs client requests for the SQS API name (boto3's JSON
protocol sends it in the X-Amz-Target header). `cut(api, times)` drops the connection of the
next `times` requests to that API before they reach the server; `cut_responses(share)` lets
that share of requests (drawn at random, seeded) reach the server and drops the connection
before its answer comes back: the call took effect, and the client never hears of it.
`lose_answers(api, times)` lets the next `times` requests to that API reach the server and
loses their answers (what the client retries: the same request, taken twice).
`hang(api, times)` holds those requests without an answer until the client gives up (a
stalled call; the server never sees it). `down()` refuses and drops everything until `up()`.
`short_batches(k)` answers receives from delay queues with 1..k messages, as SQS does below
about 1,000 messages in a queue (docs/short-batches.md): the emulators fill every batch.
`latency(ms)` holds each request that long before passing it on: SQS answers in about ten to
a few tens of milliseconds, the emulators on loopback in one or two, so a worker that waits
on its calls one after another looks fast on them and is slow on SQS.
`seen` counts the requests by API. `lost_answers` keeps each lost answer whole with the
start of its request; `lost_receives()` reads from them what each lost receive hid, and for
how long.

`routes` sends other services elsewhere: {b"DynamoDB_": url} makes a connection whose first
request names that target go to url (a boto3 client keeps one service per connection), so
one endpoint can front an SQS emulator without DynamoDB and a moto server that has it.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import select
import socket
import threading
import time
from collections import Counter
from urllib.parse import urlparse


class FaultProxy:
    def __init__(self, upstream_url: str, routes: dict[bytes, str] | None = None) -> None:
        self._upstream = _address(upstream_url)
        self._routes = {marker: _address(url) for marker, url in (routes or {}).items()}
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._cuts: dict[bytes, int] = {}
        self._hangs: dict[bytes, int] = {}
        self.seen: Counter[str] = Counter()
        self._down = False
        self.cut_count = 0
        self.responses_cut = 0
        self.requests = 0
        self.cut_requests: list[bytes] = []  # the start of each request whose answer was cut
        self.lost_answers: list[tuple[bytes, bytes]] = []  # (request's start, whole answer)
        self._response_share = 0.0
        self._lost: dict[bytes, int] = {}
        self._random = random.Random(0)
        self._short: tuple[int, bytes, random.Random] | None = None
        self._latency = 0.0
        self.receives_shortened = 0
        # Shortened receives whose answer has not come back yet, and the most at once: a
        # worker that polls a queue with one loop never has two (load does not change that).
        self._receives_in_flight = 0
        self.receives_in_flight_max = 0
        self._local = threading.local()  # one thread a connection: its receive outstanding
        self._closing = False
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, api: str, times: int = 1) -> None:
        with self._lock:
            self._cuts[f"AmazonSQS.{api}".encode()] = times

    def hang(self, api: str, times: int = 1) -> None:
        with self._lock:
            self._hangs[f"AmazonSQS.{api}".encode()] = times

    def lose_answers(self, api: str, times: int = 1) -> None:
        with self._lock:
            self._lost[f"AmazonSQS.{api}".encode()] = times

    def cut_responses(self, share: float, seed: int = 0) -> None:
        with self._lock:
            self._response_share, self._random = share, random.Random(seed)

    def short_batches(self, most: int, queues: bytes = b"-delay", seed: int = 0) -> None:
        """From now on, a receive from a queue whose URL holds `queues` asks for a number of
        messages drawn from 1..`most` instead of its MaxNumberOfMessages: what a client of
        SQS sees when the queue's messages are spread over many servers."""
        assert 1 <= most <= 9, "the rewrite keeps the request's length: one digit"
        with self._lock:
            self._short = (most, queues, random.Random(seed))

    def cut_answers(self) -> Counter[str]:
        """The cut answers by what they answered: the API, and for a send whether it went
        to a delay queue (a requeue) or elsewhere (a hand-over, or the error queue)."""
        found: Counter[str] = Counter()
        for request in self.cut_requests:
            api = re.search(rb"AmazonSQS\.(\w+)", request)
            name = api.group(1).decode() if api else "other"
            if name.startswith("SendMessage"):
                name += " (requeue)" if b"-delay" in request else " (hand-over)"
            found[name] += 1
        return found

    def cut_hand_over_bodies(self) -> Counter[str]:
        """For each message body, how many hand-over sends that carried it had their answer
        cut: each may deliver it once more (at least once)."""
        found: Counter[str] = Counter()
        for request in self.cut_requests:
            if b"AmazonSQS.SendMessage" not in request or b"-delay" in request:
                continue
            body = request.partition(b"\r\n\r\n")[2]
            try:
                sent = json.loads(body)
            except ValueError:  # cut short at 4 KiB: a test's bodies are small
                continue
            entries = sent.get("Entries", [sent])
            found.update(str(e.get("MessageBody")) for e in entries)
        return found

    def lost_receives(self) -> list[tuple[int, list[str]]]:
        """For each receive whose answer was lost: the VisibilityTimeout it asked for (how
        long what it carried stays hidden) and the bodies it carried."""
        found: list[tuple[int, list[str]]] = []
        for request, answer in self.lost_answers:
            if b"AmazonSQS.ReceiveMessage" not in request:
                continue
            asked = re.search(rb'"VisibilityTimeout":\s*(\d+)', request)
            try:
                reply = json.loads(answer.partition(b"\r\n\r\n")[2])
            except ValueError:  # an error's answer, or none: it carried no message
                reply = {}
            bodies = [str(m.get("Body")) for m in reply.get("Messages", [])]
            found.append((int(asked.group(1)) if asked else 30, bodies))
        return found

    def latency(self, ms: float) -> None:
        """Every request from now on reaches the server `ms` later (each connection on its
        own, as on a network: requests in parallel are delayed in parallel)."""
        self._latency = ms / 1000

    def _shorten(self, data: bytes) -> bytes:
        """`"MaxNumberOfMessages": 10` becomes `"MaxNumberOfMessages":  3`: the body keeps
        its length, so Content-Length (and the signature, which emulators do not check)
        stand."""
        with self._lock:
            short = self._short
            found = _MAX_10.search(data) if short is not None else None
            if short is None or found is None or short[1] not in data:
                return data
            most, _, draw = short
            self.receives_shortened += 1
            self._receives_in_flight += 1
            self.receives_in_flight_max = max(self.receives_in_flight_max, self._receives_in_flight)
            self._local.receiving = True
            n = draw.randint(1, most)
        wanted = b'"MaxNumberOfMessages":%d' % n
        return data[: found.start()] + wanted.ljust(len(found.group())) + data[found.end() :]

    def _answered(self) -> None:
        """This connection's shortened receive has its answer (or its connection ended)."""
        with self._lock:
            self._receives_in_flight -= 1
        self._local.receiving = False

    def _cut_response(self, data: bytes) -> bool:
        """Whether to lose the answer to this request (only a chunk that starts a request
        is drawn for)."""
        if b"X-Amz-Target" not in data and b"x-amz-target" not in data:
            return False
        with self._lock:
            self.requests += 1
            for api, left in self._lost.items():
                if left > 0 and re.search(re.escape(api) + rb"\b", data):
                    self._lost[api] = left - 1
                    self.responses_cut += 1
                    self.cut_requests.append(data[:4096])
                    return True
            if self._random.random() < self._response_share:
                self.responses_cut += 1
                self.cut_requests.append(data[:4096])
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
            if target := re.search(rb"X-Amz-Target: [\w.]+\.(\w+)", data, re.IGNORECASE):
                self.seen[target.group(1).decode()] += 1
            if self._down:
                return True
            for api, left in self._cuts.items():
                if left > 0 and api in data:
                    self._cuts[api] = left - 1
                    self.cut_count += 1
                    return True
        return False

    def _should_hang(self, data: bytes) -> bool:
        with self._lock:
            for api, left in self._hangs.items():
                if left > 0 and api in data:
                    self._hangs[api] = left - 1
                    return True
        return False

    @staticmethod
    def _hold(client: socket.socket) -> None:
        """Read and drop what the client sends until it closes the connection."""
        with contextlib.suppress(OSError):
            while client.recv(65536):
                pass

    def _pass_request(
        self, data: bytes, client: socket.socket, server: socket.socket, lose_answer: bool
    ) -> bool | None:
        """Pass a chunk of a request on, or end the connection here (None): cut before the
        server sees it, or hung. Otherwise whether its answer is to be lost."""
        if self._should_cut(data):
            return None  # dropped on the floor; the connection closes
        if self._should_hang(data):
            self._hold(client)
            return None
        lose_answer = lose_answer or self._cut_response(data)
        if self._latency and (b"X-Amz-Target" in data or b"x-amz-target" in data):
            time.sleep(self._latency)  # this connection's thread: a network round trip
        server.sendall(self._shorten(data))
        return lose_answer

    def _upstream_for(self, data: bytes) -> tuple[str, int]:
        for marker, address in self._routes.items():
            if marker in data:
                return address
        return self._upstream

    def _serve(self, client: socket.socket) -> None:
        first = b""
        if self._routes:  # the upstream depends on the first request
            with contextlib.suppress(OSError):
                first = client.recv(65536)
        try:
            server = socket.create_connection(self._upstream_for(first), timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets.update((client, server))
        lose_answer, lost_request = False, b""
        try:
            if first:
                passed = self._pass_request(first, client, server, lose_answer)
                if passed is None:
                    return
                lose_answer, lost_request = passed, first[:4096]
            elif self._routes:
                return  # the client closed before its first request
            while True:
                readable, _, _ = select.select([client, server], [], [], 60)
                if not readable:
                    return
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    if src is client:
                        passed = self._pass_request(data, client, server, lose_answer)
                        if passed is None:
                            return
                        if passed and not lose_answer:
                            lost_request = data[:4096]
                        lose_answer = passed
                        continue
                    if getattr(self._local, "receiving", False):
                        self._answered()
                    if lose_answer:
                        answer = _whole_answer(data, server)
                        with self._lock:
                            self.lost_answers.append((lost_request, answer))
                        return  # the server did the work: close before the answer is passed
                    client.sendall(data)
        except OSError:
            return
        finally:
            if getattr(self._local, "receiving", False):
                self._answered()
            with self._lock:
                self._sockets.difference_update((client, server))
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()


_MAX_10 = re.compile(rb'"MaxNumberOfMessages": ?10')


def _whole_answer(answer: bytes, server: socket.socket) -> bytes:
    """An answer read to its Content-Length (the server writes its headers and its body
    apart, so the first chunk may hold the headers alone), or to what came within a second."""
    server.settimeout(1)
    with contextlib.suppress(OSError):
        while not _whole(answer):
            chunk = server.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def _whole(answer: bytes) -> bool:
    head, ended, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length:\s*(\d+)", head)
    return bool(ended) and (length is None or len(body) >= int(length.group(1)))


def _address(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    return (parsed.hostname or "127.0.0.1", parsed.port or 80)
