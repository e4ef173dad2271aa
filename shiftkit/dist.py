"""The process: its torch threads (:func:`set_threads`) and data parallelism (:class:`Dist`: single
process by default, DDP under ``accelerate launch``, gloo on CPU).

Loops split the *global* batch across ranks and normalise losses by *global* counts, so that
averaging gradients over ranks reproduces the single-process gradient exactly.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def set_threads(n: int) -> None:
    """Use ``n`` torch threads (0 = leave torch's default). Data-parallel workers should use 1."""
    if n > 0:
        torch.set_num_threads(n)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class Dist:
    def __init__(self) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world > 1 and not dist.is_initialized():
            from accelerate import PartialState

            PartialState(cpu=not torch.cuda.is_available())  # initialises the process group (gloo on CPU)
        self.device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available()
                                   else "cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: list) -> list:
        """This rank's share of a global list (strided, so every rank gets the same count if divisible)."""
        return items[self.rank :: self.world]

    def sum(self, x: float | torch.Tensor) -> torch.Tensor:
        """Sum over ranks (a CPU float64 scalar/tensor back). The all-reduce runs on this rank's device:
        NCCL rejects CPU tensors."""
        t = torch.as_tensor(x, dtype=torch.float64).detach().clone()
        if self.world > 1:
            t = t.to(self.device)
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.cpu()

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.world == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=None if self.device.type == "cpu" else [self.device.index])

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") else model
