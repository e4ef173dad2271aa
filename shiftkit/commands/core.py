"""Core commands: world, sft, rl, eval, demo, experiment (filled in by the foundation)."""


def register(sub) -> None:  # noqa: D401
    pass
