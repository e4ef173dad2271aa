"""Token-exact multi-turn rollouts: the one turn loop of every agentic task (toy tool task, kernel problems).

Each episode is a growing row of token ids: the prompt, then per turn the tokens the policy sampled
(EOS included) and the environment's observation, encoded once and appended. The row trained on is
therefore the row sampled: the policy's tokens are never decoded and re-encoded, and ``gen`` marks them
(1) apart from prompt and observation tokens (0).

    rows = multi_turn(model, tok, prompts_ids, act, max_turns=3, max_new=14, temperature=1.0, seeds=seeds)

``act(idx, texts, turn)`` applies turn ``turn`` of the episodes ``idx`` (their decoded texts) and returns one
observation text per episode, or None where the episode ended. Turns are batched across the episodes
still running, through :func:`shiftkit.sampling.sample` on token contexts (or ``sampler``, a served model
with the same call, :meth:`shiftkit.remote.RolloutClient.sample`); turn ``t`` of episode ``i`` draws from
``row_seed(seeds[i], t, 0, 0)`` (greedy when ``seeds`` is None).
"""

from __future__ import annotations

from collections.abc import Callable

from shiftkit.loopkit import row_seed
from shiftkit.sampling import sample

Act = Callable[[list[int], list[str], int], list["str | None"]]


def multi_turn(model, tok, prompts_ids: list[list[int]], act: Act, *, max_turns: int, max_new: int,
               temperature: float, seeds: list[int] | None, sampler=None,
               logps: list | None = None) -> list[tuple[list[int], list[int]]]:
    """The episodes' ``(ids, gen)`` rows; ``logps``, a list, receives each row's per-token sampling
    log-probs (0 on prompt and observation tokens)."""
    eos = tok.eos_token_id
    rows = [(list(p), [0] * len(p)) for p in prompts_ids]
    lps = [[0.0] * len(p) for p in prompts_ids]
    draw = sampler or (lambda tok_, **kw: sample(model, tok_, **kw))
    active = list(range(len(rows)))
    for turn in range(max_turns):
        if not active:
            break
        roll = draw(tok, prompt_ids=[rows[i][0] for i in active], max_new_tokens=max_new,
                    temperature=temperature, greedy=seeds is None,
                    row_seeds=None if seeds is None else [row_seed(seeds[i], turn, 0, 0) for i in active])
        texts = []
        for k, i in enumerate(active):
            keep = roll.completion_mask_BT[k].bool()
            new = roll.completion_ids_BT[k][keep].tolist()
            ids, gen = rows[i]
            ids += new
            gen += [1] * len(new)
            lps[i] += roll.logp_BT[k][keep].tolist()
            texts.append(tok.decode([t for t in new if t != eos], skip_special_tokens=True))
        nxt = []
        for i, obs in zip(active, act(active, texts, turn)):
            if obs is None:
                continue
            o = tok(obs, add_special_tokens=False)["input_ids"]
            rows[i][0].extend(o)
            rows[i][1].extend([0] * len(o))
            lps[i] += [0.0] * len(o)
            nxt.append(i)
        active = nxt
    if logps is not None:
        logps[:] = lps
    return rows
