"""shiftkit: reuse what reinforcement learning taught one model."""

__version__ = "0.1.0"
