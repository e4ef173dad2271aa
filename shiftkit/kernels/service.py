"""``shiftkit kernels serve``: the kernel environment as an OpenEnv environment server.

    shiftkit kernels serve --port 8000 slots=2                   # loopback, no token
    shiftkit kernels serve --host 0.0.0.0 --port 8000 token=$T    # exposed: a token is required

**Contract: OpenEnv** (PyPI ``openenv`` 0.10.0; ``openenv/core/env_server/http_server.py``,
``types.py``, ``mcp_types.py``, ``env_client.py``). Any OpenEnv client talks to it with no shiftkit code
in its process, e.g. ``openenv.core.GenericEnvClient(base_url=URL).sync()`` (the WebSocket session that
TRL's OpenEnv integration and the OpenEnv harness drive), or plain HTTP:

* ``WS /ws``: OpenEnv's session protocol, one environment per connection. Client messages
  ``{"type": "reset"|"step"|"state"|"close", "data": {...}}``; answers ``{"type": "observation", "data":
  {"observation", "reward", "done"}}``, ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data":
  {"message", "code"}}`` (OpenEnv's codes INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR,
  CAPACITY_REACHED).
* ``POST /reset`` ``{"problem": SRC, "problem_name": ..., "seed", "episode_id"}`` -> ``{"observation",
  "reward": null, "done": false}``; ``POST /step`` ``{"action": {...}, "timeout_s": s, "request_id"}`` ->
  ``{"observation", "reward", "done"}`` (OpenEnv's HTTP routes are stateless: a step carries its
  problem); ``GET /health``, ``/metadata``, ``/schema``, ``/state``; ``POST /mcp`` (JSON-RPC
  ``tools/list``, ``tools/call``).

**Actions** (the ``step`` data):

* ``{"problem": SRC, "problem_name": N, "solution": SRC | "files": {path: text} | "completion": TEXT,
  "mode": "profile"|"verify"|"compile", "config": {EvalConfig overrides}}``: one evaluation; the
  observation holds ``result`` (``Result.to_dict()``), the reward is the milestone reward and ``done`` is
  true. ``completion`` is a model's raw answer, read by :func:`reward_fn.extract_solution` (one fenced
  file or a workspace); an answer without a solution is reward -1 (``no_solution``). In a WebSocket
  session ``problem`` defaults to the one given to ``reset``.
* OpenEnv's MCP actions: ``{"type": "list_tools"}`` and ``{"type": "call_tool", "tool_name":
  "compile"|"verify"|"profile", "arguments": {...evaluation fields}}``: the agent's tools; the
  observation is OpenEnv's ``CallToolObservation`` (``tool_name``, ``result``, ``error``), ``done`` false.

**Operation**: evaluations run on one :class:`shiftkit.kernels.pool.EvalPool` (``slots`` children, a
bounded queue, a deadline per request: ``timeout_s``, capped by ``deadline_s``; a killed or crashed
child is replaced). Bodies must be ``application/json`` and at most ``max_request_mb``; a bad request
gets a 4xx whose JSON ``detail`` is one line (400 malformed, 401 token, 404 route, 411/413 size, 415
type, 422 schema), 503 when the queue is full, 504 past the deadline. Loopback by default; binding
another address needs ``token`` (``Authorization: Bearer <token>``, on every route but ``/health``).
A problem is trusted code (its reference ``Model`` runs in the pool, outside the candidate sandbox): a
request may send its source (``inline_problems=true``, the default, so the token holder is trusted) or
name one of the server's own problems (``problems=DIR``; ``inline_problems=false`` accepts only those:
403 otherwise).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import os
import queue
import select
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.evaluate import EvalConfig
from shiftkit.kernels.pool import CLIENT_FIELDS, MODES, EvalPool, JobError, PoolFull, VerdictCache, make_job

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TOOLS = {
    "compile": "Static checks and build of the solution; returns compile errors (file, line, message).",
    "verify": "Compile and check ModelNew against the reference on fresh inputs (no timing); returns correctness, "
              "findings and the reward (-1 or +1).",
    "profile": "Compile, verify and time ModelNew against eager PyTorch and torch.compile; returns speedups and the "
               "milestone reward.",
}
EVAL_FIELDS = {"problem": "string", "problem_name": "string", "solution": "string", "files": "object",
               "completion": "string", "config": "object"}
ACTION_FIELDS = {"type", "mode", "tool_name", "arguments", "metadata", *EVAL_FIELDS}


class BadRequest(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, " ".join(str(detail).split())[:500]


def _tool_schema(name: str) -> dict:
    props = {k: {"type": t} for k, t in EVAL_FIELDS.items()}
    return {"name": name, "description": TOOLS[name], "input_schema": {"type": "object", "properties": props,
                                                                       "additionalProperties": False}}


ACTION_SCHEMA = {"title": "KernelAction", "type": "object", "additionalProperties": False, "properties": {
    "type": {"enum": ["evaluate", "list_tools", "call_tool"], "default": "evaluate"},
    "mode": {"enum": list(MODES), "default": "profile"}, "tool_name": {"enum": list(TOOLS)},
    "arguments": {"type": "object"}, "metadata": {"type": "object"},
    **{k: {"type": t} for k, t in EVAL_FIELDS.items()}}}
OBSERVATION_SCHEMA = {"title": "KernelObservation", "type": "object", "properties": {
    "result": {"type": "object"}, "problem_name": {"type": "string"}, "mode": {"type": "string"},
    "tools": {"type": "array"}, "tool_name": {"type": "string"}, "error": {"type": ["object", "null"]},
    "done": {"type": "boolean"}, "reward": {"type": ["number", "null"]}}}
STATE_SCHEMA = {"title": "KernelState", "type": "object", "properties": {
    "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer"}, "problem_name": {"type": ["string", "null"]}}}


@dataclasses.dataclass
class Session:
    problem: str | None = None
    problem_name: str = "problem"
    episode_id: str | None = None
    step_count: int = 0
    busy: bool = False  # a WebSocket request of this session is being handled

    def state(self) -> dict:
        return {"episode_id": self.episode_id, "step_count": self.step_count,
                "problem_name": self.problem_name if self.problem else None}


@dataclasses.dataclass
class ServeJob(EvalConfig):
    host: str = "127.0.0.1"  # loopback by default; another address needs token
    port: int = 8000
    token: str = ""  # Bearer token ("" = none; required off loopback); or $SHIFTKIT_KERNEL_SERVE_TOKEN
    slots: int = 1  # evaluations at once (one pool child each): CPU cores / GPUs available to candidates
    queue: int = 64  # requests that may wait for a slot; more are answered 503
    deadline_s: float = 900.0  # a request's longest life (its timeout_s is capped by this)
    max_request_mb: float = 4.0  # request body / WebSocket message cap
    max_sessions: int = 64  # concurrent WebSocket sessions
    session_idle_s: float = 600.0  # a WebSocket session that sends nothing (not even a ping) this long is closed
    cache_timing: bool = False  # reuse profile verdicts (timings) of identical requests; off: re-measure
    problems: str = ""  # directory of problem files that requests may name (problem_name=<file stem>) instead of sending
    quiet: bool = False  # no per-request log line on stderr
    inline_problems: bool = True  # accept problem sources in requests: problem code runs unsandboxed in the pool, so the token holder is trusted
    cache_entries: int = 4096
    cache_file: str = ""  # a JSONL file that keeps verdicts across restarts (reused only by the same harness); "" = memory only

    def validate(self) -> None:
        super().validate()
        if self.profile is not True:
            raise ShiftkitError("kernels serve: profile is chosen per request (action mode=profile|verify|compile), "
                                "not by the server; drop profile=")
        if not self.token:
            self.token = os.environ.get("SHIFTKIT_KERNEL_SERVE_TOKEN", "")
        if self.host not in LOOPBACK and not self.token:
            raise ShiftkitError(f"kernels serve: binding {self.host} exposes the environment; set token=... "
                                "(or $SHIFTKIT_KERNEL_SERVE_TOKEN), or keep host=127.0.0.1")
        if self.slots < 1 or self.queue < 0 or self.max_sessions < 1:
            raise ShiftkitError("kernels serve: slots and max_sessions must be >= 1 and queue >= 0")
        if not self.inline_problems and not self.problems:
            raise ShiftkitError("kernels serve: inline_problems=false needs problems=DIR (the problems requests may name)")
        if self.deadline_s <= 0 or self.max_request_mb <= 0 or self.session_idle_s <= 0:
            raise ShiftkitError("kernels serve: deadline_s, max_request_mb and session_idle_s must be > 0")


# ----------------------------------------------------------------------------- the environment

class KernelService:
    """The protocol-independent part: actions -> (HTTP status, OpenEnv StepResponse dict)."""

    def __init__(self, job: ServeJob):
        job.validate()
        self.job = job
        base = EvalConfig(**{f.name: getattr(job, f.name) for f in dataclasses.fields(EvalConfig)})
        self.pool = EvalPool(job.slots, base, queue_max=max(1, job.queue),
                             cache=VerdictCache(job.cache_entries, job.cache_timing, job.cache_file or None), default_deadline_s=job.deadline_s)
        self.sessions = 0
        self.lock = threading.Lock()
        self.registry = self._load_registry(job.problems) if job.problems else {}

    @staticmethod
    def _load_registry(d: str) -> dict[str, str]:
        from pathlib import Path

        root = Path(d)
        if not root.is_dir():
            raise ShiftkitError(f"kernels serve: problems={d} is not a directory")
        reg = {f.stem: f.read_text() for f in sorted(root.glob("*.py")) if not f.name.startswith("_")}
        bad = [n for n, src in reg.items() if "class Model" not in src]
        if not reg or bad:
            raise ShiftkitError(f"kernels serve: problems={d} " + (f"has non-problem files: {', '.join(bad[:3])}" if bad
                                                                   else "has no problem .py files"))
        return reg

    def resolve_problem(self, source, name, session: "Session | None" = None) -> tuple[str | None, str]:
        """The problem's (source, name): the request's source (if inline problems are allowed), else the
        server's problem of that name, else the session's."""
        if source is not None:
            if not self.job.inline_problems:
                raise BadRequest(403, "this server takes problems by name only (problems=DIR); send problem_name, "
                                      f"one of {', '.join(sorted(self.registry)[:5])}{', ...' if len(self.registry) > 5 else ''}")
            if not isinstance(source, str) or "class Model" not in source:
                raise BadRequest(422, "problem must be the source of a KernelBench-format problem")
            return source, name or "problem"
        if name is not None and (self.registry or not self.job.inline_problems):
            if name not in self.registry:
                raise BadRequest(404, f"no problem named {name!r} on this server")
            return self.registry[name], name
        if session is not None and session.problem is not None:
            return session.problem, name or session.problem_name
        return None, name or "problem"

    def reset(self, session: Session, data: dict) -> dict:
        if not isinstance(data, dict):
            raise BadRequest(422, "reset data must be an object")
        unknown = sorted(set(data) - {"problem", "problem_name", "seed", "episode_id"})
        if unknown:
            raise BadRequest(422, f"unknown reset field(s) {', '.join(unknown)}; known: problem, problem_name, seed, episode_id")
        src, name = self.resolve_problem(data.get("problem"), data.get("problem_name"), session)
        if src is not None:
            session.problem, session.problem_name = src, str(name)
        session.episode_id = str(data.get("episode_id") or uuid.uuid4().hex[:12])
        session.step_count = 0
        obs = {"problem_name": session.problem_name if session.problem else None, "tools": list(TOOLS),
               "modes": list(MODES), "episode_id": session.episode_id}
        if session.problem:
            from shiftkit.kernels.reward_fn import render_prompt

            obs["prompt"] = render_prompt(session.problem, self.job.backend, chat=False)
        return {"observation": obs, "reward": None, "done": False}

    def _evaluate(self, session: Session, a: dict, mode: str, timeout_s: float | None) -> dict:
        problem, name = self.resolve_problem(a.get("problem"), a.get("problem_name"), session)
        if problem is None:
            raise BadRequest(422, "no problem: put its source in the action's 'problem' (or its problem_name on a server "
                                  "with problems=DIR), or reset(problem=...) first")
        given = [k for k in ("solution", "files", "completion") if a.get(k) is not None]
        if len(given) != 1:
            raise BadRequest(422, "give exactly one of 'solution' (source), 'files' ({path: text}) or 'completion' "
                                  f"(a model's answer); got {', '.join(given) or 'none'}")
        sol = a[given[0]]
        if given[0] == "completion":
            from shiftkit.kernels.reward_fn import extract_solution

            if not isinstance(sol, str):
                raise BadRequest(422, "completion must be a string")
            sol, why = extract_solution(sol)
            if sol is None:
                return {"reward": -1.0, "correct": False, "compiled": False, "reason": f"no_solution: {why}",
                        "findings": [], "problem": name, "mode": mode}
        try:
            job = make_job(problem, sol, mode, a.get("config") or {}, name)
        except JobError as e:
            raise BadRequest(400, str(e)) from None
        try:
            fut = self.pool.submit(job, min(timeout_s or self.job.deadline_s, self.job.deadline_s))
        except PoolFull as e:
            raise BadRequest(503, str(e)) from None
        d = fut.result()
        if "error" in d:
            raise BadRequest(int(d.get("status", 500)), d["error"])
        return d

    def step(self, session: Session, action: dict, timeout_s: float | None = None) -> dict:
        if not isinstance(action, dict):
            raise BadRequest(422, "action must be an object")
        unknown = sorted(set(action) - ACTION_FIELDS)
        if unknown:
            raise BadRequest(422, f"unknown action field(s) {', '.join(unknown)}; known: {', '.join(sorted(ACTION_FIELDS))}")
        for k, t in EVAL_FIELDS.items():
            if action.get(k) is not None and not isinstance(action[k], str if t == "string" else dict):
                raise BadRequest(422, f"action field {k!r} must be a {t}")
        kind = action.get("type", "evaluate")
        session.step_count += 1
        if kind == "list_tools":
            return {"observation": {"tools": [_tool_schema(n) for n in TOOLS]}, "reward": None, "done": False}
        if kind == "call_tool":
            name, args = action.get("tool_name"), action.get("arguments") or {}
            if name not in TOOLS or not isinstance(args, dict) or set(args) - set(EVAL_FIELDS):
                why = (f"unknown tool {name!r}; tools: {', '.join(TOOLS)}" if name not in TOOLS else
                       f"arguments must be an object of {', '.join(EVAL_FIELDS)}")
                return {"observation": {"tool_name": str(name), "result": None,
                                        "error": {"error_type": "tool_not_found" if name not in TOOLS else "invalid_args",
                                                  "message": why}}, "reward": None, "done": False}
            try:
                d = self._evaluate(session, args, name, timeout_s)
            except BadRequest as e:
                if e.status in (503,):
                    raise
                etype = "timeout" if e.status == 504 else ("invalid_args" if e.status < 500 else "execution_error")
                return {"observation": {"tool_name": name, "result": None, "error": {"error_type": etype, "message": e.detail}},
                        "reward": None, "done": False}
            return {"observation": {"tool_name": name, "result": d, "error": None},
                    "reward": None if name == "compile" else float(d["reward"]), "done": False}
        if kind != "evaluate":
            raise BadRequest(422, f"unknown action type {kind!r}; types: evaluate, list_tools, call_tool")
        mode = action.get("mode", "profile")
        if mode not in MODES:
            raise BadRequest(422, f"mode {mode!r} is not one of {', '.join(MODES)}")
        d = self._evaluate(session, action, mode, timeout_s)
        return {"observation": {"result": d, "problem_name": d.get("problem"), "mode": mode},
                "reward": None if mode == "compile" else float(d["reward"]), "done": True}

    def mcp(self, req: dict, session: Session) -> dict:
        """JSON-RPC 2.0 ``tools/list`` / ``tools/call`` (OpenEnv's ``POST /mcp``)."""
        rid = req.get("id") if isinstance(req, dict) else None
        if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or not isinstance(req.get("method"), str):
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32600, "message": "Invalid Request"}}
        params = req.get("params") or {}
        if req["method"] == "tools/list":
            return {"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]}
                for t in (_tool_schema(n) for n in TOOLS)]}}
        if req["method"] == "tools/call":
            r = self.step(session, {"type": "call_tool", "tool_name": params.get("name"),
                                    "arguments": params.get("arguments") or {}})
            o = r["observation"]
            if o.get("error"):
                return {"jsonrpc": "2.0", "id": rid, "result": {"isError": True, "content": [
                    {"type": "text", "text": o["error"]["message"]}]}}
            return {"jsonrpc": "2.0", "id": rid, "result": {"isError": False, "structuredContent": o["result"],
                                                           "content": [{"type": "text", "text": json.dumps(o["result"])}]}}
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {req['method']}"}}

    def metadata(self) -> dict:
        from shiftkit import __version__

        return {"name": "shiftkit-kernels", "version": __version__,
                "description": "Kernel environment: compile, verify and profile candidate kernels against a "
                               "KernelBench-format problem for the milestone reward {-1, 1, 2, 3}.",
                "readme_content": None, "author": "shiftkit", "documentation_url": None}

    def close(self) -> None:
        self.pool.close()


