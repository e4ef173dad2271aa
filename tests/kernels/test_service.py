"""``shiftkit kernels serve``: the environment as an OpenEnv server, its pool, and its client.

The contract is OpenEnv's (PyPI ``openenv`` 0.10.0, pinned in the test extra): ``WS /ws`` with
``{"type": "reset"|"step"|"state"|"close", "data"}`` messages and ``POST /reset``, ``POST /step``
(``openenv/core/env_server/http_server.py``, ``types.py``, ``env_client.py``). The WebSocket tests drive
the server with OpenEnv's own ``GenericEnvClient``; the slow test starts the CLI as a separate process.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.envclient import LocalKernelEnv, RemoteKernelEnv
from shiftkit.kernels.pool import EvalPool, JobError, PoolFull, VerdictCache, make_job
from shiftkit.kernels.service import KernelService, ServeJob, make_server

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "shiftkit/kernels/fixtures"
PROBLEM = (FIX / "problems/scale_shift_clamp.py").read_text()
CORRECT = (FIX / "solutions/scale_shift_clamp/correct.py").read_text()
SLEEPY = "import time\ntime.sleep(60)\n" + PROBLEM  # trusted problem code: occupies a slot without CPU
SELF_KILL = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n" + PROBLEM  # kills the pool child
SEGFAULT = CORRECT.replace("yr[c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);",
                           "yr[c] = v; if (r == rows - 1 && c == cols - 1) { volatile float* z = (volatile float*)0; *z = v; }")
assert SEGFAULT != CORRECT


# ----------------------------------------------------------------------------- fast: requests, no evaluation

def test_make_job_validates_and_keys():
    a = make_job(PROBLEM, CORRECT, "verify", {"trials": 2}, "p")
    assert a.key() == make_job(PROBLEM, CORRECT, "verify", {"trials": 2}, "p").key()
    assert len({a.key(), make_job(PROBLEM, CORRECT + "\n", "verify", {"trials": 2}, "p").key(),
                make_job(PROBLEM, CORRECT, "verify", {"trials": 3}, "p").key(),
                make_job(PROBLEM + "\n", CORRECT, "verify", {"trials": 2}, "p").key(),
                make_job(PROBLEM, CORRECT, "profile", {"trials": 2}, "p").key()}) == 5
    for args, msg in [((PROBLEM, CORRECT, "verify", {"timeout_s": 1}), "set by the server"),
                      ((PROBLEM, CORRECT, "verify", {"allow_unisolated": True}), "set by the server"),
                      ((PROBLEM, CORRECT, "verify", {"nope": 1}), "unknown config"),
                      ((PROBLEM, CORRECT, "run"), "mode"),
                      ((PROBLEM, {"../x.cpp": "", "model_new.py": ""}), "relative path"),
                      ((PROBLEM, {"kernels/a.cpp": "int x;"}), "model_new.py"),
                      (("x = 1", CORRECT), "KernelBench")]:
        with pytest.raises(JobError, match=msg):
            make_job(*args)


def test_verdict_cache_reuses_verdicts_but_remeasures_timing():
    v, p = make_job(PROBLEM, CORRECT, "verify"), make_job(PROBLEM, CORRECT, "profile")
    c = VerdictCache()
    c.put(v, {"reward": 1.0})
    c.put(p, {"reward": 2.0})
    assert c.get(v) == {"reward": 1.0, "cached": True}
    assert c.get(p) is None  # timing is re-measured unless asked for
    t = VerdictCache(cache_timing=True)
    t.put(p, {"reward": 2.0})
    assert t.get(p)["reward"] == 2.0 and t.get(make_job(PROBLEM, CORRECT + " ", "profile")) is None


def test_verdict_cache_file_keeps_verdicts_across_restarts_for_the_same_harness(tmp_path, monkeypatch, capsys):
    import shiftkit.kernels.pool as pool

    f = tmp_path / "v" / "verdicts.jsonl"
    v, p = make_job(PROBLEM, CORRECT, "verify"), make_job(PROBLEM, CORRECT, "profile")
    a = VerdictCache(cache_timing=True, path=str(f))
    a.put(v, {"reward": 1.0})
    a.put(p, {"reward": 2.0})
    a.put(make_job(PROBLEM, CORRECT + " ", "verify"), {"error": "x"})  # errors are not kept
    assert len(f.read_text().splitlines()) == 2  # written as given, not at exit
    b = VerdictCache(cache_timing=True, path=str(f))
    assert b.get(p) == {"reward": 2.0, "cached": True} and b.stats()["loaded"] == 2
    assert VerdictCache(path=str(f)).get(p) is None  # timing stays re-measured unless asked for
    # a torn last line (a killed writer) is dropped and noted; the next verdict starts a fresh line
    f.write_text(f.read_text() + '{"key": "abc", "har')
    c = VerdictCache(cache_timing=True, path=str(f))
    assert "torn last line" in capsys.readouterr().err and c.stats()["loaded"] == 2
    c.put(make_job(PROBLEM, CORRECT + "  ", "verify"), {"reward": -1.0})
    assert [json.loads(x)["result"]["reward"] for x in f.read_text().splitlines()] == [1.0, 2.0, -1.0]
    # another harness's verdicts are not reused; nor the same sources' on another torch
    monkeypatch.setattr(pool, "_FINGERPRINT", "0" * 16)
    d = VerdictCache(cache_timing=True, path=str(f))
    assert d.get(v) is None and d.stats()["other_harness"] == 3
    monkeypatch.setattr(pool, "_FINGERPRINT", None)
    here = pool.harness_fingerprint()
    monkeypatch.setattr(pool, "_FINGERPRINT", None)
    monkeypatch.setattr(pool, "verdict_context", lambda: "torch=0.0|cc=x|machine=y")
    assert pool.harness_fingerprint() != here
    monkeypatch.setattr(pool, "_FINGERPRINT", here)
    # a bad line in the middle is an error naming the file and line
    lines = f.read_text().splitlines()
    f.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(ShiftkitError, match=r"verdicts.jsonl:2: not a"):
        VerdictCache(path=str(f))
    with pytest.raises(ShiftkitError, match=r"verdicts.jsonl:2: not a"):
        KernelService(ServeJob(port=0, slots=1, cache_file=str(f)))  # `kernels serve cache_file=` is this cache


@pytest.fixture
def server(request):
    kw = getattr(request, "param", {})
    svc = KernelService(ServeJob(port=0, slots=1, **kw))
    httpd = make_server(svc)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", svc
    httpd.shutdown()
    httpd.server_close()
    svc.close()


def http(url, path, body=None, raw=None, ctype="application/json", headers=None, method=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    r = urllib.request.Request(url + path, data=data, method=method or ("POST" if data is not None else "GET"))
    if ctype:
        r.add_header("Content-Type", ctype)
    for k, v in (headers or {}).items():
        r.add_header(k, v)
    try:
        with urllib.request.urlopen(r, timeout=120) as f:
            return f.status, json.loads(f.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def one_line(body):
    assert set(body) == {"detail"} and isinstance(body["detail"], str) and "\n" not in body["detail"] and body["detail"]
    return body["detail"]


@pytest.mark.parametrize("server", [{"max_request_mb": 0.01}], indirect=True)
def test_bad_requests_get_a_one_line_4xx(server):
    url, svc = server
    cases = [
        (dict(path="/step", body={"action": {}}, ctype="text/plain"), 415, "application/json"),
        (dict(path="/step", raw=b"{not json"), 400, "not JSON"),
        (dict(path="/step", raw=b"[1, 2]"), 400, "JSON object"),
        (dict(path="/step", body={"action": {"solution": "x" * 20000}}), 413, "cap"),
        (dict(path="/step", body={"action": {"bogus": 1}}), 422, "bogus"),
        (dict(path="/step", body={"actions": {}}), 422, "actions"),
        (dict(path="/step", body={"action": {"solution": CORRECT}}), 422, "no problem"),
        (dict(path="/step", body={"action": {"problem": PROBLEM, "solution": CORRECT, "files": {}}}), 422, "exactly one"),
        (dict(path="/step", body={"action": {"problem": PROBLEM, "solution": CORRECT, "mode": "fast"}}), 422, "mode"),
        (dict(path="/step", body={"action": {"problem": PROBLEM, "solution": CORRECT, "config": {"timeout_s": 9}}}), 400,
         "set by the server"),
        (dict(path="/step", body={"action": {"problem": PROBLEM, "solution": CORRECT}, "timeout_s": -1}), 422, "timeout_s"),
        (dict(path="/reset", body={"problem": "x = 1"}), 422, "KernelBench"),
        (dict(path="/nowhere"), 404, "no route"),
    ]
    for kw, code, word in cases:
        got, body = http(url, **kw)
        assert got == code, (kw, got, body)
        assert word in one_line(body), (kw, body)
    assert svc.pool.stats()["done"] == 0  # none of them reached the pool


def test_exposing_needs_a_token_and_the_token_is_checked(monkeypatch):
    monkeypatch.delenv("SHIFTKIT_KERNEL_SERVE_TOKEN", raising=False)
    with pytest.raises(ShiftkitError, match="token"):
        ServeJob(host="0.0.0.0", port=0).validate()
    ServeJob(host="0.0.0.0", port=0, token="t").validate()
    with pytest.raises(ShiftkitError, match="per request"):
        ServeJob(port=0, profile=False).validate()  # a key the server would ignore is an error


@pytest.mark.parametrize("server", [{"token": "s3cret"}], indirect=True)
def test_token_is_required_on_every_route_but_health(server):
    url, _ = server
    assert http(url, "/health")[0] == 200
    for path in ("/metadata", "/schema", "/state"):
        code, body = http(url, path)
        assert code == 401 and "token" in one_line(body)
    assert http(url, "/step", {"action": {}}, headers={"Authorization": "Bearer wrong"})[0] == 401
    code, body = http(url, "/step", {"action": {}}, headers={"Authorization": "Bearer s3cret"})
    assert code == 422 and "no problem" in one_line(body)  # past the token check


def test_http_routes_follow_openenv(server):
    url, svc = server
    code, h = http(url, "/health")
    assert code == 200 and h["status"] == "healthy" and h["pool"]["slots"] == 1
    code, s = http(url, "/schema")
    assert code == 200 and set(s) == {"action", "observation", "state"}
    code, r = http(url, "/reset", {"problem": PROBLEM, "problem_name": "ssc", "seed": 1})
    assert code == 200 and r["done"] is False and r["reward"] is None and r["observation"]["problem_name"] == "ssc"
    assert "ModelNew" in r["observation"]["prompt"]
    # a model's answer without a solution is graded -1 without an evaluation
    code, r = http(url, "/step", {"action": {"problem": PROBLEM, "completion": "I would fuse the ops."}})
    assert code == 200 and r["reward"] == -1.0 and r["done"] is True
    assert r["observation"]["result"]["reason"].startswith("no_solution")
    code, r = http(url, "/mcp", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert code == 200 and r["id"] == 3 and [t["name"] for t in r["result"]["tools"]] == ["compile", "verify", "profile"]
    assert svc.pool.stats()["done"] == 0


@pytest.mark.slow  # importing openenv.core alone takes 10-40 s here (it pulls in gradio and fastmcp)
def test_openenv_client_websocket_session(server):
    """OpenEnv's own client speaks to the server (no evaluation here)."""
    oe = pytest.importorskip("openenv.core")
    url, _ = server
    with oe.GenericEnvClient(base_url=url).sync() as env:
        r = env.reset()
        assert r.done is False and r.observation["problem_name"] is None
        r = env.step({"type": "list_tools"})
        assert [t["name"] for t in r.observation["tools"]] == ["compile", "verify", "profile"]
        r = env.step({"type": "call_tool", "tool_name": "nope", "arguments": {}})
        assert r.observation["error"]["error_type"] == "tool_not_found"
        with pytest.raises(RuntimeError, match="no problem.*VALIDATION_ERROR"):
            env.step({"solution": CORRECT})
        r = env.reset(problem=PROBLEM, problem_name="ssc", episode_id="e1")
        assert r.observation["problem_name"] == "ssc"
        r = env.step({"completion": "no code here"})
        assert r.reward == -1.0 and r.done is True
        st = env.state()
        assert st["episode_id"] == "e1" and st["step_count"] == 1 and st["problem_name"] == "ssc"


