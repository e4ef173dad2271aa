"""Model clients: one ``chat(messages, tools, max_tokens) -> AssistantTurn`` interface.

- :class:`OpenAIClient`: any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, a hosted
  API, or ``shiftkit agent serve``) by base URL, over stdlib ``urllib``; native ``tool_calls`` and
  text ``<tool_call>`` blocks are both understood.
- :class:`HFClient`: an in-process HF causal LM (KV-cache sampler from :mod:`shiftkit.sampling`).
- :class:`ScriptedClient`: deterministic assistant messages from a script (tests, the demo, replay).

Transport failures raise :class:`ModelError`; the episode records them as outcome ``model_error``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from shiftkit.agent.chat import parse_tool_calls, render_prompt
from shiftkit.errors import ShiftkitError
from shiftkit.remote import post_json


class ModelError(Exception):
    """The model endpoint could not produce a turn (unreachable, HTTP error, bad response)."""


@dataclass
class AssistantTurn:
    message: dict  # {"role": "assistant", "content": str, "tool_calls": [...]}
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    parse_errors: list[str] = field(default_factory=list)
    latency_s: float = 0.0


class ModelClient(Protocol):
    name: str

    def chat(self, messages: list[dict], tools: list[dict], max_tokens: int) -> AssistantTurn: ...


def _assistant(content: str, calls: list[dict]) -> dict:
    m = {"role": "assistant", "content": content}
    if calls:
        m["tool_calls"] = calls
    return m


class OpenAIClient:
    def __init__(self, base_url: str, model: str = "default", api_key: str | None = None, timeout_s: float = 600.0,
                 temperature: float = 0.0, seed: int | None = None, native_tools: bool = True):
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model, self.api_key, self.timeout_s = model, api_key, timeout_s
        self.temperature, self.seed, self.native_tools = temperature, seed, native_tools
        self.name = f"openai:{self.base_url}:{model}"

    def _post(self, path: str, body: dict) -> dict:
        try:
            return post_json(self.base_url + path, body, self.timeout_s,
                             {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None)
        except ShiftkitError as e:  # the episode records transport failures as model_error
            raise ModelError(str(e)) from None

    def chat(self, messages: list[dict], tools: list[dict], max_tokens: int) -> AssistantTurn:
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": self.temperature}
        if self.seed is not None:
            body["seed"] = self.seed
        if tools and self.native_tools:
            body["tools"] = tools
        t0 = time.perf_counter()
        d = self._post("/chat/completions", body)
        try:
            choice = d["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"malformed chat completion response: {json.dumps(d)[:300]}") from None
        content = msg.get("content") or ""
        calls = [c for c in (msg.get("tool_calls") or []) if isinstance(c, dict)]
        errors: list[str] = []
        if not calls and "<tool_call>" in content:  # a server without a tool parser
            content, calls, errors = parse_tool_calls(content)
        u = d.get("usage") or {}
        return AssistantTurn(_assistant(content, calls), int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)),
                             choice.get("finish_reason") or "stop", errors, time.perf_counter() - t0)


def generate_chat(model, tokenizer, messages: list[dict], tools: list[dict] | None, max_tokens: int,
                  temperature: float = 0.0, seed: int = 0) -> tuple[str, int, int, str]:
    """Render, sample with the KV-cache sampler, decode: ``(text, prompt_tokens, completion_tokens, finish_reason)``."""
    from shiftkit.sampling import sample

    prompt = render_prompt(tokenizer, messages, tools)
    n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    roll = sample(model, tokenizer, [prompt], max_new_tokens=max(1, max_tokens), temperature=max(temperature, 1e-6),
                  greedy=temperature <= 0, seed=seed)
    n = int(roll.completion_mask_BT[0].sum())
    return roll.texts[0], n_prompt, n, "stop" if bool(roll.eos_B[0]) else "length"


class HFClient:
    def __init__(self, model, tokenizer, temperature: float = 0.0, seed: int = 0, name: str = "hf"):
        self.model, self.tokenizer, self.temperature, self.seed = model, tokenizer, temperature, seed
        self.name = name
        self._calls = 0

    @classmethod
    def from_pretrained(cls, path: str, **kw) -> "HFClient":
        from shiftkit.models import load_model_and_tokenizer

        model, tok = load_model_and_tokenizer(path)
        return cls(model, tok, name=f"hf:{path}", **kw)

    def chat(self, messages: list[dict], tools: list[dict], max_tokens: int) -> AssistantTurn:
        t0 = time.perf_counter()
        self._calls += 1
        text, n_p, n_c, fin = generate_chat(self.model, self.tokenizer, messages, tools, max_tokens, self.temperature,
                                            self.seed * 1_000_003 + self._calls)
        content, calls, errors = parse_tool_calls(text)
        return AssistantTurn(_assistant(content, calls), n_p, n_c, fin, errors, time.perf_counter() - t0)


Step = dict | Callable[[list[dict]], dict]


class ScriptedClient:
    """Returns scripted assistant messages: each step is a message dict or a function of the conversation
    so far (so a script can react to an observation). After the script ends it repeats ``fallback``."""

    def __init__(self, steps: list[Step], name: str = "scripted", fallback: dict | None = None):
        self.steps, self.name, self.fallback = list(steps), name, fallback
        self.i = 0

    def chat(self, messages: list[dict], tools: list[dict], max_tokens: int) -> AssistantTurn:
        if self.i < len(self.steps):
            s = self.steps[self.i]
            self.i += 1
            msg = s(messages) if callable(s) else s
        elif self.fallback is not None:
            msg = self.fallback
        else:
            raise ModelError("scripted policy has no more steps")
        msg = {"role": "assistant", "content": msg.get("content", ""), **({"tool_calls": msg["tool_calls"]} if msg.get("tool_calls") else {})}
        text = (msg.get("content") or "") + json.dumps(msg.get("tool_calls", []))
        return AssistantTurn(msg, 0, max(1, len(text) // 4))


def call(name: str, **arguments) -> dict:
    """A tool call in OpenAI format (for scripts)."""
    from shiftkit.agent.chat import new_call_id

    return {"id": new_call_id(), "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def say(content: str = "", *calls: dict) -> dict:
    return _assistant(content, list(calls))
