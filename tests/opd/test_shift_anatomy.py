"""The shift-anatomy diagnostic: which token classes the teacher pair's Direct-OPD signal pushes up and
down on the student's own samples, and the preflight warning when end-of-sequence or format tokens
dominate (a weak model whose RL shift is mostly "stop here" transfers that, not the task skill)."""

import copy
import json

import pytest
import torch

from shiftkit.models import WEAK_SPEC, make_char_tokenizer, make_tiny_model
from shiftkit.opd import preflight as pf
from shiftkit.opd.diagnostics import TOKEN_CLASSES, shift_anatomy, shift_dominated_by, token_class_table


def test_token_classes_of_a_tokenizer():
    tok = make_char_tokenizer()
    cls = token_class_table(tok, len(tok) + 3, eos_ids=[tok.convert_tokens_to_ids("|")])
    by = lambda t: int(cls[tok.convert_tokens_to_ids(t)])  # noqa: E731
    assert TOKEN_CLASSES == ("content", "format", "eos")
    assert by("<eos>") == 2 and by("|") == 2  # the tokenizer's EOS and any extra end id
    assert by("<pad>") == 1 and by(" ") == 1 and by("\n") == 1 and by("=") == 1 and by(".") == 1
    assert by("7") == 0 and by("a") == 0 and by("Z") == 0
    assert cls[len(tok):].tolist() == [1, 1, 1]  # padded output rows


def test_anatomy_by_hand():
    """One position, candidates [EOS, 'a', ' '] with weights [0.5, 0.25, 0.25] and Delta [3, 1, -1]:
    the weighted mean Delta is 1.5, the pushes w * (Delta - 1.5) are [0.75, -0.125, -0.625]."""
    cls_V = torch.tensor([2, 0, 1])
    delta = torch.tensor([[[3.0, 1.0, -1.0]]])
    w = torch.tensor([[[0.5, 0.25, 0.25]]])
    ids = torch.tensor([[[0, 1, 2]]])
    an = shift_anatomy(delta, w, ids, torch.ones(1, 1), cls_V)
    assert an["up/eos"] == 1.0 and an["up/content"] == 0.0
    assert an["down/content"] == pytest.approx(0.125 / 0.75) and an["down/format"] == pytest.approx(0.625 / 0.75)
    assert an["side"] == "up" and an["eos_share"] == 1.0  # up: 1.0 EOS+format; down: 0.83
    assert an["eos_delta"] == 3.0 and an["content_delta"] == 1.0 and an["format_delta"] == -1.0
    assert an["mass"] == pytest.approx(1.5)
    assert shift_dominated_by(an) == "end-of-sequence"
    # a Delta shared by every candidate (the teacher's normaliser moving) pushes nothing
    flat = shift_anatomy(delta + 5.0, w, ids, torch.ones(1, 1), cls_V)
    assert {k: v for k, v in flat.items() if "delta" not in k} == {k: v for k, v in an.items() if "delta" not in k}


def test_anatomy_degenerate_cases():
    cls_V = torch.tensor([0, 1, 2])
    ids = torch.tensor([[[0, 1], [2, 0]]])
    w = torch.full((1, 2, 2), 0.5)
    none = shift_anatomy(torch.zeros(1, 2, 2), w, ids, torch.ones(1, 2), cls_V)  # teacher == reference
    assert none["mass"] == 0.0 and shift_dominated_by(none) is None
    assert all(none[f"{s}/{c}"] == 0.0 for s in ("up", "down") for c in TOKEN_CLASSES)
    # a masked position is ignored: only position 0 (content up, format down) counts
    an = shift_anatomy(torch.tensor([[[1.0, -1.0], [9.0, -9.0]]]), w, ids, torch.tensor([[1, 0]]), cls_V)
    assert an["up/content"] == 1.0 and an["down/format"] == 1.0 and an["up/eos"] == 0.0
    assert an["mass"] == pytest.approx(1.0)
    # one candidate (K = 1): the push is w * Delta itself
    one = shift_anatomy(torch.tensor([[[2.0], [-1.0]]]), torch.ones(1, 2, 1), torch.tensor([[[2], [0]]]),
                        torch.ones(1, 2), cls_V)
    assert one["up/eos"] == 1.0 and one["down/content"] == 1.0 and one["mass"] == pytest.approx(1.5)


def test_dominated_by_threshold_and_name():
    an = {"eos_share": 0.3, "format_share": 0.25, "content_share": 0.45}
    assert shift_dominated_by(an) == "end-of-sequence"
    assert shift_dominated_by({**an, "format_share": 0.35}) == "format"
    assert shift_dominated_by(an, threshold=0.6) is None
    assert shift_dominated_by({"eos_share": 0.1, "format_share": 0.1, "content_share": 0.8}) is None


