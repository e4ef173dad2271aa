"""A math-answer checker for real models and real data (GSM8K-style), built on ``math-verify``.

``extract_answer`` finds the final answer in a completion: ``\\boxed{...}``, ``Answer: X``,
``#### X`` (GSM8K), in that order of preference, else the last number. ``math_reward`` compares it
with the gold answer: plain numbers exactly (as fractions), anything else with
``math_verify.verify`` (symbolic equality: ``0.5 == \\frac{1}{2}``).

Before comparing, both sides are cleaned the way a grader reading the answer would: markdown
emphasis (``**26**``), ``$``/``\\$`` signs, ``\\text{...}`` units, a trailing unit word
(``15 dollars``, ``2,300 sheets``, ``50%``), a leading ``x =`` and thousands separators. A comma
counts as a thousands separator only in groups of three digits (``2,300``), so ``2,300`` is
2300, never 2.3 or 23.00. A gold answer holding a whole GSM8K solution is cut at its ``####``.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER = re.compile(r"\b(?:final\s+)?answer\b\s*(?:is)?\s*[:=]?\s*([^\n]+)", re.IGNORECASE)
_HASH = re.compile(r"####\s*([^\n]+)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
# a plain number: optional sign, digits with optional 3-digit thousands groups, optional decimals or /denominator
_PLAIN = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?"
_LEADING_NUMBER = re.compile(rf"^({_PLAIN})(?![\d,./^_])\s*(.*)$", re.DOTALL)
_MARKERS = (_BOXED, re.compile(r"(?:final\s+)?answer\s*(?:is)?\s*[:=]", re.IGNORECASE), _HASH)


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
    m = [x.group(1).strip().rstrip(".").strip() for x in _ANSWER.finditer(text)]
    m = [x for x in m if x]
    if m:  # the last "Answer: ..." that states something checkable (prose like "my answer again" is skipped)
        stated = [x for x in m if re.search(r"[\d\\]", x)]
        return (stated or m)[-1]
    m = list(_HASH.finditer(text))
    if m:
        return m[-1].group(1).strip()
    nums = _NUMBER.findall(text)
    return nums[-1] if nums else None


def has_answer_marker(text: str) -> bool:
    """Whether the completion states its answer explicitly (``\\boxed{}``, ``Answer:`` or ``####``)."""
    return any(p.search(text) for p in _MARKERS)


def clean_answer(ans: str) -> str:
    """Strip what a human grader ignores: emphasis, currency, units, ``x =``, thousands separators.

    A number followed only by words (``15 dollars``, ``26 (twenty-six)``) is that number. Text that
    is not a plain number followed by words is returned with only the markup removed, for
    ``math_verify`` to read.
    """
    s = ans.strip().replace("\u2212", "-").replace("\u2013", "-")
    s = re.sub(r"\*\*|__|`", "", s).strip().strip("*")  # markdown emphasis / code (a lone * inside is a product)
    s = re.sub(r"\\\(|\\\)|\\\[|\\\]", "", s)  # \( \) \[ \]
    s = re.sub(r"\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}", r" \1 ", s)  # \text{ dollars} -> words
    s = re.sub(r"\\[,;!: ]", "", s)  # LaTeX spacing (\, \; \! \: "\ ")
    s = s.replace("\\$", "")  # an escaped dollar is currency
    m = re.fullmatch(r"([^$]*)\$([^$]+)\$([^$]*)", s)
    if m and not re.search(r"\d", m.group(1) + m.group(3)):  # "$\frac{3}{4}$ of a cup": the math part
        s = m.group(2)
    s = s.replace("$", "").replace("\\%", "%")
    s = re.sub(r"^[A-Za-z]\s*=\s*", "", s.strip())  # x = 5 -> 5
    s = s.strip().rstrip(".").strip()
    m = _LEADING_NUMBER.match(s)
    if m:
        rest = m.group(2).strip()
        # the rest is a unit or prose: no digits, no operators, does not start a list (",") or math
        if not rest or (not re.search(r"[\d=+*/^\\{}]", rest) and rest[0] not in ",;-("):
            return m.group(1).replace(",", "").replace(" ", "")
        if re.match(r"^[.!;]\s", rest + " ") and not re.search(r"\d", rest.split(None, 1)[0] if rest else ""):
            return m.group(1).replace(",", "").replace(" ", "")  # "15. Because ..." -> 15
    return s


def gold_answer(gold) -> str:
    """The answer part of a gold label: after a GSM8K ``####``, or inside a ``\\boxed{}``."""
    g = str(gold)
    if (m := list(_HASH.finditer(g))):
        g = m[-1].group(1)
    elif (b := _last_boxed(g)) is not None:
        g = b
    return clean_answer(g)


def _as_fraction(s: str) -> Fraction | None:
    if not re.fullmatch(r"-?\d+(?:\.\d+)?(?:/\d+)?", s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(ans: str, gold) -> bool:
    """Whether a cleaned answer string equals the gold answer (exactly for numbers, else symbolically)."""
    a, g = clean_answer(ans), gold_answer(gold)
    fa, fg = _as_fraction(a), _as_fraction(g)
    if fa is not None and fg is not None:
        return fa == fg
    from math_verify import parse, verify

    try:
        pg = parse(f"${g}$")
        pa = parse(f"${a}$")
        return bool(pg and pa and verify(pg, pa))
    except Exception:  # noqa: BLE001 - unparsable answers are simply wrong
        return False


def math_reward(completion: str, gold: str) -> float:
    """1.0 if the completion's final answer equals ``gold`` (symbolically), else 0.0."""
    ans = extract_answer(completion)
    if ans is None:
        return 0.0
    return 1.0 if answers_match(ans, gold) else 0.0