# ----------------------------------------------------------------------------- slow: the pool's bounds

@pytest.mark.slow
def test_pool_bounds_queue_deadline_and_replaces_dead_children():
    with EvalPool(slots=1, queue_max=1, default_deadline_s=600) as pool:
        a = pool.submit(make_job(SLEEPY, CORRECT, "compile"), deadline_s=8)
        t0 = time.monotonic()
        while pool.stats()["busy"] == 0:  # the first job holds the only slot
            assert time.monotonic() - t0 < 60
            time.sleep(0.1)
        b = pool.submit(make_job(SLEEPY, CORRECT + "\n", "compile"), deadline_s=8)  # waits in the queue
        with pytest.raises(PoolFull, match="queue is full"):
            pool.submit(make_job(SLEEPY, CORRECT + "\n\n", "compile"))
        ra, rb = a.result(timeout=120), b.result(timeout=120)
        assert ra["status"] == 504 and "deadline" in ra["error"] and "killed" in ra["error"]
        assert rb["status"] == 504 and "deadline" in rb["error"]
        rc = pool.run(make_job(SELF_KILL, CORRECT, "compile"))
        assert rc["status"] == 500 and "died" in rc["error"]
        ok = pool.run(make_job(PROBLEM, CORRECT, "compile"))  # a fresh child takes over
        assert ok["compiled"] is True and ok["mode"] == "compile"
        s = pool.stats()
        assert s["max_busy"] == 1 and s["refused"] == 1 and s["deadline"] == 2 and s["crashed"] == 1