# -- tiny models: an EOS-dominated pair is flagged, a content pair is not --------------------------

def _with_bias(model, bias: dict[int, float]):
    """``model`` with an untied output layer that adds ``bias`` to the given token logits."""
    m = copy.deepcopy(model)
    old = m.get_output_embeddings()
    head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(old.weight)
        head.bias.zero_()
        for i, b in bias.items():
            head.bias[i] = b
    m.config.tie_word_embeddings = False
    m.set_output_embeddings(head)
    return m.eval()


@pytest.fixture(scope="module")
def pairs():
    """A student that ends often (EOS +3) and likes digits (+2), its copy as the pair's reference, and
    two teachers: one that only ends more (EOS +3 more, the pruned-model repair the issue saw) and one
    that trades the digit '3' for '7' (a content skill)."""
    tok = make_char_tokenizer()
    ids = {c: tok.convert_tokens_to_ids(c) for c in "0123456789"}
    eos = tok.eos_token_id
    base = {eos: 3.0, **{i: 2.0 for i in ids.values()}}
    student = _with_bias(make_tiny_model(WEAK_SPEC, vocab_size=len(tok), seed=0), base)
    eos_teacher = _with_bias(student, {**base, eos: 6.0})
    content_teacher = _with_bias(student, {**base, ids["7"]: 5.0, ids["3"]: -1.0})
    prompts = [f"{a}+{b}=" for a, b in ((12, 34), (5, 7), (40, 2), (9, 9), (31, 8), (6, 60), (7, 1), (23, 23))]
    return {"tok": tok, "student": student, "ref": student, "eos": eos_teacher, "content": content_teacher,
            "prompts": prompts}


def test_an_eos_dominated_pair_is_flagged_and_a_content_pair_is_not(pairs):
    p = pairs
    kw = dict(top_k=16, max_new_tokens=12, temperature=1.0)
    eos = pf.shift_anatomy_of(p["student"], p["tok"], p["eos"], p["ref"], p["prompts"], **kw)
    content = pf.shift_anatomy_of(p["student"], p["tok"], p["content"], p["ref"], p["prompts"], **kw)
    assert 0.1 < eos["student_eos_rate"] < 1.0  # the student's samples end (and continue) now and then
    assert eos["dominated_by"] == "end-of-sequence" and eos["up/eos"] > 0.9 and eos["eos_delta"] > 1.0
    assert content["dominated_by"] is None and content["up/content"] > 0.9 and content["down/content"] > 0.9
    assert content["eos_share"] < 0.1
    for an in (eos, content):
        assert sum(an[f"{c}_share"] for c in TOKEN_CLASSES) == pytest.approx(1.0)
        assert an["rollouts"] == 16 and an["max_new_tokens"] == 12


def test_preflight_check_warns_only_for_the_eos_pair(pairs, capsys):
    from shiftkit.opd.loop import OPDConfig

    p = pairs
    cfg = OPDConfig(student="s", teacher="t", teacher_ref="r", max_new_tokens=12, temperature=1.0)
    an = pf.check_shift_anatomy(p["student"], p["tok"], p["eos"], p["ref"], p["prompts"], cfg)
    err = capsys.readouterr().err
    assert an["dominated_by"] == "end-of-sequence"
    assert err.startswith("warning: the teacher pair's shift") and "end-of-sequence" in err and "EOS" in err
    pf.check_shift_anatomy(p["student"], p["tok"], p["content"], p["ref"], p["prompts"], cfg)
    assert capsys.readouterr().err == ""
    pf.check_shift_anatomy(p["student"], p["tok"], p["eos"], p["ref"], p["prompts"], cfg, warn=False)  # rank > 0
    assert capsys.readouterr().err == ""


def test_run_opd_reports_the_anatomy_of_each_stage(trio, tmp_path):
    from shiftkit.opd.loop import OPDConfig, run_opd

    s = run_opd(OPDConfig(student=trio["student"], teacher=trio["teacher"], teacher_ref=trio["ref"], tasks=["add"],
                          out=str(tmp_path / "r"), steps=1, prompts_per_step=2, samples_per_prompt=2,
                          max_new_tokens=8, eval_every=0, threads=1, progress=False))
    assert len(s["shift_anatomy"]) == 1
    an = s["shift_anatomy"][0]
    assert sum(an[f"{c}_share"] for c in TOKEN_CLASSES) == pytest.approx(1.0) and an["mass"] > 0
    assert an["top_k"] == 16 and an["max_new_tokens"] == 8
    json.dumps(s["shift_anatomy"])  # the summary stays JSON
