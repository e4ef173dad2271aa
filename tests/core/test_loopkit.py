"""The training kit: one seed formula, one prompt draw shared by GRPO and OPD, one off-policy test, the
no-signal guard of the optimizer step (:func:`shiftkit.loopkit.clip_and_step`). (Kill-and-resume and DDP are tested per loop: tests/core/test_training.py,
tests/opd/test_cli.py, tests/agent/test_agent_rl.py.)"""

import random

import torch

from shiftkit import loopkit as kit


def test_row_seed_formula_by_hand():
    assert kit.row_seed(0, 0, 0, 0) == 0
    assert kit.row_seed(2, 3, 4, 5) == 2 * 1_000_003 + 3 * 10_007 + 4 * 101 + 5


def test_grpo_and_opd_draw_the_same_problems_on_the_same_seed():
    """The loops' own path: each loads its inputs with ``prompt_inputs`` (OPD through ``with_data``, its
    ``prompts=`` alias) and draws step ``step``'s prompts with ``inp.ds.draw(seed, step, P)``."""
    from shiftkit.inputs import prompt_inputs
    from shiftkit.models import make_char_tokenizer
    from shiftkit.opd.loop import OPDConfig, with_data
    from shiftkit.rl import GRPOConfig
    from shiftkit.tasks import Mixture

    tok = make_char_tokenizer()
    grpo = prompt_inputs(GRPOConfig(model="m", tasks=["add"], seed=3), tok, "rl", want_eval=False)
    opd = prompt_inputs(with_data(OPDConfig(student="s", teacher="t", teacher_ref="r", tasks=["add"], seed=3)), tok,
                        "opd", want_eval=False)
    prompts = lambda inp, step: [e.prompt for e in inp.ds.draw(3, step, 5)]  # noqa: E731
    assert prompts(grpo, 7) == prompts(opd, 7)
    assert prompts(grpo, 7) != prompts(grpo, 8)
    rng, mix = random.Random("rl:3:7"), Mixture(["add"])  # the stream of (seed, step)
    assert prompts(grpo, 7) == [mix.sample(rng, "train").prompt for _ in range(5)]


def test_needs_old_logprobs():
    assert not kit.needs_old_logprobs(0.0, 0.0, 1, 1.0)
    assert kit.needs_old_logprobs(0.2, 0.0, 1)
    assert kit.needs_old_logprobs(0.0, 0.28, 1)  # an upper-only clip
    assert kit.needs_old_logprobs(0.0, 0.0, 2)
    assert kit.needs_old_logprobs(0.0, 0.0, 1, top_p=0.9)


def test_clip_and_step_computes_the_gradient_but_skips_adam_without_signal():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = kit.make_optimizer(model, 1e-1, 0.0)

    def step(scale: float, skip: bool = False) -> float:  # a loop's update: zero, backward, clip and step
        opt.zero_grad(set_to_none=True)
        (model(torch.ones(1, 3)).sum() * scale).backward()
        return kit.clip_and_step(model, opt, 1.0, skip=skip)

    step(1.0)  # a real step: Adam now has momentum
    before = [p.detach().clone() for p in model.parameters()]
    gnorm = step(0.0, skip=True)
    assert gnorm == 0.0 and all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    step(0.0)  # without the guard, momentum moves it
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
