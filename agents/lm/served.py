"""Policies backed by a served chat model: any OpenAI-compatible endpoint.

``ServedSeller`` / ``ServedBuyer`` send, for every market that needs a message, one
``POST {base_url}/chat/completions`` with the rules as the system message and the side's
view (``arena.text``) as the user message; ``model``, ``temperature``, ``max_tokens``
and a per-message ``seed`` (from the policy seed, the market key and the turn) are
passed through. The API key is read from the environment variable ``api_key_env``
(never stored, never recorded). vLLM, llama.cpp's server, Ollama and hosted APIs all
speak this.

What can go wrong, and what it becomes:

=====================================  ==================================================
a reply that is not the protocol        the parser's business: a counted violation
time-out (``timeout`` s per request)    a counted violation (empty message), recorded
HTTP 429 or 5xx, or another 4xx         a counted violation, recorded with the status
a body that is not JSON, has no         a counted violation, recorded as ``bad_reply``
``choices[0].message.content`` string,
or is over ``MAX_REPLY_BYTES``
connection refused, unknown host,       one ``ServedModelError`` naming the endpoint and
HTTP 401/403/404 (key, model, URL)      what to check: the run stops, nothing hangs
=====================================  ==================================================

Record and replay: with ``record=PATH`` every request and its reply (or error) is
appended to a JSONL file, one line per message, in batch-row order, with token counts
(``usage``) and the time taken. With ``replay=PATH`` the policy answers from such a file
instead of the endpoint, matching requests by the SHA-256 of their body: a recorded run
replays to the same results without the server. A request the file does not hold is one
``ServedModelError``.

The time-out holds for the whole request, however the server sends its reply: a socket's
own time-out bounds each read alone, so a server sending a few bytes now and then would
hold a request for ever. ``_Deadline`` shuts the connection down when the time is up.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import AGENT, BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.lm.prompts import chat_messages
from agents.text import buyer_action, seller_action
from arena.noise import hash64
from arena.observation import BuyerObs, SellerObs

FATAL_STATUS = (401, 403, 404)
MAX_REPLY_BYTES = 1 << 20
"""The longest reply body read (1 MiB): five times a message of the protocol's longest
(``MAX_MESSAGE_CHARS`` characters, at most 12 bytes each as JSON escapes), room for the
rest of a chat reply. A longer body is a counted ``bad_reply``, left unread."""


class ServedModelError(RuntimeError):
    """The endpoint cannot be used at all (or a replay lacks a request): one clear error."""


def request_hash(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(eq=False)
class _ServedPolicy:
    base_url: str = "http://127.0.0.1:8000/v1"
    """The endpoint's base URL (the part before ``/chat/completions``)."""
    model: str = "default"
    """The served model's name, as the endpoint knows it."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (unset: no Authorization header)."""
    seed: int = 0
    """Root of the per-message seeds passed to the endpoint."""
    temperature: float = 0.0
    """Sampling temperature passed through."""
    max_tokens: int = 256
    """Cap on the tokens of one reply."""
    timeout: float = 60.0
    """Seconds one request may take in all (connecting, sending, the whole reply)."""
    concurrency: int = 8
    """Requests in flight at once."""
    record: str = ""
    """JSONL file to append every request and reply to ("" : none)."""
    replay: str = ""
    """JSONL file of an earlier run to answer from, without the endpoint ("" : live)."""
    _replies: dict[str, dict] | None = field(default=None, init=False, repr=False)

    reads_text = True
    batch_invariance = "exact"  # one request per market; nothing depends on the batch

    def __post_init__(self) -> None:
        self._lock = threading.Lock()  # one writer at a time on the record file
        if self.timeout <= 0 or self.concurrency < 1:
            raise ValueError("timeout must be > 0 and concurrency >= 1")
        if self.replay:
            path = Path(self.replay)
            if not path.is_file():
                raise ServedModelError(f"replay file {path} does not exist")
            self._replies = {}
            for n, line in enumerate(path.read_text().splitlines(), 1):
                try:
                    entry = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    entry = None
                if not (
                    isinstance(entry, dict)
                    and isinstance(entry.get("request_hash"), str)
                    and isinstance(entry.get("text"), str)  # what a replayed turn says
                ):
                    raise ServedModelError(f"{path}:{n}: not a recorded request")
                self._replies[entry["request_hash"]] = entry

    def __getstate__(self) -> dict:  # a lock does not pickle: ship the policy without it
        state = self.__dict__.copy()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ------------------------------------------------------------- requests
    def _body(self, obs: SellerObs | BuyerObs, b: int) -> dict:
        seed = int(hash64(self.seed, obs.key[b], obs.turn[b]) >> np.uint64(33))
        return {
            "model": self.model,
            "messages": chat_messages(obs, b),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": seed,
        }

    def _post(self, body: dict) -> dict:
        """One request; returns the entry to record (``text`` and ``error``)."""
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        entry: dict[str, Any] = {"text": "", "error": "", "status": None, "usage": None}
        t0 = time.perf_counter()
        with _Deadline(self.timeout) as deadline:
            try:
                status, raw = _fetch(req, deadline, self.timeout)
            except urllib.error.HTTPError as err:
                entry["status"] = err.code
                if err.code in FATAL_STATUS:
                    raise ServedModelError(
                        f"{url} answered HTTP {err.code}: check the URL, the model name "
                        f"{self.model!r} and the key in ${self.api_key_env}"
                    ) from None
                entry["error"] = f"http_{err.code}"
            except (OSError, http.client.HTTPException) as err:
                entry["error"] = _failure(err, deadline, url)
            else:
                entry["status"] = status
                if deadline.expired:  # the connection was shut down mid-reply
                    entry["error"] = "timeout"
                elif raw is None:
                    entry["error"] = "bad_reply"
                else:
                    entry.update(_read_reply(raw))
        entry["elapsed_s"] = round(time.perf_counter() - t0, 4)
        return entry

    def _texts(self, obs: SellerObs | BuyerObs, rows: np.ndarray) -> list[str]:
        texts = [""] * obs.batch_size
        if rows.size == 0:
            return texts
        bodies = [self._body(obs, int(b)) for b in rows]
        hashes = [request_hash(body) for body in bodies]
        if self._replies is not None:
            entries = []
            for h, b in zip(hashes, rows, strict=True):
                if h not in self._replies:
                    raise ServedModelError(
                        f"{self.replay} holds no reply for market key {int(obs.key[b])}, "
                        f"turn {int(obs.turn[b])}: a different run (model, seed, markets)?"
                    )
                entries.append(self._replies[h])
        elif len(bodies) == 1 or self.concurrency == 1:
            entries = [self._post(body) for body in bodies]
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(bodies))) as pool:
                entries = list(pool.map(self._post, bodies))
        if self.record:
            lines = [
                json.dumps(
                    {
                        "request_hash": h,
                        "market_key": int(obs.key[b]),
                        "turn": int(obs.turn[b]),
                        "request": body,
                        **{k: e.get(k) for k in ("text", "error", "status", "usage")},
                        "elapsed_s": e.get("elapsed_s"),
                    }
                )
                for h, b, body, e in zip(hashes, rows, bodies, entries, strict=True)
            ]
            with self._lock, open(self.record, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        for b, e in zip(rows, entries, strict=True):
            texts[b] = e["text"] if not e.get("error") else ""
        return texts


def _failure(err: OSError | http.client.HTTPException, deadline: _Deadline, url: str) -> str:
    """The recorded error of a request that raised ``err``; an endpoint that cannot be
    reached at all is a ``ServedModelError``."""
    if deadline.expired or isinstance(err, TimeoutError):
        return "timeout"
    if isinstance(err, urllib.error.URLError):
        if isinstance(err.reason, TimeoutError | socket.timeout):
            return "timeout"
        raise ServedModelError(f"cannot reach {url}: {err.reason}") from None
    # a connection dropped mid-reply, a truncated body, a reply that is not HTTP
    return f"connection: {type(err).__name__}"


class _Deadline:
    """The end of one request, ``seconds`` from its start: then the socket of its
    connection is shut down, which ends a read blocked on it (``expired`` says so)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def attach(self, sock: socket.socket) -> None:
        """The socket of a connection just opened (a redirect opens another)."""
        with self._lock:
            self._sock = sock
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shut(self._sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already
        pass


class _Watched:
    """A connection that hands its socket to the request's deadline once it is open."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.attach(self.sock)


class _HTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_HTTPConnection, deadline=self.deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = partial(_HTTPSConnection, deadline=self.deadline)
        return self.do_open(connection, req, context=self._context)


def _fetch(req: urllib.request.Request, deadline: _Deadline, timeout: float):
    """(status, body) of one request, its connections watched by ``deadline``; the body is
    None when it is over ``MAX_REPLY_BYTES`` (left unread)."""
    opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
    with opener.open(req, timeout=timeout) as resp:
        return resp.status, _read_body(resp)


def _read_body(resp: http.client.HTTPResponse) -> bytes | None:
    """The body, read in pieces up to ``MAX_REPLY_BYTES`` (None past it); one that ends
    before its Content-Length is an ``IncompleteRead``."""
    if resp.length is not None and resp.length > MAX_REPLY_BYTES:
        return None
    pieces, size = [], 0
    while piece := resp.read(64 * 1024):
        size += len(piece)
        if size > MAX_REPLY_BYTES:
            return None
        pieces.append(piece)
    body = b"".join(pieces)
    if resp.length:  # the connection closed early (read(n) does not say so itself)
        raise http.client.IncompleteRead(body, resp.length)
    return body


def _read_reply(raw: bytes) -> dict:
    """text, usage and error of an HTTP 200 body."""
    try:
        reply = json.loads(raw)
        text = reply["choices"][0]["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("content is not a string")
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):  # deep nesting
        return {"error": "bad_reply", "text": ""}
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if isinstance(usage, dict):
        usage = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens")}
    else:
        usage = None
    return {"text": text, "usage": usage}


@dataclass(eq=False)
class ServedSeller(_ServedPolicy, SellerPolicy):
    """A seller whose messages a served chat model writes."""

    def act(self, obs: SellerObs) -> SellerAction:
        return seller_action(self._texts(obs, np.flatnonzero(~obs.done)))[0]


@dataclass(eq=False)
class ServedBuyer(_ServedPolicy, BuyerPolicy):
    """A buyer (an agent) whose answers a served chat model writes."""

    kind = AGENT

    def act(self, obs: BuyerObs) -> BuyerAction:
        return buyer_action(self._texts(obs, np.flatnonzero(obs.needs_answer)))[0]
