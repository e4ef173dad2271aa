"""A 2-step SFT run of a tiny HF model, sharded with FSDP2 (torch ``fully_shard``) on CPU/gloo.

Why not accelerate's own FSDP config on CPU: accelerate 1.15 attaches its FSDP plugin only for
accelerator devices (``AcceleratorState.__init__``, the ``distributed_type in [MULTI_GPU, ...]``
branch); with ``use_cpu: true`` an FSDP config silently runs as ``MULTI_CPU`` (plain DDP, parameters
not sharded; checked: ``distributed_type`` MULTI_CPU, no DTensor parameters). torch 2.13's FSDP2 itself
runs on CPU with gloo, so under ``accelerate launch`` (configs/accelerate/cpu_gloo.yaml, which sets
up the gloo process group) this script shards each decoder layer and the root with ``fully_shard``,
the engine accelerate's FSDP2 path (``fsdp2_prepare_model``) applies on GPUs.

Each rank takes a strided share of every global batch and normalises the loss by the *global*
token count (shiftkit.microbatch.global_counts), so the sharded run must reproduce one process.
Rank 0 writes the full (gathered) state dict and what ran to ``--out``.

    python tests/scale/fsdp_sft_script.py --out one.pt
    accelerate launch --config_file configs/accelerate/cpu_gloo.yaml tests/scale/fsdp_sft_script.py --out two.pt \
        --token-budget 20 --chunked-head   # and micro-batches of <= 20 tokens, and the chunked head
"""

import argparse

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--token-budget", type=int, default=0,
                    help="split each rank's share into micro-batches of this many tokens (accumulated)")
    ap.add_argument("--chunked-head", action="store_true",
                    help="log-probs from hidden states in chunks (shiftkit.logprobs) instead of full logits")
    a = ap.parse_args()
    torch.set_num_threads(1)
    from accelerate import Accelerator

    from shiftkit import logprobs as LP
    from shiftkit import losses
    from shiftkit.microbatch import accumulating, global_counts, micro_batches
    from shiftkit.models import TinyModelSpec, make_tiny_model

    acc = Accelerator(cpu=True)
    spec = TinyModelSpec(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8)
    model = make_tiny_model(spec, vocab_size=100, seed=0)
    W, r = acc.num_processes, acc.process_index
    if W > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (W,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)  # the rest (embeddings, tied head, final norm)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(1)
    lengths = [3, 9, 5, 12, 7, 2, 11, 6]  # unequal, so per-rank token counts differ

    class _D:  # the Dist.sum the loops use, on accelerate's process group
        world = W

        @staticmethod
        def sum(x):
            t = torch.as_tensor(x, dtype=torch.float64).clone()
            return acc.reduce(t, reduction="sum") if W > 1 else t

    counts = []  # rank 0's (micro-batches, zero-scale fillers) per step
    for step in range(a.steps):
        rows = list(range(4 * step, 4 * step + 4))  # the global batch of this step
        L = max(lengths[i] for i in rows)
        ids = torch.randint(3, 100, (len(rows), L), generator=g)
        mask = torch.tensor([[1] * lengths[i] + [0] * (L - lengths[i]) for i in rows])
        ids, mask = ids[r::W], mask[r::W]
        n_tok = global_counts(mask[:, 1:], _D)[0]
        empty = torch.zeros(len(ids), 0, dtype=torch.long)  # SFT: the whole row is the "completion"

        def loss_fn(mb):
            x, m = mb.completion(ids), mb.completion(mask)
            if a.chunked_head:  # under FSDP2 the root's head weight is unsharded between forward and backward
                head = LP.model_head(model, x[:, :1], m[:, :1], x[:, 1:], m[:, 1:])
                return losses.aggregate(-LP.token_logprobs(head, x[:, 1:], chunk=4), m[:, 1:], "token_mean", n_tok)
            logits = model(input_ids=x, attention_mask=m).logits[:, :-1]
            return losses.sft_loss(logits, x[:, 1:], m[:, 1:], num_tokens=n_tok)

        opt.zero_grad(set_to_none=True)
        # FSDP averages gradients over ranks; each loss is a global sum / N, hence * W
        mbs = micro_batches(empty, mask, a.token_budget, d=_D)  # the same count on every rank
        for mb in accumulating(model, mbs):  # the gradient reduction runs on the last micro-batch only
            (loss_fn(mb) * mb.scale * W).backward()
        counts.append((len(mbs), sum(mb.scale == 0 for mb in mbs)))
        opt.step()
    sharded = [type(p).__name__ == "DTensor" for p in model.parameters()]
    local = sum(p.to_local().numel() if type(p).__name__ == "DTensor" else p.numel() for p in model.parameters())
    if W > 1:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        state = model.state_dict()
    if acc.is_main_process:
        torch.save({"state": {k: v.detach().cpu() for k, v in state.items()}, "world": W, "all_sharded": all(sharded),
                    "local_numel": local, "full_numel": sum(v.numel() for v in model.state_dict().values()),
                    "distributed_type": str(acc.distributed_type), "micro_batches": counts}, a.out)
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
