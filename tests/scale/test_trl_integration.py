"""shiftkit.integrations.trl on CPU (no vLLM): on TRL's own generated completions, the TRL trainer's
loss and gradient equal the native OPD loop's math on the same tensors (1e-5), for every reward
mode, vanilla OPD, both aggregations; the adaptive KL moves alpha the same way; the preflight
refuses a teacher whose tokenizer differs; and one trainer.train() step runs."""

import copy

import pytest
import torch

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from oracles import direct_opd, opd_candidates  # noqa: E402
from shiftkit import advantages as A  # noqa: E402
from shiftkit import losses  # noqa: E402
from shiftkit.logprobs import logprobs_from_logits  # noqa: E402
from shiftkit.errors import ShiftkitError  # noqa: E402
from shiftkit.models import make_tiny_model  # noqa: E402
from shiftkit.sampling import forward_logits, score, token_logprobs  # noqa: E402

from .conftest import PICO  # noqa: E402

PROMPTS = ["12+3=", "7*8=", "100-1=", "5+5="]
G, TEMP = 2, 0.9


def _trainer(tok, tmp_path, opd_kw, *, teacher_tok=None, max_steps=1, lora=False):
    from shiftkit.integrations.trl import DirectOPDTrainer, GRPOConfig, OPDArgs

    student = make_tiny_model(PICO, vocab_size=len(tok), seed=0)
    teacher = make_tiny_model(PICO, vocab_size=len(tok), seed=1)
    ref = make_tiny_model(PICO, vocab_size=len(tok), seed=2)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=G,
                      max_completion_length=8, temperature=TEMP, use_cpu=True, report_to="none", logging_steps=1,
                      save_strategy="no", max_steps=max_steps, seed=0, learning_rate=1e-3, bf16=False,
                      dataloader_num_workers=0)
    ds = datasets.Dataset.from_dict({"prompt": PROMPTS})
    kw = {}
    if lora:  # the student trains LoRA adapters (TRL's peft_config); the anchor is the base model
        from peft import LoraConfig

        kw["peft_config"] = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    return DirectOPDTrainer(student, teacher, ref, opd_args=OPDArgs(**opd_kw), args=args, train_dataset=ds,
                            processing_class=tok, teacher_processing_class=teacher_tok, ref_processing_class=tok, **kw)


def _native(student, teacher, ref, anchor, inputs, o, alpha0):
    """The native Direct-OPD loop's step math (shiftkit/opd/loop.py) on the same tensors."""
    args = (inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], inputs["completion_mask"])
    comp, mask = inputs["completion_ids"], inputs["completion_mask"]
    n_tok, n_seq = mask.sum(), comp.shape[0]
    direct = o["method"] == "direct_opd"
    s_logits = forward_logits(student, *args) / TEMP
    s_det = s_logits.detach()
    ids = opd_candidates(o["reward_mode"] if direct else "sampled", s_det, comp, o.get("top_k", 16))
    with torch.no_grad():
        t_logits = forward_logits(teacher, *args, dtype="float32")
        r_logits = forward_logits(ref, *args, dtype="float32") if direct else None
        anchor_lp = score(anchor, *args, dtype="float32", temperature=TEMP)
    if direct:
        adv, _, _ = direct_opd(s_det, t_logits, r_logits, ids, mask, mode=o["reward_mode"],
                                 top_q=o.get("top_q", 1.0))
    else:
        adv = A.vanilla_opd_advantage(logprobs_from_logits(s_det, ids), logprobs_from_logits(t_logits, ids))
    wr = float((adv.sum(-1) * mask).sum() / n_tok)  # the token-mean of sum_k adv_k (the adaptive-KL signal)
    alpha = A.adaptive_kl_coef(alpha0, wr, 0.01, 0.5, 2.5)
    lp_BTK, lp_BT = logprobs_from_logits(s_logits, ids), token_logprobs(s_logits, comp)
    agg = o.get("aggregation", "token_mean")
    loss = losses.candidate_policy_loss(lp_BTK, lp_BTK.detach(), adv, mask, aggregation=agg, num_tokens=n_tok,
                                        num_seqs=n_seq)[0]
    loss = loss + losses.kl_penalty(lp_BT, anchor_lp, mask, alpha, agg, n_tok, n_seq, clamp=True)[0]
    return loss, alpha


