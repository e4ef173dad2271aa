"""The math checker on real-style completions: units, emphasis, thousands separators, LaTeX, and the
answers that must stay wrong (``2,300`` is never 23.00, a dropped minus sign is wrong)."""

import pytest

from shiftkit.tasks.math_answer import clean_answer, extract_answer, gold_answer, has_answer_marker, math_reward

# (completion, gold, expected reward)
CASES = [
    # units, emphasis, thousands separators (the three)
    ("She pays 3 * 5 = 15 dollars in total.\nAnswer: 15 dollars", "15", 1.0),
    ("Adding them up: 20 + 6 = 26.\nAnswer: **26**", "26", 1.0),
    ("Each box has 230 sheets, so 10 boxes hold 2,300 sheets.", "2300", 1.0),
    ("**Answer:** 26", "26", 1.0),
    ("Answer: $15", "15", 1.0),
    ("Answer: \\$15.00", "15", 1.0),
    ("Answer: 2,300 sheets", "2300", 1.0),
    ("Answer: 1,234,567", "1234567", 1.0),
    ("The final answer is 7 hours.", "7", 1.0),
    ("Answer: 50%", "50", 1.0),
    ("Answer: x = 5", "5", 1.0),
    ("Answer: 15. That is what she paid.", "15", 1.0),
    ("#### 1,234", "1234", 1.0),
    ("So she has 18 eggs left.\n#### 18", "Janet has 16 - 3 - 4 = 9 ... \n#### 18", 1.0),  # GSM8K gold solution
    ("Answer: 23.00", "23", 1.0),
    ("Answer: \\boxed{-7}", "-7", 1.0),
    ("The temperature drops to \u22124 degrees.\nAnswer: \u22124", "-4", 1.0),
    # fractions and LaTeX
    ("Answer: 3/4", "0.75", 1.0),
    ("The probability is $\\boxed{\\frac{1}{2}}$.", "0.5", 1.0),
    ("Answer: $\\frac{3}{4}$ of a cup", "3/4", 1.0),
    ("so the side is \\boxed{2\\sqrt{2}}", "2\\sqrt{2}", 1.0),
    ("Answer: \\text{15 dollars}", "15", 1.0),
    ("Answer: 12\\text{ cm}", "12", 1.0),
    ("Let me check my answer again. 4 + 4 = 8.\nAnswer: 8 cookies\nThat is my answer to the question.", "8", 1.0),
    # must stay wrong
    ("Answer: 2,300", "23.00", 0.0),
    ("Answer: 2,300", "2.3", 0.0),
    ("Answer: 5", "-5", 0.0),
    ("Answer: -5", "5", 0.0),
    ("Answer: 26", "62", 0.0),
    ("Answer: 1/2", "2", 0.0),
    ("Answer: 15 dollars", "150", 0.0),
    ("\\boxed{3}", "30", 0.0),
    ("Answer: 12 apples and 3 oranges", "15", 0.0),
    ("Answer: 2, 3", "2", 0.0),
    ("I am not sure.", "8", 0.0),
    ("", "8", 0.0),
    ("Answer: 2,30", "230", 0.0),
    ("Answer: 3*4", "34", 0.0),  # a product, not emphasis
    ("Answer: *12*", "12", 1.0),  # not a thousands group: never read as 230
]


@pytest.mark.parametrize("completion,gold,expected", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_math_reward_on_real_style_completions(completion, gold, expected):
    assert math_reward(completion, gold) == expected, (completion, gold, extract_answer(completion))


def test_case_list_is_large_and_mixed():
    assert len(CASES) >= 25
    assert sum(e == 0.0 for *_, e in CASES) >= 10


@pytest.mark.parametrize("raw,clean", [("**26**", "26"), ("15 dollars", "15"), ("2,300 sheets", "2300"),
                                       ("$1,000$", "1000"), ("x = -3", "-3"), ("2,30", "2,30"),
                                       ("\\frac{1}{2}", "\\frac{1}{2}"), ("3 + 4", "3 + 4")])
def test_clean_answer(raw, clean):
    assert clean_answer(raw) == clean


def test_has_answer_marker():
    assert has_answer_marker("so\nAnswer: 4")
    assert has_answer_marker("it is \\boxed{4}")
    assert has_answer_marker("#### 4")
    assert not has_answer_marker("the total is 4")


def test_gold_answer_of_full_solutions():
    gsm8k = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether "
             "in April and May.\n#### 72")
    assert gold_answer(gsm8k) == "72"
    assert gold_answer("so the answer is $\\boxed{\\frac{1}{2}}$") == "\\frac{1}{2}"
    assert gold_answer("1,000") == "1000"