# ----------------------------------------------------------------------------- WebSocket (RFC 6455, server side)

class _WS:
    """Frames on the raw socket (own read buffer), so waiting for the next frame can time out and resume."""

    def __init__(self, sock, wfile, max_bytes: int, leftover: bytes = b""):
        self.sock, self.w, self.max_bytes = sock, wfile, max_bytes
        self.buf = bytearray(leftover)
        self.wlock = threading.Lock()
        self.closed = False

    def wait_frame(self, idle_s: float) -> bool:
        """True when a frame's first bytes are here or arrive within ``idle_s``."""
        if self.buf:
            return True
        r, _, _ = select.select([self.sock], [], [], idle_s)
        return bool(r)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise EOFError
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def recv(self) -> tuple[int, bytes]:
        """One message (opcode, payload); control frames come back as they arrive."""
        parts, op0 = [], None
        total = 0
        while True:
            h = self._read(2)
            fin, op, masked, n = h[0] & 0x80, h[0] & 0x0F, h[1] & 0x80, h[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            if not masked:
                raise ConnectionError("client frames must be masked")
            if total + n > self.max_bytes:
                raise OverflowError(f"message over {self.max_bytes} bytes")
            mask = self._read(4)
            data = bytearray(self._read(n))
            for i in range(n):
                data[i] ^= mask[i & 3]
            if op >= 0x8:  # control frame (never fragmented)
                return op, bytes(data)
            if op0 is None:
                op0 = op
            parts.append(bytes(data))
            total += n
            if fin:
                return op0, b"".join(parts)

    def send(self, op: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | op]) + (bytes([n]) if n < 126 else
                                     bytes([126]) + struct.pack(">H", n) if n < 65536 else
                                     bytes([127]) + struct.pack(">Q", n))
        with self.wlock:
            self.w.write(head + payload)
            self.w.flush()

    def send_json(self, obj: dict) -> None:
        self.send(0x1, json.dumps(obj, default=str).encode())

    def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed:  # one close frame per connection
            return
        self.closed = True
        try:
            self.send(0x8, struct.pack(">H", code) + reason.encode()[:120])
        except OSError:
            pass