CASES = [
    dict(method="direct_opd", reward_mode="student_topk", top_k=4),
    dict(method="direct_opd", reward_mode="sampled"),
    dict(method="direct_opd", reward_mode="full_vocab", chunk=5),
    dict(method="direct_opd", reward_mode="student_topk", top_k=4, aggregation="seq_mean", top_q=0.5),
    dict(method="vanilla_opd", reward_mode="sampled"),
    dict(method="direct_opd", reward_mode="student_topk", top_k=4, lora=True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['method']}-{c['reward_mode']}-{c.get('aggregation', 'tok')}"
                                                  + ("-lora" if c.get("lora") else ""))
def test_trl_loss_and_grad_equal_native(tok, tmp_path, case):
    o = {**case, "kl_coef": 1.0}
    lora = o.pop("lora", False)
    tr = _trainer(tok, tmp_path, o, lora=lora)
    student = tr.accelerator.unwrap_model(tr.model)
    params = [p for p in student.parameters() if p.requires_grad]
    assert lora == (type(student).__name__ == "PeftModel") and (not lora or len(params) < 20)
    with torch.no_grad():  # move the student off its start, so the KL to the anchor has a gradient
        for p in params:
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    tr.model.train()
    rows = [{"prompt": p} for p in PROMPTS[:2] for _ in range(G)]
    inputs = tr._generate_and_score_completions(rows)
    assert int(inputs["completion_mask"].sum()) > 4
    loss = tr.compute_loss(tr.model, inputs)
    g_trl = torch.autograd.grad(loss, params)
    un = tr.accelerator.unwrap_model
    assert (tr.opd_ref is None) == (o["method"] == "vanilla_opd")
    ref_loss, alpha = _native(student, un(tr.opd_teacher), tr.opd_ref and un(tr.opd_ref), un(tr.opd_anchor),
                              inputs, o, 1.0)
    g_nat = torch.autograd.grad(ref_loss, params)
    assert tr.opd_alpha == pytest.approx(alpha, abs=1e-12) and alpha != 1.0  # the adaptive KL moved, identically
    assert tr._metrics["train"]["opd/kl_k3"][-1] > 1e-4  # the student is off its anchor: the KL term counts
    assert abs(float(loss) - float(ref_loss)) < 1e-5
    assert max(float(g.abs().max()) for g in g_nat) > 1e-3 * (0.1 if lora else 1.0)
    assert max(float((a - b).abs().max()) for a, b in zip(g_trl, g_nat)) < 1e-5


def test_preflight_refuses_a_different_tokenizer(tok, tmp_path):
    other = copy.deepcopy(tok)
    other.add_special_tokens({"additional_special_tokens": ["<think>"]})
    with pytest.raises(ShiftkitError, match="tokenizers/models disagree"):
        _trainer(tok, tmp_path, dict(method="direct_opd"), teacher_tok=other)
    with pytest.raises(ShiftkitError, match="beta"):
        from shiftkit.integrations.trl import DirectOPDTrainer, GRPOConfig

        DirectOPDTrainer(make_tiny_model(PICO, vocab_size=len(tok)), make_tiny_model(PICO, vocab_size=len(tok)),
                         make_tiny_model(PICO, vocab_size=len(tok), seed=3),
                         args=GRPOConfig(output_dir=str(tmp_path), beta=0.1, use_cpu=True, report_to="none"))