# ----------------------------------------------------------------------------- slow: the CLI in its own process

def _wait_health(url, proc, limit=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as f:
                return json.loads(f.read())
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise AssertionError("kernels serve did not come up")


SAME = ("compiled", "correct", "reward", "reason", "problem", "solution", "mode")


def _same(a, b):
    codes = lambda d: sorted(f["code"] for f in d["findings"])  # noqa: E731
    assert {k: a[k] for k in SAME} == {k: b[k] for k in SAME}
    assert codes(a) == codes(b)


@pytest.mark.slow
def test_served_environment_end_to_end(tmp_path):
    oe = pytest.importorskip("openenv.core")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "shiftkit", "kernels", "serve", "--port", str(port), "slots=1",
                             "queue=1", "deadline_s=300"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_health(url, proc)
        cfg = {"secret_seed": 11, "trials": 2}
        local = LocalKernelEnv().evaluate(PROBLEM, CORRECT, "verify", cfg, "scale_shift_clamp")
        assert local["correct"] is True and local["reward"] == 1.0
        # 1. OpenEnv's client, WebSocket session: the verdict equals in-process evaluation
        with oe.GenericEnvClient(base_url=url, message_timeout_s=300).sync() as c:
            c.reset(problem=PROBLEM, problem_name="scale_shift_clamp")
            r = c.step({"solution": CORRECT, "mode": "verify", "config": cfg})
            assert r.done is True and r.reward == 1.0
            _same(r.observation["result"], local)
            # the agent's tools over the same session
            r = c.step({"type": "call_tool", "tool_name": "compile", "arguments": {"solution": CORRECT}})
            assert r.observation["error"] is None and r.observation["result"]["compiled"] is True and r.done is False
        # 2. shiftkit's HTTP client (kernel_env_url) gives the same verdict (reused from the cache here)
        remote = RemoteKernelEnv(url).evaluate(PROBLEM, CORRECT, "verify", cfg, "scale_shift_clamp")
        _same(remote, local)
        assert remote.get("cached") is True
        # 3. a candidate that crashes its worker: judged -1, the server goes on
        r = RemoteKernelEnv(url).evaluate(PROBLEM, SEGFAULT, "verify", cfg, "scale_shift_clamp")
        assert r["reward"] == -1.0 and r["correct"] is False
        assert {"worker_crash", "runtime_error"} & {f["code"] for f in r["findings"]}, r["findings"]
        # 4. bounded concurrency: one slot, one queue place; a third request is refused, deadlines kill
        with ThreadPoolExecutor(3) as ex:
            first = ex.submit(http, url, "/step", {"action": {"problem": SLEEPY, "solution": CORRECT, "mode": "compile"},
                                                   "timeout_s": 10})
            t0 = time.monotonic()
            while http(url, "/health")[1]["pool"]["busy"] == 0:
                assert time.monotonic() - t0 < 60
                time.sleep(0.2)
            second = ex.submit(http, url, "/step", {"action": {"problem": SLEEPY, "solution": CORRECT + "\n",
                                                               "mode": "compile"}, "timeout_s": 10})
            while http(url, "/health")[1]["pool"]["queued"] == 0:
                assert time.monotonic() - t0 < 60
                time.sleep(0.1)
            code, body = http(url, "/step", {"action": {"problem": PROBLEM, "solution": CORRECT, "mode": "compile"}})
            assert code == 503 and "queue is full" in one_line(body)
            for f in (first, second):
                code, body = f.result(timeout=120)
                assert code == 504 and "deadline" in one_line(body)
        # 5. it still serves, on a replaced child
        code, r = http(url, "/step", {"action": {"problem": PROBLEM, "problem_name": "scale_shift_clamp",
                                                 "solution": CORRECT, "mode": "compile"}})
        assert code == 200 and r["observation"]["result"]["compiled"] is True and r["reward"] is None
        h = http(url, "/health")[1]["pool"]
        assert h["max_busy"] == 1 and h["refused"] == 1 and h["deadline"] == 2
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _ws_frame(op, payload, mask=b"\x01\x02\x03\x04"):
    n = len(payload)
    head = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _ws_read(f):
    h = f.read(2)
    n = h[1] & 0x7F
    if n == 126:
        n = int.from_bytes(f.read(2), "big")
    elif n == 127:
        n = int.from_bytes(f.read(8), "big")
    return h[0] & 0x0F, f.read(n)


@pytest.mark.parametrize("server", [{"max_request_mb": 0.001, "session_idle_s": 3}], indirect=True)
def test_websocket_framing_ping_and_size_cap(server):
    """RFC 6455 on a raw socket: the handshake, a reset, a ping answered with its pong while the session
    is open, a message over the cap refused with an error frame and close code 1009, and an idle
    session closed with 1001 (its slot freed)."""
    url, svc = server
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        f = s.makefile("rb")
        status = f.readline()
        headers = {}
        while (line := f.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        assert b"101" in status and headers["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 sample
        s.sendall(_ws_frame(0x1, json.dumps({"type": "reset", "data": {}}).encode()))
        op, data = _ws_read(f)
        assert op == 0x1 and json.loads(data)["type"] == "observation"
        s.sendall(_ws_frame(0x9, b"hb"))
        assert _ws_read(f) == (0xA, b"hb")
        s.sendall(_ws_frame(0x1, b"{not json"))
        assert json.loads(_ws_read(f)[1])["data"]["code"] == "INVALID_JSON"
        s.sendall(_ws_frame(0x1, json.dumps({"type": "step", "data": {"solution": "x" * 2000}}).encode()))
        op, data = _ws_read(f)
        assert op == 0x1 and json.loads(data)["data"]["code"] == "VALIDATION_ERROR" and "bytes" in json.loads(data)["data"]["message"]
        op, data = _ws_read(f)
        assert op == 0x8 and int.from_bytes(data[:2], "big") == 1009
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        f = s.makefile("rb")
        while f.readline() not in (b"\r\n", b""):
            pass
        t0 = time.monotonic()  # the handler counts the session after it has sent the 101: wait for it
        while svc.sessions != 1:
            assert time.monotonic() - t0 < 60, svc.sessions
            time.sleep(0.01)
        op, data = _ws_read(f)  # nothing sent: closed after session_idle_s
        assert op == 0x8 and int.from_bytes(data[:2], "big") == 1001
        t0 = time.monotonic()
        while svc.sessions:
            assert time.monotonic() - t0 < 60
            time.sleep(0.05)


def _ws_open(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    f = s.makefile("rb")
    while f.readline() not in (b"\r\n", b""):
        pass
    return s, f


@pytest.mark.slow
@pytest.mark.parametrize("server", [{"session_idle_s": 2, "deadline_s": 8}], indirect=True)
def test_websocket_session_is_not_idle_while_its_request_runs(server):
    """A request that runs longer than session_idle_s keeps its session (the answer, here the deadline's
    one-line 504, arrives on the same socket); only a session with nothing in flight is idle."""
    url, svc = server
    s, f = _ws_open(int(url.rsplit(":", 1)[1]))
    with s:
        s.sendall(_ws_frame(0x1, json.dumps({"type": "step", "data": {"problem": SLEEPY, "solution": CORRECT,
                                                                       "mode": "compile"}}).encode()))
        op, data = _ws_read(f)
        msg = json.loads(data)
        assert op == 0x1 and msg["type"] == "error" and msg["data"]["status"] == 504 and "deadline" in msg["data"]["message"]
        op, data = _ws_read(f)  # then, with nothing in flight, the idle close
        assert op == 0x8 and int.from_bytes(data[:2], "big") == 1001


@pytest.mark.parametrize("server", [{"problems": str(FIX / "problems"), "inline_problems": False}], indirect=True)
def test_problems_by_name_only(server):
    """A deployment that must not run request-supplied problem code serves its own problem set."""
    url, svc = server
    code, body = http(url, "/step", {"action": {"problem": PROBLEM, "completion": "x"}})
    assert code == 403 and "by name only" in one_line(body)
    code, body = http(url, "/step", {"action": {"problem_name": "nope", "completion": "x"}})
    assert code == 404 and "nope" in one_line(body)
    code, r = http(url, "/reset", {"problem_name": "scale_shift_clamp"})
    assert code == 200 and r["observation"]["problem_name"] == "scale_shift_clamp" and PROBLEM.strip() in r["observation"]["prompt"]
    code, r = http(url, "/step", {"action": {"problem_name": "scale_shift_clamp", "completion": "no code"}})
    assert code == 200 and r["reward"] == -1.0
    code, body = http(url, "/step", raw=b"[" * 100000 + b"]" * 100000)
    assert code == 400 and "not JSON" in one_line(body)  # a nesting bomb is a bad request, not a crash
    assert http(url, "/health")[0] == 200 and svc.pool.stats()["done"] == 0
    with pytest.raises(ShiftkitError, match="needs problems=DIR"):
        ServeJob(port=0, inline_problems=False).validate()
