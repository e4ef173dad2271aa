"""The process: its torch threads (:func:`set_threads`) and data parallelism (:class:`Dist`).

Which strategy runs is what the launcher asked for, read from the environment ``accelerate launch``
gives each process (accelerate 1.15's ``prepare_multi_gpu_env`` / ``prepare_simple_launcher_cmd_env``);
nothing is silently replaced (accelerate itself turns an FSDP config on CPU into DDP):

* one process: ``single``; several without an FSDP config (``torchrun``, ``--multi_gpu``): ``ddp``;
* ``distributed_type: FSDP`` (``ACCELERATE_USE_FSDP``) with ``fsdp_version: 2``: ``fsdp``, torch's
  ``fully_shard`` applied here, on GPUs (NCCL) and on CPU (gloo) alike: each decoder layer (the
  model's ``_no_split_modules``, or ``fsdp_transformer_layer_cls_to_wrap``) then the root;
* ``mixed_precision: bf16|fp16`` becomes the run's ``autocast`` key, ``fsdp_activation_checkpointing``
  its ``grad_checkpointing`` (a conflicting key is an error); ``ACCELERATE_USE_CPU`` puts the run on CPU.

Every other launcher setting shiftkit cannot honour is an error naming it (:func:`launcher_plan`):
DeepSpeed, Megatron-LM, accelerate's parallelism config (TP/CP/SP), a dynamo backend, fp8, FSDP1 and
the FSDP options listed in ``FSDP_REFUSED``, more processes on a node than visible GPUs.

Loops split the *global* batch across ranks and normalise losses by *global* counts, so that
averaging gradients over ranks reproduces the single-process gradient exactly. Under FSDP the
frozen models (KL reference, OPD teacher, teacher_ref and anchor) are sharded like the policy
(``frozen_placement=auto|shard``) or kept whole on every rank (``replicate``). Sampling and
evaluation run inside :meth:`Dist.gathered` (the policy's parameters all-gathered once, so ranks may
run different numbers of forwards); every other forward of a sharded model runs the same number of
times on every rank (filler micro-batches). Checkpoints hold the *full* state dict (gathered to rank
0, written as a plain HF directory) and a full optimizer state keyed by parameter name, so a run
resumes under any strategy and world size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

import torch
import torch.distributed as dist

from shiftkit.errors import ShiftkitError


def set_threads(n: int) -> None:
    """Use ``n`` torch threads (0 = leave torch's default). Data-parallel workers should use 1."""
    if n > 0:
        torch.set_num_threads(n)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


FROZEN_PLACEMENTS = ("auto", "shard", "replicate")


@dataclasses.dataclass
class DistKeys:
    """The key of the loops that hold frozen models (GRPO's KL reference, OPD's teacher pair and anchor)."""

    frozen_placement: str = "auto"  # auto | shard | replicate: the frozen models under FSDP (auto = shard, 1/N of each per rank; replicate = a whole copy per rank, no all-gathers when scoring); without FSDP every model is whole


# FSDP options of an accelerate config that shiftkit refuses: env var -> (config key, value(s) honoured, why)
FSDP_REFUSED = {
    "FSDP_OFFLOAD_PARAMS": ("fsdp_offload_params", ("false",), "parameter offload is not implemented"),
    "FSDP_CPU_RAM_EFFICIENT_LOADING": ("fsdp_cpu_ram_efficient_loading", ("false",),
                                       "every rank loads the checkpoint, then shards it"),
    "FSDP_STATE_DICT_TYPE": ("fsdp_state_dict_type", ("FULL_STATE_DICT",),
                             "checkpoints are full state dicts gathered to rank 0"),
    "FSDP_SHARDING_STRATEGY": ("fsdp_sharding_strategy", ("FULL_SHARD", "1"),
                               "FSDP2 shards fully; use fsdp_reshard_after_forward"),
    "FSDP_BACKWARD_PREFETCH": ("fsdp_backward_prefetch", ("NO_PREFETCH",), "an FSDP1 option"),
    "FSDP_FORWARD_PREFETCH": ("fsdp_forward_prefetch", ("false",), "an FSDP1 option"),
    "FSDP_USE_ORIG_PARAMS": ("fsdp_use_orig_params", ("true",), "FSDP2 always keeps the original parameters"),
    "FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD": ("fsdp_activation_checkpointing_offload", ("false",),
                                              "activation offload is not implemented"),
    "FSDP_IGNORED_MODULES": ("fsdp_ignored_modules", (), "every parameter of the policy is sharded"),
}
MIXED_PRECISION = {"no": "none", "bf16": "bfloat16", "fp16": "float16"}


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the launcher asked for, checked: the strategy and the settings shiftkit applies."""

    strategy: str  # single | ddp | fsdp
    autocast: str  # none | bfloat16 | float16 (accelerate's mixed_precision)
    cpu: bool = False  # ACCELERATE_USE_CPU
    reshard_after_forward: bool = True
    wrap: str = "TRANSFORMER_BASED_WRAP"  # TRANSFORMER_BASED_WRAP | NO_WRAP
    wrap_classes: tuple[str, ...] = ()  # fsdp_transformer_layer_cls_to_wrap ("" = the model's _no_split_modules)
    activation_checkpointing: bool = False


def _true(env, name: str) -> bool:
    return str(env.get(name, "false")).lower() in ("1", "true", "yes")


def launcher_plan(env=None) -> Plan:
    """Read the launcher's request from ``env`` (``os.environ``); an unsupported setting is an error naming it."""
    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1"))
    for var, key, what in (("ACCELERATE_USE_DEEPSPEED", "distributed_type: DEEPSPEED", "DeepSpeed"),
                           ("ACCELERATE_USE_MEGATRON_LM", "distributed_type: MEGATRON_LM", "Megatron-LM"),
                           ("ACCELERATE_USE_PARALLELISM_CONFIG", "parallelism_config", "tensor/context parallelism")):
        if _true(env, var):
            raise ShiftkitError(f"launcher setting {key} ({var}): {what} is not supported by shiftkit's loops; "
                                "launch with configs/accelerate/fsdp.yaml (FSDP2: parameters, gradients and optimizer "
                                "state sharded) or a multi-GPU (DDP) config")
    if env.get("ACCELERATE_DYNAMO_BACKEND", "NO").upper() not in ("NO", ""):
        raise ShiftkitError(f"launcher setting dynamo_backend={env['ACCELERATE_DYNAMO_BACKEND']} "
                            "(ACCELERATE_DYNAMO_BACKEND): torch.compile is not supported; set dynamo_backend: 'NO'")
    if int(env.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "1") or 1) != 1:
        raise ShiftkitError("launcher setting gradient_accumulation_steps (ACCELERATE_GRADIENT_ACCUMULATION_STEPS) is "
                            "not read: a step is one optimizer update over the whole batch; use token_budget to "
                            "split it into micro-batches")
    mp = str(env.get("ACCELERATE_MIXED_PRECISION", "no")).lower()
    if mp not in MIXED_PRECISION:
        raise ShiftkitError(f"launcher setting mixed_precision={mp} (ACCELERATE_MIXED_PRECISION) is not supported; "
                            "use no, bf16 (autocast=bfloat16) or fp16 (autocast=float16)")
    kw = dict(autocast=MIXED_PRECISION[mp], cpu=_true(env, "ACCELERATE_USE_CPU"))
    if not _true(env, "ACCELERATE_USE_FSDP"):
        return Plan("ddp" if world > 1 else "single", **kw)
    if env.get("FSDP_VERSION", "1") != "2":
        raise ShiftkitError(f"launcher setting fsdp_version={env.get('FSDP_VERSION', '1')} (FSDP_VERSION): FSDP1 is "
                            "not supported; set fsdp_version: 2 (torch fully_shard)")
    if world < 2:
        raise ShiftkitError("launcher setting distributed_type: FSDP with num_processes=1 shards nothing; launch "
                            "with num_processes >= 2, or without the FSDP config")
    for var, (key, ok, why) in FSDP_REFUSED.items():
        if var in env and env[var] not in ok:
            raise ShiftkitError(f"launcher setting {key}={env[var]} ({var}) is not supported ({why})"
                                + (f"; use {key}: {ok[0]}" if ok else f"; remove {key}"))
    raf = str(env.get("FSDP_RESHARD_AFTER_FORWARD", "true")).lower()
    if raf not in ("true", "false"):
        raise ShiftkitError(f"launcher setting fsdp_reshard_after_forward={raf} (FSDP_RESHARD_AFTER_FORWARD): "
                            "use true or false")
    wrap = env.get("FSDP_AUTO_WRAP_POLICY", "NO_WRAP")  # accelerate's default
    if wrap not in ("TRANSFORMER_BASED_WRAP", "NO_WRAP"):
        raise ShiftkitError(f"launcher setting fsdp_auto_wrap_policy={wrap} (FSDP_AUTO_WRAP_POLICY) is not "
                            "supported; use TRANSFORMER_BASED_WRAP (each decoder layer) or NO_WRAP")
    classes = tuple(c.strip() for c in env.get("FSDP_TRANSFORMER_CLS_TO_WRAP", "").split(",") if c.strip())
    return Plan("fsdp", reshard_after_forward=raf == "true", wrap=wrap, wrap_classes=classes,
                activation_checkpointing=_true(env, "FSDP_ACTIVATION_CHECKPOINTING"), **kw)


