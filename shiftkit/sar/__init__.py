"""SAR (Subspace-Aligned Rewiring, arXiv 2607.03065): spectral edits and merges of RL checkpoints.

- :mod:`shiftkit.sar.linalg`: the pure tensor math (rank specs, randomized SVD, base subspaces, the edit)
- :mod:`shiftkit.sar.reference`: plain transcription of the official script (golden reference)
- :mod:`shiftkit.sar.edit`: one matrix's fast edit, sweeps, the base-decomposition cache
- :mod:`shiftkit.sar.merge`: registered merge methods (sar, task_arithmetic, ties, dare_ties, dare_linear)
- :mod:`shiftkit.sar.checkpoint`: streaming sharded safetensors reader/writer
- :mod:`shiftkit.sar.pipeline`: extract / apply / sweep / merge over checkpoints, core files, PEFT export
- :mod:`shiftkit.sar.cli`: ``shiftkit sar extract|apply|merge|sweep|export-peft``
"""
