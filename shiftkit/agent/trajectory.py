"""Episode trajectories: JSONL events, their schema, validation and loading.

One file per episode, one event per line, in order::

    {"type": "header", ...}                      problem, backend, config, tool schemas, skill hash
    {"type": "message", "turn": t, "message": {...}, ...}   every chat message (system, user, assistant, tool)
    {"type": "tool_result", "turn": t, "call_id": ..., "name": ..., "kind": ..., "reward": ...}
    ...
    {"type": "end", "outcome": ..., "final_reward": ..., "rewards": [...], "counts": {...}, "timings": {...}}
                                                 final_reward None: unscorable (the environment could not judge it)

The schema is JSON Schema (draft-07 subset); :func:`validate` is a small dependency-free validator for
exactly the keywords used here (type, required, properties, additionalProperties, enum, items).
"""

from __future__ import annotations

import json
from pathlib import Path

VERSION = 1
OUTCOMES = ["finished", "max_turns", "max_tokens", "wall_time", "model_error", "harness_error"]
TOOL_KINDS = ["ok", "error", "malformed", "sandbox_violation", "read_only", "timeout", "unknown_tool"]

_MESSAGE = {
    "type": "object", "required": ["role"],
    "properties": {
        "role": {"enum": ["system", "user", "assistant", "tool"]},
        "content": {"type": ["string", "null"]},
        "tool_calls": {"type": "array", "items": {
            "type": "object", "required": ["id", "type", "function"],
            "properties": {"id": {"type": "string"}, "type": {"enum": ["function"]},
                           "function": {"type": "object", "required": ["name", "arguments"],
                                        "properties": {"name": {"type": "string"}, "arguments": {"type": ["string", "object"]}}}}}},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
    },
}
SCHEMAS = {
    "header": {"type": "object", "required": ["type", "version", "episode_id", "problem", "backend", "client", "config", "tools", "skill_sha"],
               "properties": {"version": {"enum": [VERSION]}, "episode_id": {"type": "string"},
                              "problem": {"type": "object", "required": ["name", "path", "hash"]},
                              "backend": {"type": "string"}, "client": {"type": "string"}, "config": {"type": "object"},
                              "tools": {"type": "array", "items": {"type": "object", "required": ["type", "function"]}},
                              "skill_sha": {"type": "string"}}},
    "message": {"type": "object", "required": ["type", "turn", "message", "t"],
                "properties": {"turn": {"type": "integer"}, "message": _MESSAGE, "t": {"type": "number"},
                               "usage": {"type": "object"}, "parse_errors": {"type": "array", "items": {"type": "string"}}}},
    "tool_result": {"type": "object", "required": ["type", "turn", "call_id", "name", "arguments", "ok", "kind", "seconds"],
                    "properties": {"turn": {"type": "integer"}, "call_id": {"type": "string"}, "name": {"type": "string"},
                                   "ok": {"type": "boolean"}, "kind": {"enum": TOOL_KINDS}, "seconds": {"type": "number"},
                                   "reward": {"type": ["number", "null"]}, "data": {"type": "object"}, "repeated": {"type": "boolean"}}},
    "end": {"type": "object", "required": ["type", "outcome", "final_reward", "rewards", "counts", "timings"],
            "properties": {"outcome": {"enum": OUTCOMES}, "final_reward": {"type": ["number", "null"]},
                           "final_eval": {"type": ["object", "null"]}, "error": {"type": ["string", "null"]},
                           "rewards": {"type": "array", "items": {"type": "object", "required": ["turn", "tool", "reward"]}},
                           "counts": {"type": "object", "required": ["turns", "tool_calls", "malformed", "sandbox_violations",
                                                                     "timeouts", "repeated_calls", "completion_tokens"]},
                           "timings": {"type": "object", "required": ["total_s", "model_s", "tools_s"]}}},
}

_TYPES = {"object": dict, "array": list, "string": str, "number": (int, float), "integer": int, "boolean": bool, "null": type(None)}


def validate(x, schema: dict, path: str = "$") -> list[str]:
    """Pure: the schema violations of ``x`` (empty when valid)."""
    errs = []
    if "enum" in schema and x not in schema["enum"]:
        return [f"{path}: {x!r} not in {schema['enum']}"]
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(isinstance(x, _TYPES[t]) and not (t in ("number", "integer") and isinstance(x, bool)) for t in types)
        if not ok:
            return [f"{path}: expected {'/'.join(types)}, got {type(x).__name__}"]
    if isinstance(x, dict):
        for k in schema.get("required", []):
            if k not in x:
                errs.append(f"{path}: missing {k!r}")
        for k, sub in schema.get("properties", {}).items():
            if k in x:
                errs += validate(x[k], sub, f"{path}.{k}")
        if schema.get("additionalProperties") is False:
            errs += [f"{path}: unexpected {k!r}" for k in x if k not in schema.get("properties", {})]
    if isinstance(x, list) and "items" in schema:
        for i, v in enumerate(x):
            errs += validate(v, schema["items"], f"{path}[{i}]")
    return errs


def validate_trajectory(events: list[dict]) -> list[str]:
    """Schema of every event plus the structure: header first, end last, tool messages answer calls."""
    errs = []
    if not events:
        return ["empty trajectory"]
    if events[0].get("type") != "header":
        errs.append("first event is not the header")
    if events[-1].get("type") != "end":
        errs.append("last event is not 'end'")
    open_calls: set[str] = set()
    for i, e in enumerate(events):
        t = e.get("type")
        if t not in SCHEMAS:
            errs.append(f"event {i}: unknown type {t!r}")
            continue
        errs += [f"event {i} ({t}): {m}" for m in validate(e, SCHEMAS[t])]
        if t == "message":
            m = e.get("message", {})
            for c in m.get("tool_calls") or []:
                open_calls.add(c.get("id"))
            if m.get("role") == "tool" and m.get("tool_call_id") not in open_calls:
                errs.append(f"event {i}: tool message answers unknown call {m.get('tool_call_id')!r}")
        if t == "tool_result" and e.get("call_id") not in open_calls:
            errs.append(f"event {i}: tool_result for unknown call {e.get('call_id')!r}")
    return errs


def load_trajectory(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def messages_of(events: list[dict]) -> list[dict]:
    return [e["message"] for e in events if e.get("type") == "message"]


def end_of(events: list[dict]) -> dict:
    return next((e for e in reversed(events) if e.get("type") == "end"), {})