def _ws_error(message: str, code: str, **kw) -> dict:
    return {"type": "error", "data": {"message": " ".join(message.split())[:500], "code": code, **kw}}


# ----------------------------------------------------------------------------- HTTP

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def make_server(svc: KernelService) -> ThreadingHTTPServer:
    job = svc.job
    cap = int(job.max_request_mb * 1024 * 1024)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, code: int, obj: dict) -> None:
            body = json.dumps(obj, default=str).encode()
            if not job.quiet and self.path.split("?")[0] != "/health":
                t = time.monotonic() - getattr(self, "_t0", time.monotonic())
                r = obj.get("reward") if isinstance(obj, dict) else None
                line = f"{time.strftime('%H:%M:%S')} {self.command} {self.path.split('?')[0]} {code} {t:.1f}s"
                line += f" reward={r:g}" if isinstance(r, (int, float)) else (f" {obj.get('detail', '')[:120]}" if code >= 400 else "")
                print(line, file=sys.stderr, flush=True)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if code >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def _authorized(self) -> bool:
            if not job.token:
                return True
            got = self.headers.get("Authorization", "")
            return hmac.compare_digest(got.encode(), f"Bearer {job.token}".encode())

        def _body(self) -> dict:
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise BadRequest(415, f"Content-Type must be application/json, got {ctype or 'none'}")
            if self.headers.get("Transfer-Encoding"):
                raise BadRequest(411, "send a Content-Length (chunked bodies are not accepted)")
            length = self.headers.get("Content-Length")
            if length is None:
                raise BadRequest(411, "Content-Length is required")
            try:
                n = int(length)
            except ValueError:
                raise BadRequest(400, f"bad Content-Length {length!r}") from None
            if n > cap:
                raise BadRequest(413, f"request body of {n} bytes is over the {cap}-byte cap (max_request_mb)")
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw or b"")
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
                raise BadRequest(400, f"body is not JSON: {getattr(e, 'msg', type(e).__name__)}") from None
            if not isinstance(body, dict):
                raise BadRequest(400, "the body must be a JSON object")
            return body

        def _route(self, method: str) -> None:
            self._t0 = time.monotonic()
            path = self.path.split("?")[0].rstrip("/") or "/"
            try:
                if method == "GET" and path == "/health":
                    return self._send(200, {"status": "healthy", "pool": svc.pool.stats()})
                if not self._authorized():
                    raise BadRequest(401, "missing or wrong token: send Authorization: Bearer <token>")
                if method == "GET" and path == "/ws":
                    return self._websocket()
                if method == "GET" and path == "/metadata":
                    return self._send(200, svc.metadata())
                if method == "GET" and path == "/schema":
                    return self._send(200, {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA})
                if method == "GET" and path == "/state":
                    return self._send(200, Session().state())
                if method == "POST" and path in ("/reset", "/step", "/mcp"):
                    body = self._body()
                    if path == "/reset":
                        return self._send(200, svc.reset(Session(), body))
                    if path == "/mcp":
                        return self._send(200, svc.mcp(body, Session()))
                    extra = sorted(set(body) - {"action", "timeout_s", "request_id"})
                    if extra:
                        raise BadRequest(422, f"unknown field(s) {', '.join(extra)}; a step is {{action, timeout_s, request_id}}")
                    if "action" not in body:
                        raise BadRequest(422, "a step needs 'action'")
                    t = body.get("timeout_s")
                    if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool) or t <= 0):
                        raise BadRequest(422, "timeout_s must be a number > 0")
                    return self._send(200, svc.step(Session(), body["action"], t))
                raise BadRequest(404 if path not in ("/reset", "/step", "/mcp", "/health", "/ws", "/metadata", "/schema", "/state")
                                 else 405, f"no route {method} {path}")
            except BadRequest as e:
                if e.status in (411, 413, 415, 401):
                    self.close_connection = True
                return self._send(e.status, {"detail": e.detail})
            except Exception as e:  # noqa: BLE001 - the server stays up; the caller gets one line
                return self._send(500, {"detail": f"internal error: {type(e).__name__}: {' '.join(str(e).split())[:300]}"})

        def do_GET(self):
            self._route("GET")

        def do_POST(self):
            self._route("POST")

        def do_PUT(self):
            self._route("PUT")

        def do_DELETE(self):
            self._route("DELETE")

        # ---- WebSocket sessions
        def _websocket(self) -> None:
            key = self.headers.get("Sec-WebSocket-Key")
            if (self.headers.get("Upgrade", "").lower() != "websocket" or not key
                    or self.headers.get("Sec-WebSocket-Version") != "13"):
                raise BadRequest(400, "GET /ws needs a WebSocket upgrade (version 13)")
            accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept)
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            self.connection.setblocking(False)  # take what the HTTP reader already buffered past the headers
            try:
                leftover = self.rfile.read1(1 << 16) or b""
            except (BlockingIOError, OSError):
                leftover = b""
            self.connection.settimeout(60.0)  # a frame that stalls half-sent ends the session
            ws = _WS(self.connection, self.wfile, cap, leftover)
            with svc.lock:
                full = svc.sessions >= job.max_sessions
                if not full:
                    svc.sessions += 1
            if full:
                ws.send_json(_ws_error(f"server at capacity ({job.max_sessions} sessions)", "CAPACITY_REACHED",
                                       active_sessions=job.max_sessions, max_sessions=job.max_sessions))
                ws.close(1013, "capacity")
                return
            inbox: queue.Queue = queue.Queue()
            session = Session()
            worker = threading.Thread(target=self._ws_worker, args=(ws, inbox, session), daemon=True)
            worker.start()
            try:
                while True:
                    if not ws.wait_frame(job.session_idle_s):  # OpenEnv clients ping every 20 s by default
                        if session.busy or not inbox.empty():
                            continue  # a request is being judged: idle means nothing in flight
                        ws.close(1001, "idle")
                        break
                    try:
                        op, data = ws.recv()
                    except OverflowError as e:
                        ws.send_json(_ws_error(str(e), "VALIDATION_ERROR"))
                        ws.close(1009, "too big")
                        break
                    if op == 0x8:
                        ws.close(1000)
                        break
                    if op == 0x9:
                        ws.send(0xA, data)
                        continue
                    if op == 0xA:
                        continue
                    inbox.put(data)
            except (EOFError, ConnectionError, OSError):
                pass
            finally:
                inbox.put(None)
                worker.join(1)
                with svc.lock:
                    svc.sessions -= 1

        def _ws_worker(self, ws: _WS, inbox: queue.Queue, session: Session) -> None:
            while True:
                raw = inbox.get()
                if raw is None:
                    return
                session.busy = True
                try:
                    self._ws_handle(ws, session, raw)
                except OSError:
                    return
                finally:
                    session.busy = False

        def _ws_handle(self, ws: _WS, session: Session, raw: bytes) -> None:
            """One client message -> one answer frame (OpenEnv's message types and error codes)."""
            try:
                msg = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
                ws.send_json(_ws_error(f"Invalid JSON: {type(e).__name__}", "INVALID_JSON"))
                return
            kind = msg.get("type") if isinstance(msg, dict) else None
            data = msg.get("data", {}) if isinstance(msg, dict) else None
            try:
                if kind == "reset":
                    ws.send_json({"type": "observation", "data": svc.reset(session, data or {})})
                elif kind == "step":
                    ws.send_json({"type": "observation", "data": svc.step(session, data)})
                elif kind == "state":
                    ws.send_json({"type": "state", "data": session.state()})
                elif kind == "close":
                    ws.close(1000)
                elif kind == "mcp":
                    ws.send_json({"type": "mcp", "data": svc.mcp(data or {}, session)})
                else:
                    ws.send_json(_ws_error(f"Unknown message type: {kind}", "UNKNOWN_TYPE"))
            except BadRequest as e:
                code = "VALIDATION_ERROR" if e.status < 500 and e.status != 503 else (
                    "CAPACITY_REACHED" if e.status == 503 else "EXECUTION_ERROR")
                ws.send_json(_ws_error(e.detail, code, status=e.status))
            except OSError:
                raise
            except Exception as e:  # noqa: BLE001 - the session goes on; the client gets one line
                ws.send_json(_ws_error(f"{type(e).__name__}: {e}", "EXECUTION_ERROR"))

    return _Server((job.host, job.port), Handler)


