"""The collective operations barriers decide with: frames, their operations, the local frames.

A library that stages use and engines provide pieces for, not engine code: `frame.py` is
the contract (`Frame`, `Summaries`), `local.py` its in-process implementation (used by the
local engine and by `Pipeline`), and the Ray one lives with the Ray engine.
"""