def test_one_training_step_runs(tok, tmp_path):
    tr = _trainer(tok, tmp_path, dict(method="direct_opd", reward_mode="student_topk", top_k=4))
    before = [p.detach().clone() for p in tr.accelerator.unwrap_model(tr.model).parameters()]
    tr.train()
    after = list(tr.accelerator.unwrap_model(tr.model).parameters())
    assert max(float((a - b.detach()).abs().max()) for a, b in zip(before, after)) > 1e-5
    logged = tr.state.log_history[0]
    assert "opd/kl_alpha" in logged and "opd/reward_weighted_mean" in logged


def test_off_policy_reuse_matches_native_clipped_update(tok, tmp_path):
    """num_iterations=2: TRL reuses a generation batch after an update. The trainer keeps the old
    policy's candidate log-probs and the loss is the clipped surrogate (TRL's epsilon 0.2), as the
    native loop's off-policy path: ids, advantages and old log-probs from the policy that sampled."""
    from shiftkit.integrations.trl import DirectOPDTrainer, GRPOConfig, OPDArgs

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=G,
                      max_completion_length=8, temperature=TEMP, use_cpu=True, report_to="none", save_strategy="no",
                      max_steps=1, seed=0, bf16=False, num_iterations=2)
    mk = lambda s: make_tiny_model(PICO, vocab_size=len(tok), seed=s)  # noqa: E731
    tr = DirectOPDTrainer(mk(0), mk(1), mk(2), opd_args=OPDArgs(top_k=4, kl_coef=1.0), args=args,
                          train_dataset=datasets.Dataset.from_dict({"prompt": PROMPTS}), processing_class=tok)
    student = tr.accelerator.unwrap_model(tr.model)
    tr.model.train()
    inputs = tr._generate_and_score_completions([{"prompt": p} for p in PROMPTS[:2] for _ in range(G)])
    assert "opd_old_logps" in inputs
    # native off-policy step (shiftkit/opd/loop.py): ids, advantages and old log-probs scored by the
    # policy that sampled (before "the update" below), then updated by the current one
    un = tr.accelerator.unwrap_model
    args4 = (inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], inputs["completion_mask"])
    comp, mask = inputs["completion_ids"], inputs["completion_mask"]
    n_tok, n_seq = mask.sum(), comp.shape[0]
    with torch.no_grad():
        s_det = forward_logits(student, *args4) / TEMP
        ids = opd_candidates("student_topk", s_det, comp, 4)
        adv, _, _ = direct_opd(s_det, forward_logits(un(tr.opd_teacher), *args4),
                                 forward_logits(un(tr.opd_ref), *args4), ids, mask, mode="student_topk")
        anchor_lp = score(un(tr.opd_anchor), *args4, temperature=TEMP)
        old_lp = logprobs_from_logits(s_det, ids)
        for p in student.parameters():  # "the update": the policy moves before the batch is reused
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    loss = tr.compute_loss(tr.model, inputs)
    g_trl = torch.autograd.grad(loss, list(student.parameters()))
    alpha = A.adaptive_kl_coef(1.0, float((adv.sum(-1) * mask).sum() / n_tok), 0.01, 0.5, 2.5)
    logits = forward_logits(student, *args4) / TEMP
    lp_BTK = logprobs_from_logits(logits, ids)
    ref_loss, pm = losses.candidate_policy_loss(lp_BTK, old_lp, adv, mask, clip_low=0.2, clip_high=0.2,
                                                num_tokens=n_tok, num_seqs=n_seq)
    ref_loss = ref_loss + losses.kl_penalty(token_logprobs(logits, comp), anchor_lp, mask, alpha, "token_mean",
                                            n_tok, n_seq)[0]
    g_nat = torch.autograd.grad(ref_loss, list(student.parameters()))
    assert float(pm["clip_frac"]) > 0  # the clip is active, so the old log-probs matter
    assert abs(float(loss) - float(ref_loss)) < 1e-5
    assert max(float((a - b).abs().max()) for a, b in zip(g_trl, g_nat)) < 1e-5
