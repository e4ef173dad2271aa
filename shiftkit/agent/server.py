"""A minimal OpenAI-compatible chat server for a local HF model (stdlib ``http.server``, loopback only).

    shiftkit agent serve --model runs/agent/toy_rl/warm --port 8011
    curl -s 127.0.0.1:8011/v1/chat/completions -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}'

``POST /v1/chat/completions`` renders the messages (the tokenizer's chat template, else our plain
template, with the tool list when given), generates with the KV-cache sampler (greedy at temperature
0, seeded sampling otherwise), parses ``<tool_call>`` blocks into OpenAI ``tool_calls`` and reports
token usage. ``GET /v1/models`` lists the one model. It exists so the HTTP client is tested against a
real model and so small policies can be served to ``agent run``/``agent bench``; at scale use vLLM or
SGLang (same protocol). Requests are served one at a time (one model, one lock).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from shiftkit.agent.chat import parse_tool_calls
from shiftkit.agent.clients import generate_chat
from shiftkit.errors import ShiftkitError


class ChatServer:
    def __init__(self, model, tokenizer, name: str = "local", host: str = "127.0.0.1", port: int = 0):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ShiftkitError(f"serve binds to loopback only, not {host!r}")
        self.model, self.tok, self.name = model, tokenizer, name
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                    msgs = req["messages"]
                    if not isinstance(msgs, list) or not msgs:
                        raise ValueError("messages must be a non-empty list")
                except (ValueError, KeyError, json.JSONDecodeError) as e:
                    return self._send(400, {"error": {"message": f"bad request: {e}"}})
                with server.lock:
                    text, n_p, n_c, fin = generate_chat(server.model, server.tok, msgs, req.get("tools"),
                                                        int(req.get("max_tokens") or 256), float(req.get("temperature") or 0.0),
                                                        int(req.get("seed") or 0))
                content, calls, _errors = parse_tool_calls(text) if req.get("tools") else (text, [], [])
                msg = {"role": "assistant", "content": content if not calls else (content or None)}
                if calls:
                    msg["tool_calls"] = calls
                    fin = "tool_calls"
                self._send(200, {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "created": int(time.time()),
                                 "model": server.name, "choices": [{"index": 0, "message": msg, "finish_reason": fin}],
                                 "usage": {"prompt_tokens": n_p, "completion_tokens": n_c, "total_tokens": n_p + n_c}})

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def start(self) -> "ChatServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="chat-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8011) -> None:
    from shiftkit.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(model_dir)
    s = ChatServer(model, tok, name=model_dir, host=host, port=port)
    print(f"serving {model_dir} at {s.url} (Ctrl-C to stop)", flush=True)
    try:
        s.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        s.httpd.server_close()
