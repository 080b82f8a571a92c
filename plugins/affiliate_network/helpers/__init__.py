"""Dependency-free helpers of the heavy paths: the exact set of record ids of a pull
(``seen_keys``), the cyclic garbage collector paused around allocation bursts (``gcpause``), the
logger interface of the hook and the job libraries (``tasklog``).

Bottom floor: these modules import nothing of the package but ``exceptions``, and this file
imports nothing.
"""
