"""``shiftkit serve`` (and ``shiftkit agent serve``, the same handler) is safe to run: a web page cannot
reach it (Origin, Content-Type, Host), the weight routes need the token, oversized or out-of-range
requests get a one-line 4xx before any work, stalled and trickling connections are dropped by the
whole-request deadline without one thread each, a reload with another tokenizer is refused; after
every refusal the server still serves. No timing is asserted: only generous deadlines."""

import json
import socket
import threading
import time

import pytest

from shiftkit.agent.server import ChatServer
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model
from shiftkit.serve import CompletionServer, Limits

TOKEN = "s3cret-token"
SPEC = TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=16)
GOOD = {"prompt": "Q:1+2=", "max_tokens": 4, "seed": 3, "logprobs": 0, "return_token_ids": True}
DEADLINE = 120.0  # seconds: generous on a loaded machine; nothing here should take more than a few


def http(port: int, method: str, path: str, body=None, headers: dict | None = None, raw_body: bytes | None = None,
         host: str = "127.0.0.1") -> tuple[int, dict]:
    """One request on a raw socket (so every header, including Host, is exactly what the test says)."""
    data = raw_body if raw_body is not None else (b"" if body is None else json.dumps(body).encode())
    h = {"Host": f"{host}:{port}", "Connection": "close"}
    if method == "POST":
        h |= {"Content-Type": "application/json", "Content-Length": str(len(data))}
    h |= headers or {}
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items() if v is not None) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as s:
        s.sendall(head.encode() + data)
        buf = b""
        while chunk := s.recv(65536):
            buf += chunk
    status_line, _, rest = buf.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(payload or b"{}")


def assert_refused(resp: tuple[int, dict], code: int, match: str = "") -> str:
    status, body = resp
    assert status == code, (status, body)
    msg = body["error"]["message"] if "error" in body else body["message"]
    assert isinstance(msg, str) and msg and "\n" not in msg and match in msg, msg
    return msg


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tok = make_char_tokenizer()
    model = make_tiny_model(SPEC, vocab_size=len(tok), seed=0)
    root = tmp_path_factory.mktemp("serve_security")
    other = make_tiny_model(SPEC, vocab_size=len(tok), seed=1)  # same architecture and tokenizer, other weights
    save_model(other, tok, root / "other")
    return model, tok, root


@pytest.fixture()
def server(world):
    model, tok, _ = world
    s = CompletionServer(model, tok, name="tiny", token=TOKEN, limits=Limits(timeout=1.0, workers=4)).start()
    yield s
    s.stop()


def serves(s) -> dict:
    """The server still answers a good request (the check after every refusal)."""
    status, body = http(s.port, "POST", "/v1/completions", GOOD)
    assert status == 200 and len(body["choices"][0]["token_ids"]) >= 1, body
    return body


def test_a_web_page_cannot_swap_the_weights(server, world):
    """The reported attack (a cross-site ``text/plain`` POST to the weight route) and its variants."""
    other = str(world[2] / "other")
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):  # CORS-simple types
        assert_refused(http(server.port, "POST", "/update_weights_from_disk", {"model_path": other},
                            {"Content-Type": ctype, "Authorization": f"Bearer {TOKEN}"}), 415, "application/json")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/update_weights_from_disk", "/v1/completions"):
        body = {"model_path": other} if path.startswith("/update") else GOOD
        assert_refused(http(server.port, "POST", path, body, {"Origin": "http://evil.example", **auth}), 403, "cross-origin")
    assert_refused(http(server.port, "GET", "/health", headers={"Origin": "null"}), 403, "cross-origin")
    assert_refused(http(server.port, "OPTIONS", "/update_weights_from_disk"), 403, "cross-origin")  # no CORS preflight
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example
    assert_refused(http(server.port, "GET", "/health", host="evil.example"), 403, "loopback")
    assert server.weight_version == 0
    serves(server)


