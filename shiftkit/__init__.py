"""shiftkit: reuse what reinforcement learning taught one model.

The core (the flat modules and ``tasks/``) is in ranks. A module imports only from its own rank or
lower ones, and the imports form no cycle; ``tests/test_layering.py`` reads this table and enforces both
(imports inside functions count). Function-level imports remain only for optional dependencies and
the command line's lazy loading.

Rank 0, foundation (the standard library and torch)

  errors.py       ShiftkitError: the one user-facing error (what, where, how to fix)
  config.py       typed flat configs: defaults <- file <- key=value, unknown and unread keys are errors
  cliargs.py      the command-line grammar: --config FILE, key=value, --flag aliases, --help with every key
  io.py           JSON(L), atomic writes and directories, progress on a terminal and in a log
  dist.py         the process: torch threads, ranks, sharding, sums over ranks (DDP under accelerate)

Rank 1, data (rows to rendered prompts and rewards; no model)

  tasks/          the toy arithmetic tasks and their exact checkers; math answer checking
  data.py         sources (files, dataset dirs, cached hub ids, arith:) -> examples and SFT rows; DataKeys
  prompts.py      prompt rendering (templates, chat templates) and the padded batch layout; PromptKeys
  rewards.py      the reward registry and TRL-signature reward calls; RewardKeys
  metrics.py      pass@k, avg@k, lengths and truncation
  inputs.py       load and check a run's data, prompts and rewards before anything is written

Rank 2, model primitives

  models.py       load, save and build models and tokenizers; the policy's LoRA and its frozen reference
  sampling.py     the KV-cache sampler with per-row seeds; the teacher-forced forward
  microbatch.py   micro-batches by token budget, exact accumulation, the memory keys (MemoryConfig)
  logprobs.py     log-probs and measures of next-token distributions, chunked over a model's head

Rank 3, math (what to reinforce, how it becomes a gradient)

  advantages.py   group, GAE, whitening, Direct-OPD (direct_opd_signal: the one signal), top-q, adaptive KL
  losses.py       the K-candidate PPO surrogate, KL, value, SFT; Direct-OPD over the whole vocabulary

Rank 4, run machinery

  runs.py         the run directory: config.json, checkpoints and their retention, resume, DONE, trackers
  loopkit.py      the training kit: optimizer, lr, clip and step, rollout, logging, samples, checkpoints
  evaluate.py     greedy accuracy and pass@k; the loops' held-out evaluation; shiftkit eval
  remote.py       the rollout client of a completions server (vLLM, SGLang, shiftkit serve)
  serve.py        shiftkit serve: an OpenAI-compatible completions server for rollouts
  plots.py        PNG plots of metrics

Rank 5, reference loops (nothing in the core imports them)

  sft.py          supervised fine-tuning: SFTConfig + run_sft
  rl.py           GRPO with verifiable rewards: GRPOConfig + run_grpo

Above the core: the method packages ``opd/`` (Direct-OPD), ``sar/`` (SAR editing and merging),
``kernels/`` (the kernel environment) and ``agent/`` (agentic RL, which may use ``kernels/``);
``integrations/`` (TRL); ``recipes/`` (experiments on the library, imported only by the CLI); and
``cli.py`` with each package's ``cli.py``.
"""

__version__ = "0.1.0"
