"""A math-answer checker for real models and real data (GSM8K-style), built on ``math-verify``.

``extract_answer`` finds the final answer in a completion: ``\\boxed{...}``, ``Answer: X``,
``#### X`` (GSM8K), in that order of preference, else the last number. ``math_reward`` compares it
with the gold answer using ``math_verify.verify`` (symbolic equality: ``0.5 == \\frac{1}{2}``).
"""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\boxed\{")
_ANSWER = re.compile(r"(?:final\s+)?answer\s*(?:is)?\s*[:=]?\s*\$?([^\n$]+)", re.IGNORECASE)
_HASH = re.compile(r"####\s*([^\n]+)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    i = starts[-1]
    depth, j = 1, i
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return text[i : j - 1].strip() if depth == 0 else None


def extract_answer(text: str) -> str | None:
    """The final answer string of a completion, or None."""
    if (b := _last_boxed(text)) is not None:
        return b
    m = list(_ANSWER.finditer(text))
    if m:
        return m[-1].group(1).strip().rstrip(".").strip()
    m = list(_HASH.finditer(text))
    if m:
        return m[-1].group(1).strip()
    nums = _NUMBER.findall(text)
    return nums[-1] if nums else None


def math_reward(completion: str, gold: str) -> float:
    """1.0 if the completion's final answer equals ``gold`` (symbolically), else 0.0."""
    from math_verify import parse, verify

    ans = extract_answer(completion)
    if ans is None:
        return 0.0
    ans = ans.replace(",", "") if re.fullmatch(r"-?[\d,]+(\.\d+)?", ans) else ans
    gold = str(gold).replace(",", "") if re.fullmatch(r"-?[\d,]+(\.\d+)?", str(gold)) else str(gold)
    try:
        g = parse(f"${gold}$")
        a = parse(f"${ans}$")
        return 1.0 if g and a and verify(g, a) else 0.0
    except Exception:  # noqa: BLE001 - unparsable answers are simply wrong
        return 0.0