class Dist:
    """This process's rank, device and strategy. ``Dist(cfg)`` also applies the launcher's settings to
    the run's config (:meth:`apply`) before anything is written."""

    def __init__(self, cfg=None, env=None) -> None:
        env = os.environ if env is None else env
        self.plan = launcher_plan(env)
        self.strategy = self.plan.strategy
        self.world = int(env.get("WORLD_SIZE", "1"))
        self.rank = int(env.get("RANK", "0"))
        cuda = torch.cuda.is_available() and not self.plan.cpu
        local = int(env.get("LOCAL_RANK", 0))
        if cuda and local >= torch.cuda.device_count():
            raise ShiftkitError(f"process {local} of this node has no GPU: {torch.cuda.device_count()} visible; launch "
                                "at most that many processes per node (num_processes) or set CUDA_VISIBLE_DEVICES")
        self.device = torch.device(f"cuda:{local}" if cuda else "cpu")
        if self.world > 1 and not dist.is_initialized():
            from accelerate import PartialState

            PartialState(cpu=not cuda)  # initialises the process group (gloo on CPU, NCCL on GPUs)
        self.frozen = "replicate"
        self._mesh = None
        self._reshard: dict[int, bool] = {}  # id(FSDP module) -> its reshard_after_forward
        if cfg is not None:
            self.apply(cfg)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ---- the launcher's settings on the run's config --------------------------------------------------
    def apply(self, cfg) -> None:
        """Map the launcher's mixed precision onto ``cfg.autocast`` and FSDP activation checkpointing onto
        ``cfg.grad_checkpointing``; refuse what cannot run under this strategy (before anything is written)."""
        p = self.plan
        if p.autocast != "none":
            have = getattr(cfg, "autocast", None)
            if have is None:
                raise ShiftkitError(f"launcher setting mixed_precision ({p.autocast}) is not read by this command")
            if have not in ("none", p.autocast):
                raise ShiftkitError(f"autocast={have} conflicts with the launcher's mixed_precision ({p.autocast}); "
                                    "set one of them")
            cfg.autocast = p.autocast
        if p.activation_checkpointing:
            if not hasattr(cfg, "grad_checkpointing"):
                raise ShiftkitError("launcher setting fsdp_activation_checkpointing is not read by this command")
            cfg.grad_checkpointing = True
        placement = getattr(cfg, "frozen_placement", "auto")
        if placement not in FROZEN_PLACEMENTS:
            raise ShiftkitError(f"frozen_placement must be one of {', '.join(FROZEN_PLACEMENTS)}, got '{placement}'")
        if self.strategy != "fsdp":
            if placement == "shard":
                raise ShiftkitError(f"frozen_placement=shard needs FSDP (this run is {self.strategy}); launch with "
                                    "configs/accelerate/fsdp.yaml or leave frozen_placement=auto")
            return
        self.frozen = "replicate" if placement == "replicate" else "shard"
        if getattr(cfg, "lora_r", 0):
            raise ShiftkitError("lora_r > 0 under FSDP is not supported (the adapters would be sharded with the base); "
                                "launch LoRA runs with a DDP config, or set lora_r=0")
        if getattr(cfg, "rollout_url", ""):
            raise ShiftkitError("rollout_url under FSDP is not supported (the weight sync saves an unsharded policy); "
                                "launch served-rollout runs with a DDP config")

    def summary(self) -> dict:
        """What actually ran, for ``summary.json``."""
        out = {"dist/strategy": self.strategy, "dist/world": self.world, "dist/device": self.device.type}
        if self.strategy == "fsdp":
            out["dist/frozen_placement"] = self.frozen
        return out

    # ---- placement -------------------------------------------------------------------------------------
    def shard(self, items: list) -> list:
        """This rank's share of a global list (strided, so every rank gets the same count if divisible)."""
        return items[self.rank :: self.world]

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The training module: ``model`` itself (one process), a DDP wrapper, or under FSDP ``model``
        sharded in place (make the optimizer *after* this call: the parameters become DTensors)."""
        if self.strategy == "fsdp":
            return self._fully_shard(model)
        if self.world == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=None if self.device.type == "cpu" else [self.device.index])

    def frozen_device(self) -> torch.device:
        """Where to load a frozen model: CPU when it will be sharded (each rank then holds 1/N of it on its
        device), else this rank's device."""
        return torch.device("cpu") if self.frozen == "shard" else self.device

    def place_frozen(self, model):
        """A frozen model (no optimizer) per ``frozen_placement``: sharded under FSDP, else whole on the device.
        The LoRA policy's adapter-off reference (``models.AdapterOff``) is the policy itself: left as is."""
        if model is None or not isinstance(model, torch.nn.Module):
            return model
        model = model.eval().requires_grad_(False)
        return self._fully_shard(model) if self.frozen == "shard" else model.to(self.device)

    def _fully_shard(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        if self._mesh is None:
            self._mesh = init_device_mesh(self.device.type, (self.world,))
        p = self.plan
        names = set(p.wrap_classes)
        if p.wrap == "TRANSFORMER_BASED_WRAP" and not names:
            for m in model.modules():
                names |= set(getattr(m, "_no_split_modules", None) or ())
        layers = [m for m in model.modules() if type(m).__name__ in names] if p.wrap != "NO_WRAP" else []
        if p.wrap != "NO_WRAP" and not layers:
            raise ShiftkitError(f"fsdp_auto_wrap_policy=TRANSFORMER_BASED_WRAP: no module of {type(model).__name__} "
                                f"is a {sorted(names) or 'decoder layer class'}; set fsdp_transformer_layer_cls_to_wrap")
        for m in layers:
            fully_shard(m, mesh=self._mesh, reshard_after_forward=p.reshard_after_forward)
            self._reshard[id(m)] = p.reshard_after_forward
        fully_shard(model, mesh=self._mesh)  # the rest (embeddings, head, final norm); kept gathered after forward
        self._reshard[id(model)] = False
        return model

    # ---- whole weights when the ranks' forwards differ --------------------------------------------------
    @contextlib.contextmanager
    def gathered(self, *models):
        """Inside, the FSDP-sharded ``models`` hold their full parameters (all-gathered once, on entry), so
        each rank may run any number of forwards (sampling, evaluation); resharded on exit. Every rank
        must enter. A no-op for unsharded models."""
        mods = [m for model in models if model is not None for m in _fsdp_modules(model)]
        for m in mods:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        try:
            yield
        finally:
            for m in mods:
                m.reshard()
                m.set_reshard_after_forward(self._reshard.get(id(m), True), recurse=False)

    def main_only(self, fn, *models):
        """``fn()`` on the main rank (None on the others) with ``models`` gathered; every rank must call it."""
        with self.gathered(*models):
            return fn() if self.is_main else None

    def release(self, *models) -> None:
        """Free the gathered root parameters of sharded frozen models after their scoring (local, no collective)."""
        for model in models:
            for m in _fsdp_modules(model) if isinstance(model, torch.nn.Module) else ():
                m.reshard()

    # ---- reductions ----------------------------------------------------------------------------------------
    def sum(self, x: float | torch.Tensor) -> torch.Tensor:
        """Sum over ranks (a CPU float64 scalar/tensor back). The all-reduce runs on this rank's device:
        NCCL rejects CPU tensors."""
        t = torch.as_tensor(x, dtype=torch.float64).detach().clone()
        if self.world > 1:
            t = t.to(self.device)
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.cpu()

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


# ---- full state dicts (checkpoints; every rank calls, under FSDP they are collectives) ---------------------

def full_state_dict(model) -> dict:
    """The model's full state dict on CPU (on rank 0; {} on the others under FSDP)."""
    m = unwrap(model)
    if not _fsdp_modules(m):
        return {k: v.detach().cpu() for k, v in m.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(m, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    seen: set[int] = set()
    for name, p in m.named_parameters(remove_duplicate=False):  # a tied weight once (the HF layout: no lm_head)
        if id(p) in seen:
            state.pop(name, None)
        seen.add(id(p))
    return state


def load_full_state_dict(model, state: dict) -> tuple[list[str], list[str]]:
    """Load a full state dict (every rank holds it) into ``model``, sharded or not; ``(missing, unexpected)``."""
    m = unwrap(model)
    if not _fsdp_modules(m):
        missing, unexpected = m.load_state_dict(state, strict=False)
        return list(missing), list(unexpected)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    keys = set(m.state_dict())
    set_model_state_dict(m, {k: v for k, v in state.items() if k in keys},
                         options=StateDictOptions(full_state_dict=True, strict=False))
    return sorted(keys - set(state)), sorted(set(state) - keys)


def optimizer_state(model, opt) -> dict:
    """The optimizer's full state keyed by parameter name: CPU tensors and plain numbers, the same under
    every strategy and world size (on rank 0; {} on the others under FSDP)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(unwrap(model), opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_optimizer_state(model, opt, state: dict) -> None:
    """Load :func:`optimizer_state` (or a plain ``opt.state_dict()``, keyed by index) into ``opt``."""
    groups = state.get("param_groups") or [{}]
    if any(isinstance(i, int) for i in groups[0].get("params", [])):
        opt.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(unwrap(model), opt, state, options=StateDictOptions(full_state_dict=True))


def _fsdp_modules(model) -> list:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)] if isinstance(model, torch.nn.Module) else []


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") else model
