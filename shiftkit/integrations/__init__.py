"""Bridges from shiftkit's math to existing training engines (optional dependencies).

* :mod:`shiftkit.integrations.trl`: Direct-OPD and vanilla OPD as TRL trainers (``pip install 'shiftkit[trl]'``).
"""
