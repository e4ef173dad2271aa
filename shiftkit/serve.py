"""``shiftkit serve``: an OpenAI-compatible completions server for rollouts (stdlib ``http.server``).

    shiftkit serve --model runs/rl/final --port 8000
    curl -s 127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\
         -d '{"prompt": [5, 6, 7], "max_tokens": 8, "seed": 3, "logprobs": 0, "return_token_ids": true}'

Routes (the request and response shapes of vLLM's ``vllm serve`` and SGLang, so
:class:`shiftkit.remote.RolloutClient` talks to any of the three):

* ``POST /v1/completions``: ``prompt`` is a string, token ids, or a list of either; ``n``, ``max_tokens``
  (default 16), ``temperature`` (default 1.0; 0 = greedy), ``top_p``, ``seed``, ``logprobs`` (0: the
  sampled tokens' log-probs; top log-probs are not computed, so > 0 is refused) and ``return_token_ids``
  (vLLM's field: each choice gets ``token_ids`` and ``prompt_token_ids``). Sampling is
  :func:`shiftkit.sampling.sample` with row seeds ``seed + j`` for sample ``j`` of a prompt, so a request
  with seed ``s`` gives the tokens of a local ``sample(..., row_seeds=[s])``; the log-probs are of the
  sampling distribution (temperature and top-p applied; vLLM's ``--logprobs-mode processed_logprobs``).
  ``finish_reason`` is ``stop`` at EOS, ``length`` at ``max_tokens``. A field the server does not honour
  is an error naming it, unless it holds its neutral value (``top_k: 0``, ``repetition_penalty: 1``, ...).
* Weight routes (a token always; the new weights must be a ``save_pretrained`` directory with the same
  architecture *and the same tokenizer*, else 400 and the old weights keep serving):

  - ``POST /update_weights_from_disk {"model_path": DIR}``: SGLang's route (``{"success": true, ...}``);
  - ``POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": DIR}}``: the route
    of vLLM's dev-mode server (``VLLM_SERVER_DEV_MODE=1``; ``{"results": [null]}``), with
    ``POST /reset_prefix_cache`` (``{"success": true}``; there is no prefix cache here).

* ``GET /v1/models``, ``GET /health`` (``{"status": "ok", "weights": DIR, "weight_version": N}``).

Safe to run (:class:`JSONServer`, shared with ``shiftkit agent serve``):

* a token (``SHIFTKIT_SERVE_TOKEN``, else generated and printed at start) is required as
  ``Authorization: Bearer <token>`` on every route when the server is bound beyond loopback, and on the
  weight routes always;
* POST bodies must be ``application/json``; a request with an ``Origin`` header (any web page) is
  refused, and on loopback so is a ``Host`` that is not a loopback name (DNS rebinding);
* caps on the body (``max_body_bytes``), ``max_tokens``, ``n``, prompt length and rows per request;
* a request must arrive whole within ``timeout`` seconds (headers and body, however slowly it trickles),
  and at most ``workers`` connections are served at once (the others wait in the listen backlog);
* every refusal is a 4xx with a one-line JSON ``{"error": {"message": ...}}``, and the server keeps serving.

Requests are generated one at a time (one model, one lock). It exists so the remote-rollout path is
tested against a real server in a separate process and so tiny policies can be served; at scale use
vLLM or SGLang.
"""

from __future__ import annotations

import dataclasses
import hmac
import io
import ipaddress
import json
import math
import os
import secrets
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from shiftkit.errors import ShiftkitError
from shiftkit.dist import set_threads
from shiftkit.models import load_model, load_model_and_tokenizer, load_tokenizer
from shiftkit.sampling import sample

Route = Callable[[dict], tuple[int, dict]]
TOKEN_ENV = "SHIFTKIT_SERVE_TOKEN"  # the token a server requires and a client sends (Authorization: Bearer)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class RequestError(Exception):
    """A refusal with an HTTP status: raised by a route, answered as ``{"error": {"message": ...}}``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask of a server (each cap is a 4xx, checked before any work)."""

    max_body_bytes: int = 1 << 20  # request body size
    max_new_tokens: int = 4096  # a request's max_tokens
    max_n: int = 64  # samples per prompt
    max_prompt_tokens: int = 8192  # tokens of one prompt
    max_rows: int = 256  # prompts x n in one request
    timeout: float = 30.0  # seconds for a request to arrive whole (headers + body); also the send timeout
    workers: int = 8  # connections handled at once; more wait in the listen backlog

    def check(self) -> None:
        for f in dataclasses.fields(self):
            if not getattr(self, f.name) > 0:
                raise ShiftkitError(f"serve: {f.name} must be > 0, got {getattr(self, f.name)!r}")


