"""Chat text formats: tool calls written as text, message rendering, and assistant-only token masks.

Models without native tool calling (our tiny HF models, raw-completion servers) write tool calls as
text in the Hermes/Qwen style, one call per block::

    <tool_call>{"name": "compile", "arguments": {}}</tool_call>

:func:`parse_tool_calls` turns such text into OpenAI ``tool_calls`` (and reports malformed blocks);
:func:`render_prompt` renders OpenAI-format messages for a tokenizer (its own ``chat_template`` when it
has one, else the plain template below); :func:`tokenize_chat` returns token ids and the mask of the
tokens the model generated (assistant turns), the only tokens any training loss here touches.
"""

from __future__ import annotations

import json
import re
import uuid

TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
ROLE_TAGS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}
END = "<|end|>"


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


def render_tool_call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def parse_tool_calls(text: str, id_fn=new_call_id) -> tuple[str, list[dict], list[str]]:
    """Pure (given ``id_fn``): ``(content without the blocks, OpenAI tool_calls, errors)``.

    A block that is not JSON, or lacks a string ``name``, is an error (reported, not dropped silently);
    an unterminated ``<tool_call>`` is an error too.
    """
    calls, errors = [], []
    for m in TOOL_CALL_RE.finditer(text):
        body = m.group(1).strip()
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            errors.append(f"tool call is not valid JSON ({e.msg} at char {e.pos}): {body[:120]!r}")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            errors.append(f"tool call needs a string 'name': {body[:120]!r}")
            continue
        args = obj.get("arguments", {})
        calls.append({"id": id_fn(), "type": "function",
                      "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}})
    content = TOOL_CALL_RE.sub("", text)
    if "<tool_call>" in content:
        errors.append("unterminated <tool_call> block")
    return content.strip(), calls, errors


def message_text(msg: dict) -> str:
    """The text an assistant message stands for (content + its tool calls as text blocks)."""
    parts = [msg.get("content") or ""]
    for c in msg.get("tool_calls") or []:
        f = c.get("function", {})
        try:
            args = json.loads(f.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = f.get("arguments")
        parts.append(render_tool_call(f.get("name", ""), args))
    return "\n".join(p for p in parts if p)


def tools_preamble(tools: list[dict] | None) -> str:
    if not tools:
        return ""
    lines = ["You can call these tools. Write each call as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>."]
    for t in tools:
        f = t["function"]
        lines.append(f"- {f['name']}({', '.join(f['parameters'].get('properties', {}))}): {f['description']}")
    return "\n".join(lines)


def render_plain(messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True) -> str:
    """Our plain template: ``<|role|>\\n text <|end|>\\n`` per message."""
    out = []
    pre = tools_preamble(tools)
    if pre:
        out.append(f"{ROLE_TAGS['system']}\n{pre}{END}\n")
    for m in messages:
        text = message_text(m) if m["role"] == "assistant" else (m.get("content") or "")
        out.append(f"{ROLE_TAGS.get(m['role'], '<|' + m['role'] + '|>')}\n{text}{END}\n")
    if add_generation_prompt:
        out.append(f"{ROLE_TAGS['assistant']}\n")
    return "".join(out)


def render_prompt(tokenizer, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt)
    return render_plain(messages, tools, add_generation_prompt)


def chat_segments(tokenizer, messages: list[dict], tools: list[dict] | None = None) -> list[tuple[str, bool]]:
    """Split the rendered conversation into ``(text, generated_by_model)`` segments by prefix rendering:
    an assistant message's segment is what its rendering adds after the generation prompt."""
    segs: list[tuple[str, bool]] = []
    prev = ""
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            with_prompt = render_prompt(tokenizer, messages[:i], tools, add_generation_prompt=True)
            full = render_prompt(tokenizer, messages[: i + 1], tools, add_generation_prompt=False)
            if not (with_prompt.startswith(prev) and full.startswith(with_prompt)):
                raise ValueError("chat template is not prefix-stable; cannot mask assistant tokens")
            segs.append((with_prompt[len(prev):], False))
            segs.append((full[len(with_prompt):], True))
            prev = full
        else:
            full = render_prompt(tokenizer, messages[: i + 1], tools, add_generation_prompt=False)
            if not full.startswith(prev):
                raise ValueError("chat template is not prefix-stable; cannot mask assistant tokens")
            segs.append((full[len(prev):], False))
            prev = full
    return [(t, a) for t, a in segs if t]


def tokenize_chat(tokenizer, messages: list[dict], tools: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """Token ids of the conversation and the mask of model-generated tokens (1) vs context, tool outputs
    and the harness's text (0). Segments are tokenized separately, so a BPE merge never spans a mask
    boundary; with our plain template the end of each assistant turn is followed by EOS (generated)."""
    ids: list[int] = []
    mask: list[int] = []
    plain = not getattr(tokenizer, "chat_template", None)
    for text, gen in chat_segments(tokenizer, messages, tools):
        if plain and gen and text.endswith(END + "\n"):
            text = text[: -len(END + "\n")]
            seg = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            tail = tokenizer(END + "\n", add_special_tokens=False)["input_ids"]
            ids += seg + tail
            mask += [1] * len(seg) + [0] * len(tail)
            continue
        seg = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += seg
        mask += [int(gen)] * len(seg)
    return ids, mask