def serve(job: ServeJob, ready: threading.Event | None = None) -> None:
    svc = KernelService(job)
    httpd = make_server(svc)
    host, port = httpd.server_address[:2]
    print(f"kernel environment (OpenEnv) at http://{host}:{port} (ws://{host}:{port}/ws): {job.slots} slot(s), "
          f"queue {job.queue}, deadline {job.deadline_s:g} s, backend {job.backend}"
          + (", token required" if job.token else ""), flush=True)
    if ready is not None:
        ready.set()
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        svc.close()


# ----------------------------------------------------------------------------- CLI (hooked into kernels/cli.py)

@dataclasses.dataclass
class DatasetJob:
    source: str = ""  # synth output dir, a directory of problem files, or a .jsonl with code
    out: str = "runs/kernels/dataset.jsonl"
    backend: str = "cpu"
    format: str = "chat"  # chat (TRL conversational prompt) | text

    def validate(self) -> None:
        if not self.source:
            raise ShiftkitError("kernels dataset needs source=DIR|FILE (synth output, problem directory or .jsonl)")
        if self.format not in ("chat", "text"):
            raise ShiftkitError(f"kernels dataset: format must be chat or text, got {self.format!r}")


def register_cli(ksub) -> None:
    """``kernels serve`` and ``kernels dataset``, called from ``kernels/cli.py``'s ``register`` (the grammar
    comes from the leaf :mod:`shiftkit.cliargs`)."""
    from shiftkit.cliargs import add_config_args, config_from_args

    def cmd_serve(args) -> dict:
        serve(config_from_args(ServeJob, args))
        return {}

    def cmd_dataset(args) -> dict:
        from shiftkit.kernels.reward_fn import build_dataset

        pos = getattr(args, "source_pos", None)
        if pos and "=" in pos:
            args.overrides = [pos, *(args.overrides or [])]
            pos = None
        job = config_from_args(DatasetJob, args, base={"source": pos} if pos else None)
        job.validate()
        r = build_dataset(job.source, job.out, job.backend, job.format == "chat")
        if not args.json:
            print(f"wrote {r['rows']} rows to {r['out']}")
        return r

    p = ksub.add_parser("serve", help="serve the environment over HTTP/WebSocket (OpenEnv contract)")
    add_config_args(p, {"--host": "host", "--port": "port", "--slots": "slots", "--token": "token",
                        "--backend": "backend"}, config="shiftkit.kernels.service:ServeJob",
                    backend={"choices": ["cpu", "cuda"]})
    p.set_defaults(func=cmd_serve)
    p = ksub.add_parser("dataset", help="RL rows (prompt, problem column) from a generated or KernelBench problem set")
    p.add_argument("source_pos", nargs="?", metavar="SOURCE", default=None, help="alias of source=...")
    add_config_args(p, {"--out": "out", "--backend": "backend", "--format": "format"},
                    config="shiftkit.kernels.service:DatasetJob")
    p.set_defaults(func=cmd_dataset)


__all__ = ["ServeJob", "KernelService", "make_server", "serve", "register_cli", "CLIENT_FIELDS"]