def test_the_weight_routes_need_the_token(server, world):
    other = str(world[2] / "other")
    before = serves(server)["choices"][0]["token_ids"]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):
        assert_refused(http(server.port, "POST", "/update_weights_from_disk", {"model_path": other}, headers), 401, "token")
        assert_refused(http(server.port, "POST", "/collective_rpc", {"method": "reload_weights",
                                                                     "kwargs": {"weights_path": other}}, headers), 401)
    assert server.weight_version == 0 and serves(server)["choices"][0]["token_ids"] == before
    status, body = http(server.port, "POST", "/update_weights_from_disk", {"model_path": other},
                        {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and body["success"] is True and server.weight_version == 1
    assert serves(server)["choices"][0]["token_ids"] != before  # the new weights serve
    assert http(server.port, "GET", "/health")[0] == 200  # on loopback, the read routes need no token


def test_beyond_loopback_every_route_needs_the_token(world):
    model, tok, _ = world
    s = CompletionServer(model, tok, name="tiny", host="0.0.0.0", token=TOKEN, limits=Limits(timeout=1.0)).start()
    try:  # traffic goes to 127.0.0.1 only
        assert s.public and "every route" in s.banner() and TOKEN in s.banner()
        for method, path, body in (("GET", "/health", None), ("GET", "/v1/models", None), ("POST", "/v1/completions", GOOD)):
            assert_refused(http(s.port, method, path, body), 401, "token")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert http(s.port, "GET", "/health", headers=auth)[0] == 200
        assert http(s.port, "POST", "/v1/completions", GOOD, auth)[0] == 200
    finally:
        s.stop()


def test_a_token_is_generated_when_none_is_given(world, monkeypatch):
    monkeypatch.delenv("SHIFTKIT_SERVE_TOKEN", raising=False)
    a = CompletionServer(*world[:2], limits=Limits(timeout=1.0))
    b = CompletionServer(*world[:2], limits=Limits(timeout=1.0))
    try:
        assert len(a.token) >= 24 and a.token != b.token and a.token in a.banner() and "generated" in a.banner()
    finally:
        for s in (a, b):
            s.httpd.server_close()


def test_oversized_requests_get_a_4xx_before_any_work(server):
    # a body declared larger than the cap is refused from its headers (never read)
    assert_refused(http(server.port, "POST", "/v1/completions", raw_body=b"{}",
                        headers={"Content-Length": str(50 << 20)}), 413, "max_body_bytes")
    assert_refused(http(server.port, "POST", "/v1/completions", raw_body=b"x" * (server.limits.max_body_bytes + 1)), 413)
    serves(server)
    for body, match in [({**GOOD, "max_tokens": 10**9}, "max_new_tokens"), ({**GOOD, "max_tokens": 2e7}, "max_new_tokens"),
                        ({**GOOD, "n": 10**6}, "max_n"), ({**GOOD, "prompt": [5] * 9000}, "max_prompt_tokens"),
                        ({**GOOD, "prompt": ["ab"] * 100, "n": 8}, "max_rows"),
                        ({**GOOD, "prompt": [5] * 250, "max_tokens": 10}, "context")]:
        assert_refused(http(server.port, "POST", "/v1/completions", body), 400, match)
        serves(server)
    assert_refused(http(server.port, "POST", "/v1/completions", raw_body=b"{}", headers={"Content-Length": None,
                                                                                        "Transfer-Encoding": "chunked"}), 411)
    serves(server)


BAD_VALUES = [
    ({"n": 0}, "n=0"), ({"n": True}, "integer"), ({"n": 1.5}, "integer"), ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": "8"}, "integer"), ({"temperature": -1}, "temperature"), ({"temperature": "hot"}, "finite"),
    ({"temperature": float("nan")}, "finite"), ({"top_p": 0}, "top_p"), ({"top_p": 1.5}, "top_p"),
    ({"seed": -1}, "seed"), ({"seed": 2**70}, "seed"), ({"logprobs": 5}, "logprobs"), ({"prompt": []}, "prompt"),
    ({"prompt": [-1]}, "token ids"), ({"prompt": [10**9]}, "token ids"), ({"prompt": [[5], []]}, "prompt"),
    ({"prompt": 123}, "prompt"), ({"prompt": [True, 5]}, "prompt"), ({"colour": "red"}, "unknown field 'colour'"),
    ({"stream": True}, "stream"), ({"top_k": 5}, "top_k"), ({"model": "gpt-9"}, "not served"),
]


def test_every_bad_value_gets_a_one_line_4xx_and_the_server_keeps_serving(server):
    for patch, match in BAD_VALUES:
        status, body = http(server.port, "POST", "/v1/completions", {**GOOD, **patch})
        assert 400 <= status < 500, (patch, status, body)
        assert_refused((status, body), status, match)
    for raw, match in [(b"{not json", "not JSON"), (b"[1, 2]", "JSON object"), (b"\xff\xfe", "not JSON"),
                       (b"[" * 100000, "not JSON")]:
        assert_refused(http(server.port, "POST", "/v1/completions", raw_body=raw), 400, match)
    assert_refused(http(server.port, "PUT", "/v1/completions", raw_body=b"{}"), 405)
    assert_refused(http(server.port, "GET", "/nothing"), 404)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for body, match in [({"model_path": "relative/dir"}, "absolute"), ({"model_path": 5}, "path"),
                        ({"model_path": "/nonexistent/dir"}, "no config.json")]:
        assert_refused(http(server.port, "POST", "/update_weights_from_disk", body, auth), 400, match)
    for body, match in [({"method": "execute_model"}, "only reload_weights"),
                        ({"method": "reload_weights", "kwargs": {"weights_iterator": "x"}}, "weights_path")]:
        assert_refused(http(server.port, "POST", "/collective_rpc", body, auth), 400, match)
    # a request line or headers beyond the stdlib's limits: JSON one-liners too
    assert_refused(http(server.port, "GET", "/" + "a" * 70000), 414)
    assert server.weight_version == 0
    serves(server)


def test_a_reload_with_another_tokenizer_is_refused(server, world, tmp_path):
    model, tok, _ = world
    other_tok = make_char_tokenizer()
    other_tok.add_special_tokens({"additional_special_tokens": ["<|tool|>"]})  # one more id, another vocabulary
    save_model(make_tiny_model(SPEC, vocab_size=len(tok), seed=2), other_tok, tmp_path / "retok")
    msg = assert_refused(http(server.port, "POST", "/update_weights_from_disk", {"model_path": str(tmp_path / "retok")},
                              {"Authorization": f"Bearer {TOKEN}"}), 400, "tokenizer")
    assert "not the served one" in msg and server.weight_version == 0
    serves(server)


def test_stalled_connections_are_dropped_by_the_deadline_without_a_thread_each(world):
    """50 clients connect and send nothing (or trickle a header byte by byte): each is dropped once the
    whole-request deadline passes, at most ``workers`` threads ever hold them, and the server serves after."""
    model, tok, _ = world
    s = CompletionServer(model, tok, name="tiny", token=TOKEN, limits=Limits(timeout=0.5, workers=4)).start()
    base = threading.active_count()
    peak = [base]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], threading.active_count())
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    socks = []
    try:
        socks = [socket.create_connection(("127.0.0.1", s.port), timeout=DEADLINE) for _ in range(50)]
        trickle = socks[:3]
        for k in socks:
            k.settimeout(DEADLINE)
        closed, cut_off = set(), set()
        for i, k in enumerate(trickle):  # a header byte every 20 ms, faster than any per-recv timeout:
            t_end = time.monotonic() + 60  # only a whole-request deadline (0.5 s here) stops it
            try:
                k.send(b"POST /v1/completions HTTP/1.1\r\nX-Slow: ")
                while time.monotonic() < t_end:
                    k.send(b"a")
                    time.sleep(0.02)
            except OSError:  # reset by the server while still sending: dropped
                cut_off.add(i)
        assert cut_off == {0, 1, 2}
        for i, k in enumerate(socks):
            try:
                if k.recv(1) == b"":
                    closed.add(i)
            except OSError:
                closed.add(i)
        assert len(closed) == 50
        stop.set()
        watcher.join()
        # the worker pool grew by at most `workers` threads: not one thread per stalled client
        assert peak[0] <= base + 1 + 4 + 1, (base, peak[0])
        serves(s)
    finally:
        stop.set()
        for k in socks:
            k.close()
        s.stop()


