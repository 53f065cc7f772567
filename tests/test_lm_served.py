"""Served-model agents against an OpenAI-compatible server started here on loopback:
valid replies, record and replay, time-outs, HTTP errors and malformed bodies."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from agents.lm.served import ServedBuyer, ServedModelError, ServedSeller
from agents.rollout import play_batch
from agents.scripted.buyers import Truthful
from agents.scripted.sellers import GreedyMatcher
from arena.config import MarketConfig
from arena.generator import generate_batch

CFG = MarketConfig(buyers=3, products=2, inventory=1, turns=3)


def _seller_reply(view: str, seed: int) -> str:
    """A valid message read off the seller's view: the first active buyer, the first
    product in stock, at 1.5 x its cost."""
    buyer = re.search(r"^buyer (\d+): active", view, re.M).group(1)
    j, cost = next(
        (m.group(1), float(m.group(2)))
        for m in re.finditer(r"^product (\d+): cost ([\d.]+), (\d+) of", view, re.M)
        if int(m.group(3)) > 0
    )
    hi = float(re.search(r"Prices from [\d.]+ to ([\d.]+)", view).group(1))
    price = round(min(1.5 * cost, hi), 2)
    return f"THINK: seed {seed}\nTO: buyer {buyer}\nOFFER: product {j} at {price}\nSAY: Hello."


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        mode = self.server.mode
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, body, self.headers.get("Authorization")))
        if mode == "slow":
            time.sleep(1.0)
        if mode in ("500", "401", "429"):
            self._send(int(mode), b'{"error": "no"}')
            return
        if mode == "badjson":
            self._send(200, b"{not json")
            return
        if mode == "deep":  # valid JSON nested past the parser's recursion limit
            self._send(200, b"[" * 100_000 + b"]" * 100_000)
            return
        if mode == "truncated":  # the body stops before its Content-Length
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"choices"')
            self.close_connection = True
            return
        if mode == "nothttp":  # a reply without an HTTP status line
            self.wfile.write(b"garbage\r\n\r\n")
            self.close_connection = True
            return
        if mode == "nocontent":
            self._send(200, json.dumps({"choices": [{"message": {}}]}).encode())
            return
        if mode == "drip":  # a valid reply, 8 bytes every 0.3 s: each read comes in time
            self._drip(json.dumps({"choices": [{"message": {"content": "SAY: hi"}}]}).encode())
            return
        if mode in ("huge", "huge_unsized"):  # a valid reply, past any sane size
            self._huge(sized=mode == "huge")
            return
        view = body["messages"][1]["content"]
        if view.startswith("You are the seller"):
            text = _seller_reply(view, body["seed"])
        else:
            text = "THINK: fine\nDECISION: accept\nOFFER: none\nSAY: Yes."
        if mode == "prose":
            text = "Sure! I would offer buyer 0 product 1 at 50."
        reply = {
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": len(view.split()), "completion_tokens": len(text.split())},
        }
        self._send(200, json.dumps(reply).encode())

    def _drip(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            for start in range(0, len(payload), 8):
                self.wfile.write(payload[start : start + 8])
                self.wfile.flush()
                time.sleep(0.3)
        except OSError:  # the client gave up on it
            pass

    def _huge(self, sized: bool) -> None:
        payload = json.dumps({"choices": [{"message": {"content": "SAY: " + "x" * 2**21}}]})
        self.send_response(200)
        if sized:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()  # unsized: the body ends when the connection closes
        try:
            self.wfile.write(payload.encode())
        except OSError:  # the client stopped reading
            pass
        self.close_connection = True

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.mode = "ok"
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _outcome(engine):
    paid = np.nan_to_num(engine.paid, nan=-1.0)
    return [engine.bought.tolist(), paid.tolist(), engine.seller_violations.tolist()]


def test_a_served_seller_plays_records_and_replays_without_the_server(server, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    monkeypatch.setenv("TEST_KEY", "sk-test")
    log = tmp_path / "served.jsonl"
    batch = generate_batch(CFG, 0, 4)
    seller = ServedSeller(base_url=server.url, model="m", api_key_env="TEST_KEY", seed=3,
                          temperature=0.7, record=str(log))  # fmt: skip
    live = play_batch(batch, seller, Truthful())
    assert live.seller_violations.sum() == 0 and (live.bought >= 0).any()
    path, body, auth = server.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["model"] == "m" and body["temperature"] == 0.7 and body["max_tokens"] == 256
    assert body["messages"][0]["role"] == "system" and "TO: buyer" in body["messages"][0]["content"]
    assert len({b["seed"] for _, b, _ in server.requests}) == len(server.requests)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == len(server.requests) == int(live.turn.sum())
    assert all(x["usage"]["completion_tokens"] > 0 and x["error"] == "" for x in lines)
    assert "sk-test" not in log.read_text()
    server.shutdown()
    server.server_close()

    again = ServedSeller(base_url=server.url, model="m", seed=3, temperature=0.7, replay=str(log))
    replayed = play_batch(batch, again, Truthful())
    assert _outcome(replayed) == _outcome(live)
    assert [replayed.dialogue.records(b) for b in range(4)] == [
        live.dialogue.records(b) for b in range(4)
    ]
    # Another seed asks other questions: the record cannot answer them.
    with pytest.raises(ServedModelError, match="holds no reply"):
        play_batch(batch, ServedSeller(model="m", seed=4, temperature=0.7, replay=str(log)),
                   Truthful())  # fmt: skip


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        "[1, 2]",
        '{"text": "hi"}',
        '{"request_hash": "ab"}',  # no text: the turn it replays would have no message
        '{"request_hash": 7, "text": "hi"}',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_a_replay_file_with_a_line_that_is_no_recorded_request_is_refused_when_read(tmp_path, line):
    log = tmp_path / "served.jsonl"
    good = {"request_hash": "cd", "text": "hi", "error": "", "status": 200, "usage": None}
    log.write_text(json.dumps(good) + "\n" + line + "\n")
    with pytest.raises(ServedModelError, match=r"served.jsonl:2: not a recorded request"):
        ServedSeller(model="m", replay=str(log))


@pytest.mark.parametrize(
    "mode",
    ["slow", "500", "429", "badjson", "deep", "nocontent", "prose", "truncated", "nothttp"],
)
def test_failed_requests_are_counted_violations_in_bounded_time(server, tmp_path, mode):
    server.mode = mode
    log = tmp_path / "served.jsonl"
    batch = generate_batch(CFG, 1, 2)
    t0 = time.perf_counter()
    seller = ServedSeller(base_url=server.url, timeout=0.3, record=str(log))
    engine = play_batch(batch, seller, Truthful())
    assert time.perf_counter() - t0 < 10
    assert engine.seller_violations[:, 1].tolist() == [CFG.turns, CFG.turns]  # all MALFORMED
    errors = {json.loads(x)["error"] for x in log.read_text().splitlines()}
    expected = {"slow": "timeout", "500": "http_500", "429": "http_429", "badjson": "bad_reply",
                "deep": "bad_reply", "nocontent": "bad_reply", "prose": "",
                "truncated": "connection: IncompleteRead",
                "nothttp": "connection: BadStatusLine"}[mode]  # fmt: skip
    assert errors == {expected}


def test_the_time_out_holds_for_the_whole_request_however_the_reply_trickles_in(server, tmp_path):
    server.mode = "drip"  # 50 bytes: 1.8 s in all, though no read waits over 0.3 s
    log = tmp_path / "served.jsonl"
    seller = ServedSeller(base_url=server.url, timeout=1.0, record=str(log))
    one_turn = MarketConfig(buyers=3, products=2, inventory=1, turns=1)
    t0 = time.perf_counter()
    engine = play_batch(generate_batch(one_turn, 1, 1), seller, Truthful())
    assert time.perf_counter() - t0 < 1.5
    assert engine.seller_violations[0, 1] == 1
    [line] = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["error"] == "timeout" and line["elapsed_s"] < 1.5


@pytest.mark.parametrize("mode", ["huge", "huge_unsized"])
def test_a_reply_past_the_size_cap_is_a_counted_bad_reply(server, tmp_path, mode):
    server.mode = mode
    log = tmp_path / "served.jsonl"
    seller = ServedSeller(base_url=server.url, timeout=5.0, record=str(log))
    engine = play_batch(generate_batch(CFG, 1, 1), seller, Truthful())
    assert engine.seller_violations[0, 1] == CFG.turns
    assert {json.loads(x)["error"] for x in log.read_text().splitlines()} == {"bad_reply"}


def test_a_rejected_key_or_model_is_one_clear_error(server):
    server.mode = "401"
    with pytest.raises(ServedModelError, match="HTTP 401"):
        play_batch(generate_batch(CFG, 0, 2), ServedSeller(base_url=server.url), Truthful())


def test_an_unreachable_endpoint_is_one_clear_error(server):
    url = server.url
    server.shutdown()
    server.server_close()
    with pytest.raises(ServedModelError, match="cannot reach"):
        play_batch(generate_batch(CFG, 0, 1), ServedSeller(base_url=url, timeout=2), Truthful())


def test_a_served_buyer_answers_a_scripted_seller(server):
    engine = play_batch(
        generate_batch(CFG, 2, 3), GreedyMatcher(), ServedBuyer(base_url=server.url)
    )
    assert engine.buyer_violations.sum() == 0
    # It accepts every offer: the two units of each market sell in two turns.
    assert (engine.bought >= 0).sum(axis=1).tolist() == [2, 2, 2] and engine.turn.tolist() == [
        2
    ] * 3
    view = server.requests[0][1]["messages"][1]["content"]
    assert view.startswith("You are buyer") and "your value" in view


def test_served_policies_read_the_dialogue():
    assert ServedSeller.reads_text and ServedBuyer.reads_text
    assert np.isclose(ServedSeller().timeout, 60.0)


def test_a_served_policy_pickles_for_a_worker_process(tmp_path):
    import pickle

    seller = ServedSeller(base_url="http://127.0.0.1:9/v1", record=str(tmp_path / "r.jsonl"))
    copy = pickle.loads(pickle.dumps(seller))
    assert copy.base_url == seller.base_url and copy.record == seller.record
    assert copy._lock is not seller._lock