def one_line(text: str, limit: int = 400) -> str:
    return " ".join(str(text).split())[:limit]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` -> ``::1``, ``localhost:8000`` -> ``localhost``)."""
    h = host_header.strip().lower()
    if h.startswith("["):
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


class _DeadlineReader(io.RawIOBase):
    """A socket reader that fails once ``deadline`` (monotonic) has passed, however slowly bytes trickle in
    (a per-``recv`` timeout alone lets a client keep a worker forever by sending a byte at a time)."""

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self.sock.settimeout(left)
        return self.sock.recv_into(b)


class _Server(HTTPServer):
    """``HTTPServer`` with a bounded worker pool: the accept loop takes a connection only when a worker
    is free, so stalled clients can hold at most ``workers`` threads (and each for at most ``timeout``)."""

    request_queue_size = 256  # listen backlog: a rollout client opens many connections at once

    def __init__(self, addr, handler, workers: int, family):
        self.address_family = family
        self._slots = threading.Semaphore(workers)
        self._stopping = False
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="shiftkit-serve")
        super().__init__(addr, handler)

    def server_bind(self) -> None:  # HTTPServer's getfqdn() can block on DNS; the name is not used
        import socketserver

        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def process_request(self, request, client_address) -> None:
        while not self._slots.acquire(timeout=0.25):
            if self._stopping:
                self.shutdown_request(request)
                return
        try:
            self._pool.submit(self._work, request, client_address)
        except RuntimeError:  # the pool is shut down
            self._slots.release()
            self.shutdown_request(request)

    def _work(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - one connection's failure never stops the server
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        e = sys.exc_info()[1]
        print(f"serve: connection from {client_address[0]}: {type(e).__name__}: {one_line(e)}", file=sys.stderr)

    def server_close(self) -> None:
        self._stopping = True
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class JSONServer:
    """A JSON-over-HTTP server: ``routes[(method, path)](body) -> (status, response)``, hardened as the
    module docstring says. Subclasses fill ``self.routes``; paths in ``self.weight_routes`` always need
    the token. A route's ``ValueError``/``KeyError``/``TypeError`` is a 400 with its message,
    :class:`RequestError` its own status, anything else a one-line 500; the server keeps serving."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, name: str = "json-server",
                 token: str | None = None, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.limits.check()
        self.public = not is_loopback(host)
        self.token = token or os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)
        self.routes: dict[tuple[str, str], Route] = {}
        self.weight_routes: set[str] = set()
        self.lock = threading.Lock()
        self._name = name
        server = self
        lim = self.limits

        class Handler(BaseHTTPRequestHandler):
            timeout = lim.timeout  # socket timeout (the request itself has a whole-request deadline)
            server_version = "shiftkit-serve"
            sys_version = ""

            def setup(self):
                super().setup()
                self.rfile = io.BufferedReader(_DeadlineReader(self.connection, time.monotonic() + lim.timeout))

            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.connection.settimeout(lim.timeout)
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                if code >= 400:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, code: int, message: str) -> None:
                phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "Error"
                self._send(code, {"error": {"message": one_line(message), "type": phrase, "code": code}})

            def send_error(self, code, message=None, explain=None):  # the stdlib's own refusals, as JSON
                if code == 501:  # an unsupported method
                    code, message = 405, f"method {self.command} is not allowed"
                self._error(code, message or HTTPStatus(code).phrase)

            def _guard(self, method: str, path: str) -> None:
                """Every check that needs no body: Host, Origin, route, token, content type and length."""
                host = self.headers.get("Host")
                if not server.public and host is not None and not is_loopback(_host_name(host)):
                    raise RequestError(403, f"Host {host!r} is not a loopback name; this server only answers "
                                            "requests addressed to 127.0.0.1, localhost or ::1")
                if self.headers.get("Origin") is not None:
                    raise RequestError(403, f"cross-origin requests are refused (Origin: "
                                            f"{self.headers.get('Origin')!r}); call the API from a program")
                if (method, path) not in server.routes:
                    other = [m for (m, p) in server.routes if p == path]
                    if other:
                        raise RequestError(405, f"{path} takes {', '.join(other)}, not {method}")
                    raise RequestError(404, f"no route {method} {path}")
                if server.public or path in server.weight_routes:
                    got = self.headers.get("Authorization") or ""
                    scheme, _, value = got.partition(" ")
                    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                                             server.token.encode()):
                        raise RequestError(401, f"{method} {path} needs the server's token: send 'Authorization: "
                                                f"Bearer <token>' (printed at start; ${TOKEN_ENV})")
                if method != "POST":
                    return
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
                if ctype != "application/json":
                    raise RequestError(415, f"Content-Type must be application/json, got {ctype or 'none'!r}")
                if self.headers.get("Transfer-Encoding"):
                    raise RequestError(411, "send the body with a Content-Length (no Transfer-Encoding)")
                n = self.headers.get("Content-Length")
                if n is None:
                    raise RequestError(411, "a POST needs a Content-Length")
                if not n.strip().isdigit():
                    raise RequestError(400, f"bad Content-Length {n!r}")
                if int(n) > lim.max_body_bytes:
                    raise RequestError(413, f"the body is {int(n)} bytes; this server takes at most "
                                            f"{lim.max_body_bytes} (max_body_bytes)")

            def _dispatch(self, method: str) -> None:
                path = self.path.split("?")[0].rstrip("/") or "/"
                try:
                    self._guard(method, path)
                    body: dict = {}
                    if method == "POST":
                        n = int(self.headers["Content-Length"])
                        try:
                            raw = self.rfile.read(n)
                        except TimeoutError:
                            raise RequestError(408, f"the body did not arrive within {lim.timeout:g} s") from None
                        if len(raw) < n:
                            raise RequestError(400, f"the body ended after {len(raw)} of {n} bytes")
                        try:
                            body = json.loads(raw or b"{}")
                        except (ValueError, RecursionError) as e:
                            raise RequestError(400, f"the body is not JSON: {e}") from None
                        if not isinstance(body, dict):
                            raise RequestError(400, "the body must be a JSON object")
                    code, obj = server.routes[(method, path)](body)
                except RequestError as e:
                    return self._error(e.code, str(e))
                except (ValueError, KeyError, TypeError, OverflowError) as e:
                    return self._error(400, f"bad request: {e}")
                except Exception as e:  # noqa: BLE001 - a server bug is a one-line 500, not a dropped connection
                    return self._error(500, f"internal error: {type(e).__name__}: {e}")
                self._send(code, obj)

            def do_GET(self):
                self._dispatch("GET")

            def do_POST(self):
                self._dispatch("POST")

            def do_OPTIONS(self):  # CORS preflight: never granted
                self._error(403, "cross-origin requests are refused")

            def do_PUT(self):
                self._dispatch("PUT")

            def do_DELETE(self):
                self._dispatch("DELETE")

            def do_PATCH(self):
                self._dispatch("PATCH")

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self.httpd = _Server((host, port), Handler, lim.workers, family)
        except OSError as e:
            raise ShiftkitError(f"serve: cannot listen on {host}:{port}: {e.strerror or e}") from None
        self.port = self.httpd.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def start(self):
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name=self._name)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def banner(self) -> str:
        where = "every route" if self.public else "the weight routes"
        src = f"from ${TOKEN_ENV}" if os.environ.get(TOKEN_ENV) == self.token else "generated"
        return (f"token ({src}, required on {where}): {self.token}\n"
                f"  send it as 'Authorization: Bearer <token>'; a trainer reads it from ${TOKEN_ENV}")

    def serve_forever(self, banner: str) -> None:
        print(banner + "\n" + self.banner(), flush=True)
        try:
            self.httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self.httpd.server_close()


# ---- request fields ----

def int_field(req: dict, key: str, default: int, lo: int, hi: int, cap: str = "") -> int:
    """An integer field in ``[lo, hi]`` (JSON ``true`` is not an integer); ``cap`` names the server setting."""
    v = req.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise RequestError(400, f"{key} must be an integer, got {json.dumps(v)[:40]}")
    v = int(v)
    if not lo <= v <= hi:
        raise RequestError(400, f"{key}={v} is out of range [{lo}, {hi}]" + (f" (the server's {cap})" if cap else ""))
    return v


def float_field(req: dict, key: str, default: float, lo: float, hi: float, lo_open: bool = False) -> float:
    v = req.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RequestError(400, f"{key} must be a finite number, got {json.dumps(v)[:40]}")
    if v > hi or v < lo or (lo_open and v == lo):
        raise RequestError(400, f"{key}={v} is out of range {'(' if lo_open else '['}{lo}, {hi}]")
    return float(v)


def check_fields(req: dict, accepted: set[str], neutral: dict[str, tuple], where: str) -> None:
    """Unknown fields, and known ones the server would ignore at a non-neutral value, are errors."""
    for k, v in req.items():
        if k in accepted:
            continue
        if k in neutral:
            if v not in neutral[k]:
                raise RequestError(400, f"{where}: {k}={json.dumps(v)[:40]} is not supported (only "
                                        f"{' or '.join(json.dumps(x) for x in neutral[k])})")
            continue
        raise RequestError(400, f"{where}: unknown field {k!r} (accepted: {', '.join(sorted(accepted))})")


def check_prompt_ids(ids: list[int], vocab: int, lim: Limits, max_tokens: int, context: int | None) -> None:
    if not ids:
        raise RequestError(400, "a prompt is empty")
    if len(ids) > lim.max_prompt_tokens:
        raise RequestError(400, f"a prompt has {len(ids)} tokens; the server takes at most {lim.max_prompt_tokens} "
                                "(max_prompt_tokens)")
    if any(isinstance(t, bool) or not 0 <= t < vocab for t in ids):
        raise RequestError(400, f"prompt token ids must be in [0, {vocab})")
    if context is not None and len(ids) + max_tokens > context:
        raise RequestError(400, f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the model's "
                                f"context of {context} tokens")


def tokenizer_differences(served, new) -> list[str]:
    """How ``new`` differs from the ``served`` tokenizer: vocabulary entries, special tokens, chat template
    (a reload must keep every id's meaning; the method-level check with prompts is opd.preflight's)."""
    out = []
    a, b = served.get_vocab(), new.get_vocab()
    diff = sorted(t for t in set(a) | set(b) if a.get(t) != b.get(t))
    if diff:
        out.append(f"{len(diff)} vocabulary entries differ (e.g. {', '.join(repr(t) for t in diff[:3])})")
    for attr in ("eos_token", "pad_token", "bos_token", "unk_token"):
        if (getattr(served, attr, None), getattr(served, attr + "_id", None)) != (getattr(new, attr, None),
                                                                                  getattr(new, attr + "_id", None)):
            out.append(f"{attr} differs")
    if getattr(served, "chat_template", None) != getattr(new, "chat_template", None):
        out.append("the chat template differs")
    return out


def model_context(model) -> int | None:
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def _as_prompts(prompt) -> list:
    """The request's ``prompt`` as a list of prompts (each a string or a list of token ids)."""
    is_ids = lambda p: isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p)  # noqa: E731
    if isinstance(prompt, str) or is_ids(prompt):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) or is_ids(p) for p in prompt):
        return prompt
    raise RequestError(400, "prompt must be a string, a non-empty list of token ids, or a list of those")


COMPLETION_FIELDS = {"model", "prompt", "n", "max_tokens", "temperature", "top_p", "seed", "logprobs",
                     "return_token_ids", "return_tokens_as_token_ids", "user"}
NEUTRAL = {"stream": (False, None), "echo": (False, None), "stop": (None, []), "suffix": (None, ""),
           "top_k": (0, -1, None), "min_p": (0, 0.0, None), "repetition_penalty": (1, 1.0, None),
           "presence_penalty": (0, 0.0, None), "frequency_penalty": (0, 0.0, None), "logit_bias": (None, {}),
           "best_of": (None, 1), "stop_token_ids": (None, []), "skip_special_tokens": (True, None)}


class CompletionServer(JSONServer):
    def __init__(self, model, tokenizer, name: str = "local", host: str = "127.0.0.1", port: int = 0,
                 weights: str = "", token: str | None = None, limits: Limits | None = None):
        super().__init__(host, port, "completion-server", token, limits)
        self.model, self.tok, self.name = model, tokenizer, name
        self.weights, self.weight_version = weights, 0
        self.routes = {("GET", "/health"): self.health, ("GET", "/v1/models"): self.models,
                       ("POST", "/v1/completions"): self.completions,
                       ("POST", "/update_weights_from_disk"): self.update_weights_from_disk,
                       ("POST", "/collective_rpc"): self.collective_rpc,
                       ("POST", "/reset_prefix_cache"): self.reset_prefix_cache}
        self.weight_routes = {"/update_weights_from_disk", "/collective_rpc", "/reset_prefix_cache"}

    def health(self, _body: dict) -> tuple[int, dict]:
        return 200, {"status": "ok", "model": self.name, "weights": self.weights, "weight_version": self.weight_version}

    def models(self, _body: dict) -> tuple[int, dict]:
        return 200, {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "shiftkit"}]}

    def completions(self, req: dict) -> tuple[int, dict]:

        lim = self.limits
        check_fields(req, COMPLETION_FIELDS, NEUTRAL, "completions")
        if req.get("model") is not None and req["model"] != self.name:
            raise RequestError(404, f"model {str(req['model'])[:80]!r} is not served here (serving {self.name!r})")
        n = int_field(req, "n", 1, 1, lim.max_n, "max_n")
        max_tokens = int_field(req, "max_tokens", 16, 1, lim.max_new_tokens, "max_new_tokens")
        temperature = float_field(req, "temperature", 1.0, 0.0, 1e4)
        top_p = float_field(req, "top_p", 1.0, 0.0, 1.0, lo_open=True)
        seed = int_field(req, "seed", uuid.uuid4().int % 2**62, 0, 2**62)
        logprobs = req.get("logprobs")
        if logprobs is not None and (isinstance(logprobs, bool) or logprobs != 0):
            raise RequestError(400, f"logprobs={json.dumps(logprobs)[:20]} is not supported: only 0 (the sampled "
                                    "tokens' log-probs) or null")
        prompts_in = _as_prompts(req.get("prompt"))
        if len(prompts_in) * n > lim.max_rows:
            raise RequestError(400, f"{len(prompts_in)} prompts x n={n} is more than {lim.max_rows} rows (max_rows)")
        for p in prompts_in:
            if isinstance(p, str) and len(p) > 16 * lim.max_prompt_tokens:
                raise RequestError(400, f"a prompt has {len(p)} characters (max_prompt_tokens={lim.max_prompt_tokens})")
        prompts = [list(p) if isinstance(p, list) else self.tok(p, add_special_tokens=False)["input_ids"]
                   for p in prompts_in]
        vocab, context = self.model.get_input_embeddings().weight.shape[0], model_context(self.model)
        for ids in prompts:
            check_prompt_ids(ids, vocab, lim, max_tokens, context)
        rows = [p for p in prompts for _ in range(n)]
        as_ids = bool(req.get("return_tokens_as_token_ids"))
        with self.lock:
            roll = sample(self.model, self.tok, prompt_ids=rows, max_new_tokens=max_tokens, temperature=max(temperature, 1e-6),
                          top_p=top_p, greedy=temperature == 0, row_seeds=[seed + j for _ in prompts for j in range(n)])
        choices = []
        for b, ids_p in enumerate(rows):
            keep = roll.completion_mask_BT[b].bool()
            ids = roll.completion_ids_BT[b][keep].tolist()
            c = {"index": b, "text": roll.texts[b], "logprobs": None,
                 "finish_reason": "stop" if bool(roll.eos_B[b]) else "length", "stop_reason": None}
            if logprobs is not None:
                c["logprobs"] = {"tokens": [f"token_id:{t}" if as_ids else self.tok.decode([t]) for t in ids],
                                 "token_logprobs": roll.logp_BT[b][keep].tolist(), "top_logprobs": None,
                                 "text_offset": None}
            if req.get("return_token_ids"):
                c.update(token_ids=ids, prompt_token_ids=list(ids_p))
            choices.append(c)
        n_p = sum(len(p) for p in rows)
        n_c = int(roll.completion_mask_BT.sum())
        return 200, {"id": "cmpl-" + uuid.uuid4().hex[:12], "object": "text_completion", "created": int(time.time()),
                     "model": self.name, "choices": choices,
                     "usage": {"prompt_tokens": n_p, "completion_tokens": n_c, "total_tokens": n_p + n_c}}

    def load_weights(self, path) -> str | None:
        """Swap in the weights of ``path`` (a ``save_pretrained`` directory); the reason it was refused, or None.

        The directory must hold a model of the served architecture and a tokenizer equal to the served
        one (vocabulary, special tokens, chat template): ids must keep their meaning across a reload."""

        if not isinstance(path, str) or not path:
            raise RequestError(400, "give the weights as a path to a save_pretrained directory")
        if not os.path.isabs(path):
            return f"{path} is not an absolute path"
        if not (Path(path) / "config.json").is_file():
            return f"{path} is not a model directory (no config.json)"
        p = next(self.model.parameters())
        try:
            new = load_model(path, dtype=p.dtype, device=p.device)
            new_tok = load_tokenizer(path)
        except ShiftkitError as e:
            return str(e)
        shapes = lambda sd: {k: tuple(v.shape) for k, v in sd.items()}  # noqa: E731
        if type(new) is not type(self.model) or shapes(self.model.state_dict()) != shapes(new.state_dict()):
            return f"{path} has another architecture than the served model"
        diffs = tokenizer_differences(self.tok, new_tok)
        if diffs:
            return f"the tokenizer at {path} is not the served one: {'; '.join(diffs)}"
        new.eval()
        with self.lock:  # in-flight requests finish on the old weights; later ones see the new
            self.model = new
            self.weights, self.weight_version = path, self.weight_version + 1
        return None

    def update_weights_from_disk(self, req: dict) -> tuple[int, dict]:
        """SGLang's route: ``{"model_path": DIR}`` -> ``{"success": bool, "message": str}``."""
        check_fields(req, {"model_path", "load_format", "flush_cache"}, {}, "update_weights_from_disk")
        if req.get("load_format") not in (None, "auto", "safetensors"):
            raise RequestError(400, f"load_format={req['load_format']!r} is not supported (auto or safetensors)")
        why = self.load_weights(req.get("model_path"))
        if why:
            return 400, {"success": False, "message": one_line(why)}
        return 200, {"success": True, "message": "Succeeded to update model weights.", "weight_version": self.weight_version}

    def collective_rpc(self, req: dict) -> tuple[int, dict]:
        """vLLM's dev-mode route, for the one method a rollout server needs:
        ``{"method": "reload_weights", "kwargs": {"weights_path": DIR}}`` -> ``{"results": [null]}``."""
        check_fields(req, {"method", "args", "kwargs", "timeout"}, {}, "collective_rpc")
        if req.get("method") != "reload_weights":
            raise RequestError(400, f"collective_rpc: method {str(req.get('method'))[:40]!r} is not supported "
                                    "(only reload_weights)")
        kw = req.get("kwargs") or {}
        if req.get("args") or not isinstance(kw, dict) or set(kw) - {"weights_path", "is_checkpoint_format"}:
            raise RequestError(400, "collective_rpc reload_weights takes kwargs weights_path (and is_checkpoint_format)")
        if kw.get("is_checkpoint_format", True) is not True:
            raise RequestError(400, "reload_weights: only checkpoint-format weights (is_checkpoint_format=true)")
        why = self.load_weights(kw.get("weights_path"))
        if why:
            raise RequestError(400, f"reload_weights: {why}")
        return 200, {"results": [None]}

    def reset_prefix_cache(self, _req: dict) -> tuple[int, dict]:
        return 200, {"success": True}  # vLLM >= 0.26's answer; this server keeps no prefix cache


@dataclasses.dataclass
class ServeConfig:
    model: str = ""  # HF model directory (save_pretrained) or cached hub id to serve
    host: str = "127.0.0.1"  # bind address; beyond loopback every route needs the token
    port: int = 8000  # TCP port (0 = any free port; the banner says which)
    name: str = ""  # the served model name ("" = the model path)
    threads: int = 1  # torch threads (0 = torch's default)
    max_new_tokens: int = Limits.max_new_tokens  # cap on a request's max_tokens
    max_n: int = Limits.max_n  # cap on a request's n
    max_prompt_tokens: int = Limits.max_prompt_tokens  # cap on the tokens of one prompt
    max_rows: int = Limits.max_rows  # cap on prompts x n per request
    max_body_bytes: int = Limits.max_body_bytes  # cap on a request body
    timeout: float = Limits.timeout  # seconds for a request to arrive whole (slow or stalled clients are dropped)
    workers: int = Limits.workers  # connections handled at once

    def limits(self) -> Limits:
        return Limits(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Limits)})

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("serve needs model=<HF model dir> (or --model DIR)")
        self.limits().check()


def serve(cfg: ServeConfig) -> None:

    set_threads(cfg.threads)
    model, tok = load_model_and_tokenizer(cfg.model)
    model.eval()
    s = CompletionServer(model, tok, name=cfg.name or cfg.model, host=cfg.host, port=cfg.port,
                         weights=str(Path(cfg.model).resolve()) if Path(cfg.model).exists() else cfg.model,
                         limits=cfg.limits())
    s.serve_forever(f"serving {cfg.model} at {s.url} (completions; Ctrl-C to stop)")