def test_the_agent_chat_server_shares_the_hardened_handler(world):
    model, tok, _ = world
    s = ChatServer(model, tok, name="tiny", token=TOKEN, limits=Limits(timeout=1.0, max_new_tokens=64)).start()
    msgs = [{"role": "user", "content": "hi"}]
    try:
        good = {"messages": msgs, "max_tokens": 4}
        assert_refused(http(s.port, "POST", "/v1/chat/completions", good, {"Content-Type": "text/plain"}), 415)
        assert_refused(http(s.port, "POST", "/v1/chat/completions", good, {"Origin": "http://evil.example"}), 403)
        assert_refused(http(s.port, "POST", "/v1/chat/completions", raw_body=b"{}",
                            headers={"Content-Length": str(50 << 20)}), 413)
        for patch, match in [({"max_tokens": 10**9}, "max_new_tokens"), ({"messages": [{"role": "wizard"}]}, "role"),
                             ({"messages": "hi"}, "messages"), ({"temperature": float("inf")}, "finite"),
                             ({"n": 3}, "n=3"), ({"tools": "all"}, "tools"), ({"messages": [{"role": "user", "content": "x" * 9000}]},
                                                                              "max_prompt_tokens")]:
            assert_refused(http(s.port, "POST", "/v1/chat/completions", {**good, **patch}), 400, match)
        status, body = http(s.port, "POST", "/v1/chat/completions", good)
        assert status == 200 and body["usage"]["completion_tokens"] >= 1
    finally:
        s.stop()
