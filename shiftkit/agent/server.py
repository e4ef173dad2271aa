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

import time
import uuid

from shiftkit.agent.chat import parse_tool_calls
from shiftkit.agent.clients import generate_chat
from shiftkit.serve import JSONServer


class ChatServer(JSONServer):
    def __init__(self, model, tokenizer, name: str = "local", host: str = "127.0.0.1", port: int = 0):
        super().__init__(host, port, "chat-server")
        self.model, self.tok, self.name = model, tokenizer, name
        self.routes = {("GET", "/v1/models"): self.models, ("POST", "/v1/chat/completions"): self.chat}

    def models(self, _body: dict) -> tuple[int, dict]:
        return 200, {"object": "list", "data": [{"id": self.name, "object": "model"}]}

    def chat(self, req: dict) -> tuple[int, dict]:
        msgs = req["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("messages must be a non-empty list")
        with self.lock:
            text, n_p, n_c, fin = generate_chat(self.model, self.tok, msgs, req.get("tools"),
                                                int(req.get("max_tokens") or 256), float(req.get("temperature") or 0.0),
                                                int(req.get("seed") or 0))
        content, calls, _errors = parse_tool_calls(text) if req.get("tools") else (text, [], [])
        msg = {"role": "assistant", "content": content if not calls else (content or None)}
        if calls:
            msg["tool_calls"] = calls
            fin = "tool_calls"
        return 200, {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "created": int(time.time()),
                     "model": self.name, "choices": [{"index": 0, "message": msg, "finish_reason": fin}],
                     "usage": {"prompt_tokens": n_p, "completion_tokens": n_c, "total_tokens": n_p + n_c}}


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8011) -> None:
    from shiftkit.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(model_dir)
    s = ChatServer(model, tok, name=model_dir, host=host, port=port)
    s.serve_forever(f"serving {model_dir} at {s.url} (Ctrl-C to stop)")
