"""A minimal OpenAI-compatible chat server for a local HF model (stdlib ``http.server``).

    shiftkit agent serve --model runs/agent/toy_rl/warm --port 8011
    curl -s 127.0.0.1:8011/v1/chat/completions -H 'Content-Type: application/json' \\
         -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}'

``POST /v1/chat/completions`` renders the messages (the tokenizer's chat template, else our plain
template, with the tool list when given), generates with the KV-cache sampler (greedy at temperature
0, seeded sampling otherwise), parses ``<tool_call>`` blocks into OpenAI ``tool_calls`` and reports
token usage. ``GET /v1/models`` lists the one model. It exists so the HTTP client is tested against a
real model and so small policies can be served to ``agent run``/``agent bench``; at scale use vLLM or
SGLang (same protocol). Requests are generated one at a time (one model, one lock).

It is :class:`shiftkit.serve.JSONServer`, hardened like ``shiftkit serve``: JSON bodies only, no
cross-origin requests, a token on every route beyond loopback, caps on the body, ``max_tokens`` and
the rendered prompt's length, a whole-request deadline and a bounded worker pool; a field the server
does not honour is an error naming it.
"""

from __future__ import annotations

import time
import uuid

from shiftkit.agent.chat import parse_tool_calls, render_prompt
from shiftkit.agent.clients import generate_chat
from shiftkit.serve import (JSONServer, Limits, RequestError, check_fields, check_prompt_ids, float_field, int_field,
                            model_context)

CHAT_FIELDS = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "seed", "tools", "user"}
CHAT_NEUTRAL = {"stream": (False, None), "n": (1, None), "top_p": (1, 1.0, None), "stop": (None, []),
                "tool_choice": (None, "auto"), "presence_penalty": (0, 0.0, None), "frequency_penalty": (0, 0.0, None),
                "parallel_tool_calls": (None, True), "logprobs": (None, False)}
ROLES = ("system", "user", "assistant", "tool")


def _check_messages(msgs) -> None:
    if not isinstance(msgs, list) or not msgs:
        raise RequestError(400, "messages must be a non-empty list")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(400, f"messages[{i}] needs a role in {', '.join(ROLES)}")
        if not isinstance(m.get("content"), (str, type(None))):
            raise RequestError(400, f"messages[{i}].content must be a string or null")


class ChatServer(JSONServer):
    def __init__(self, model, tokenizer, name: str = "local", host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, limits: Limits | None = None):
        super().__init__(host, port, "chat-server", token, limits)
        self.model, self.tok, self.name = model, tokenizer, name
        self.routes = {("GET", "/v1/models"): self.models, ("POST", "/v1/chat/completions"): self.chat}

    def models(self, _body: dict) -> tuple[int, dict]:
        return 200, {"object": "list", "data": [{"id": self.name, "object": "model"}]}

    def chat(self, req: dict) -> tuple[int, dict]:
        lim = self.limits
        check_fields(req, CHAT_FIELDS, CHAT_NEUTRAL, "chat/completions")
        msgs, tools = req.get("messages"), req.get("tools")
        _check_messages(msgs)
        if tools is not None and not isinstance(tools, list):
            raise RequestError(400, "tools must be a list")
        key = "max_completion_tokens" if req.get("max_completion_tokens") is not None else "max_tokens"
        max_tokens = int_field(req, key, 256, 1, lim.max_new_tokens, "max_new_tokens")
        temperature = float_field(req, "temperature", 0.0, 0.0, 1e4)
        seed = int_field(req, "seed", 0, 0, 2**62)
        prompt = render_prompt(self.tok, msgs, tools or None)
        ids = self.tok(prompt, add_special_tokens=False)["input_ids"]
        check_prompt_ids(ids, self.model.get_input_embeddings().weight.shape[0], lim, max_tokens,
                         model_context(self.model))
        with self.lock:
            text, n_p, n_c, fin = generate_chat(self.model, self.tok, msgs, tools, max_tokens, temperature, seed)
        content, calls, _errors = parse_tool_calls(text) if tools else (text, [], [])
        msg = {"role": "assistant", "content": content if not calls else (content or None)}
        if calls:
            msg["tool_calls"] = calls
            fin = "tool_calls"
        return 200, {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "created": int(time.time()),
                     "model": self.name, "choices": [{"index": 0, "message": msg, "finish_reason": fin}],
                     "usage": {"prompt_tokens": n_p, "completion_tokens": n_c, "total_tokens": n_p + n_c}}


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8011, limits: Limits | None = None) -> None:
    from shiftkit.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(model_dir)
    s = ChatServer(model, tok, name=model_dir, host=host, port=port, limits=limits)
    s.serve_forever(f"serving {model_dir} at {s.url} (Ctrl-C to stop)")
