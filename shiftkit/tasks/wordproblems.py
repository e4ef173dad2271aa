"""Template-generated grade-school word problems with integer answers (written here, not downloaded).

Fourteen templates (shopping, change, packs of paper, sharing, speed, ages, area, savings, a two-step
count, a discount, buses needed, wages, animal legs, a temperature drop below zero) are filled
with names, items and numbers drawn from a seeded ``random.Random``. Each row has ``question``,
``answer`` (an integer, as a string), ``solution`` (worked steps ending in ``Answer: N``, for SFT)
and ``template``. Answers cover thousands (``2,300`` sheets), negatives and rounding up.

**Splits.** A question belongs to the test split iff a stable hash of its text falls in the test
bucket (1 in 5), so train and test never share a question, whatever the seed (as in
:mod:`shiftkit.tasks.arith`).

The held-out file ``shiftkit/data_files/wordproblems_test.jsonl`` (100 rows, ``question``,
``answer``, ``template``) is ``generate(100, "test", seed=0)``; rebuild it with
``python -m shiftkit.tasks.wordproblems --split test --n 100 --seed 0 --out <file>``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path
from typing import Callable

from shiftkit.errors import ShiftkitError

TEST_BUCKETS = 5
TEST_FILE = Path(__file__).resolve().parents[1] / "data_files" / "wordproblems_test.jsonl"

NAMES = ["Ava", "Ben", "Chloe", "Diego", "Emma", "Farah", "Gus", "Hana", "Ivan", "Jade", "Kofi", "Lena", "Maya",
         "Noah", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Yara", "Zoe"]
ITEMS = [("notebook", "notebooks"), ("apple", "apples"), ("pencil", "pencils"), ("ticket", "tickets"),
         ("cupcake", "cupcakes"), ("marker", "markers"), ("book", "books"), ("plant", "plants")]


def split_of(question: str) -> str:
    h = int.from_bytes(hashlib.sha256(question.encode()).digest()[:4], "little")
    return "test" if h % TEST_BUCKETS == 0 else "train"


def _fmt(n: int) -> str:
    return f"{n:,}"


# Each template draws numbers and returns (question, answer, solution steps without the Answer line).
def _shopping(r: random.Random):
    name, (one, many) = r.choice(NAMES), r.choice(ITEMS)
    a, p = r.randint(2, 12), r.randint(2, 25)
    return (f"{name} buys {a} {many} at ${p} each. How many dollars does {name} spend?", a * p,
            f"{a} {many} at ${p} each cost {a} * {p} = {a * p} dollars.")


def _change(r):
    name, (one, many) = r.choice(NAMES), r.choice(ITEMS)
    a, p = r.randint(2, 8), r.randint(2, 15)
    m = a * p + r.randint(1, 60)
    return (f"{name} has ${m}. {name} buys {a} {many} that cost ${p} each. How many dollars does {name} have left?",
            m - a * p, f"The {many} cost {a} * {p} = {a * p} dollars. {m} - {a * p} = {m - a * p} dollars are left.")


def _sheets(r):
    a, b = r.randint(1, 20) * 25, r.randint(3, 40)
    return (f"A pack holds {a} sheets of paper. A school buys {b} packs. How many sheets of paper does the school "
            "have?", a * b, f"{b} packs of {a} sheets hold {b} * {a} = {_fmt(a * b)} sheets.")


def _sharing(r):
    name, (one, many) = r.choice(NAMES), r.choice(ITEMS)
    b, each = r.randint(2, 9), r.randint(2, 15)
    return (f"{name} shares {b * each} {many} equally among {b} friends. How many {many} does each friend get?",
            each, f"{b * each} / {b} = {each} {many} each.")


def _speed(r):
    v, t = r.randint(3, 24) * 5, r.randint(2, 12)
    what = r.choice(["train", "bus", "car", "truck", "ferry"])
    return (f"A {what} travels at {v} km per hour for {t} hours. How many kilometers does it travel?", v * t,
            f"{v} km per hour for {t} hours is {v} * {t} = {v * t} km.")


def _ages(r):
    n1, n2 = r.sample(NAMES, 2)
    a, b, c = r.randint(4, 30), r.randint(2, 20), r.randint(1, 10)
    return (f"{n1} is {a} years old. {n2} is {b} years older than {n1}. How old will {n2} be in {c} years?",
            a + b + c, f"{n2} is {a} + {b} = {a + b} now, and in {c} years {a + b} + {c} = {a + b + c}.")


def _area(r):
    w, l = r.randint(3, 40), r.randint(3, 60)
    return (f"A garden is {w} meters wide and {l} meters long. What is its area in square meters?", w * l,
            f"The area is {w} * {l} = {_fmt(w * l)} square meters.")


def _savings(r):
    name = r.choice(NAMES)
    s, w = r.randint(2, 30), r.randint(3, 20)
    return (f"{name} saves ${s} every week. How many weeks does it take {name} to save ${s * w}?", w,
            f"{s * w} / {s} = {w} weeks.")


def _two_step(r):
    name = r.choice(NAMES)
    a, b = r.randint(5, 40), r.randint(5, 40)
    c = r.randint(1, a + b - 1)
    return (f"{name} picks {a} apples in the morning and {b} apples in the afternoon, then gives away {c} apples. "
            f"How many apples does {name} have now?", a + b - c,
            f"{a} + {b} = {a + b} apples picked, and {a + b} - {c} = {a + b - c} are left.")


def _discount(r):
    d = r.choice([10, 20, 25, 50])
    p = r.randint(2, 40) * 20
    sale = p * (100 - d) // 100
    what = r.choice(["jacket", "bike", "lamp", "chair", "tent"])
    return (f"A {what} costs ${p}. It is on sale for {d}% off. What is the sale price in dollars?", sale,
            f"{d}% of {p} is {p * d // 100}, so the sale price is {p} - {p * d // 100} = {sale} dollars.")


def _buses(r):
    c = r.randint(20, 50)
    n = r.randint(c + 1, 12 * c)
    buses = -(-n // c)
    return (f"There are {n} students going on a trip. Each bus holds {c} students. How many buses are needed?",
            buses, f"{n} / {c} is about {n / c:.2f}, so {buses} buses are needed to fit everyone.")


def _wages(r):
    name = r.choice(NAMES)
    w, h, d = r.randint(8, 30), r.randint(2, 8), r.randint(2, 6)
    return (f"{name} earns ${w} per hour and works {h} hours a day for {d} days. How many dollars does {name} "
            "earn?", w * h * d, f"{h} * {d} = {h * d} hours, and {h * d} * {w} = {_fmt(w * h * d)} dollars.")


def _legs(r):
    c, k = r.randint(2, 40), r.randint(2, 30)
    return (f"A farm has {c} chickens and {k} cows. How many legs do the animals have in total?", 2 * c + 4 * k,
            f"Chickens have {c} * 2 = {2 * c} legs and cows {k} * 4 = {4 * k} legs; {2 * c} + {4 * k} = {2 * c + 4 * k}.")


def _temperature(r):
    t, d = r.randint(1, 30), r.randint(2, 40)
    return (f"The temperature at noon is {t} degrees. By midnight it drops by {d} degrees. What is the temperature at "
            "midnight, in degrees?", t - d, f"{t} - {d} = {t - d} degrees.")


TEMPLATES: dict[str, Callable] = {
    "shopping": _shopping, "change": _change, "sheets": _sheets, "sharing": _sharing, "speed": _speed,
    "ages": _ages, "area": _area, "savings": _savings, "two_step": _two_step, "discount": _discount,
    "buses": _buses, "wages": _wages, "legs": _legs, "temperature": _temperature,
}


def generate(n: int, split: str = "train", seed: int = 0) -> list[dict]:
    """``n`` distinct problems of ``split`` (train | test), the same for the same seed."""
    if split not in ("train", "test"):
        raise ShiftkitError(f"word problems: split must be train or test, got '{split}'")
    if n <= 0:
        raise ShiftkitError(f"word problems: n must be positive, got {n}")
    rng = random.Random(f"wordproblems:{seed}:{split}")
    live = list(TEMPLATES)  # templates in turn, so every template is represented; a used-up one drops out
    rows, seen, i = [], set(), 0
    while len(rows) < n:
        if not live:
            raise ShiftkitError(f"word problems: cannot draw {n} distinct {split} problems")
        name = live[i % len(live)]
        for _ in range(100):
            q, ans, steps = TEMPLATES[name](rng)
            if q not in seen and split_of(q) == split:
                seen.add(q)
                rows.append({"question": q, "answer": str(ans), "solution": f"{steps}\nAnswer: {ans}",
                             "template": name})
                i += 1
                break
        else:
            live.remove(name)
    return rows


def load_test_set() -> list[dict]:
    """The committed held-out set (100 test-split rows: question, answer, template)."""
    return [json.loads(line) for line in TEST_FILE.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Write template-generated word problems as JSONL.")
    ap.add_argument("--split", default="train", choices=["train", "test"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--columns", default="question,answer,solution,template")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    cols = a.columns.split(",")
    rows = [{c: r[c] for c in cols} for r in generate(a.n, a.split, a.seed)]
    Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
