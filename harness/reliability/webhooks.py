"""A recording relay between the simulator's signed webhooks and the API.

The simulator posts its receipts here; the relay forwards each one, byte
for byte, to the API's `/v1/webhooks/simulator` (or, where the simulator
speaks a provider's own wire, that provider's route, `/v1/webhooks/twilio`:
its receipts carry no simulator signature) and answers with the API's
status, so the simulator's own retry logic still sees the truth. Every
capture is kept (bounded), so the fault injector can POST the very same
signed bytes again: a provider's at-least-once redelivery, or an attacker's
replay, must change nothing.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from harness.wires import receiver_of

# Only the headers the receiver reads: the signature, the body's type and the
# profile that speaks (without it every receipt read as the ideal profile's,
# and a real profile's references and vocabulary went untested); hop-by-hop
# ones stay here.
FORWARDED = (
    "content-type",
    "x-simulator-signature",
    "x-simulator-profile",
    # The providers' own authentication, where the simulator speaks their
    # wire: Twilio's signature, Postmark's Basic credentials, SendGrid's
    # signed event webhook (Vonage signs inside the body).
    "x-twilio-signature",
    "authorization",
    "x-twilio-email-event-webhook-signature",
    "x-twilio-email-event-webhook-timestamp",
    # AWS's: an SNS envelope (SES's and End User Messaging SMS's events).
    "x-amz-sns-message-type",
)
MAX_CAPTURES = 20_000
# The API refuses signatures older than this (the adapter's tolerance).
SIGNATURE_TOLERANCE_S = 300.0


@dataclass(frozen=True)
class Capture:
    at: float  # time.time() when received
    path: str
    headers: dict[str, str]
    body: bytes
    status: int


class WebhookRelay:
    def __init__(self, api_urls: Sequence[str], route: str = "simulator") -> None:
        """`route`: the path the simulator posts to, `/v1/webhooks/<route>`
        (Twilio signs it, so Twilio's where its wire is spoken); each
        receipt is forwarded to the route of whoever signed it, at the
        next of `api_urls` in turn (a load balancer's round robin)."""
        self._apis = itertools.cycle(api_urls)
        self.route = route
        self.captures: deque[Capture] = deque(maxlen=MAX_CAPTURES)
        self.forwarded: Counter[int] = Counter()  # API status -> count
        self.replayed: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=10.0)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="webhook-relay", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/webhooks/{self.route}"

    def start(self) -> WebhookRelay:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def forward(self, path: str, headers: dict[str, str], body: bytes) -> int:
        try:
            answer = self._client.post(self._next_api() + path, content=body, headers=headers)
            status = answer.status_code
        except httpx.HTTPError:
            status = 502  # the API is unreachable: the simulator retries later
        with self._lock:
            self.forwarded[status] += 1
            if 200 <= status < 300:
                self.captures.append(Capture(time.time(), path, headers, body, status))
        return status

    def replay(self, rng: random.Random, count: int) -> tuple[Counter[int], Counter[str]]:
        """POST `count` captured webhooks again, each twice at once (still
        within their signature tolerance). Returns the API's answers by
        status and the effects it reported: all must be "duplicate"."""
        horizon = time.time() - SIGNATURE_TOLERANCE_S * 0.8
        with self._lock:
            fresh = [c for c in self.captures if c.at >= horizon]
        chosen = rng.sample(fresh, min(count, len(fresh)))
        with ThreadPoolExecutor(4, thread_name_prefix="replay") as pool:
            results = list(pool.map(self._post_again, chosen + chosen))
        answers: Counter[int] = Counter(status for status, _ in results)
        effects: Counter[str] = Counter(e for _, found in results for e in found)
        with self._lock:
            self.replayed.update(answers)
        return answers, effects

    def _post_again(self, capture: Capture) -> tuple[int, list[str]]:
        try:
            answer = self._client.post(
                self._next_api() + capture.path, content=capture.body, headers=capture.headers
            )
        except httpx.HTTPError:
            return 502, []
        if not answer.is_success:
            return answer.status_code, []
        return answer.status_code, [str(e) for e in answer.json().get("effects", [])]

    def _next_api(self) -> str:
        with self._lock:
            return next(self._apis)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED}
                # To the route of whoever signed it: a provider's own wire,
                # or the simulator's protocol.
                _, _, query = self.path.partition("?")
                path = f"/v1/webhooks/{receiver_of(headers, body)}" + (f"?{query}" if query else "")
                status = relay.forward(path, headers, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass  # one line per receipt would drown the run's output

        return Handler
