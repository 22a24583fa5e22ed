"""A run's staging folder: what a build writes before it publishes, and how a rerun reuses it.

Read `names.py` first: it draws the folder and names every file in it. A run works in
`<dataset>/.staging-<fingerprint>/` (the store names that folder); each finished partition
leaves a completion record there (`record.py`), which is both the marker a resumed run
trusts and the fragment the driver merges into the manifest. Nothing here imports an
engine or a stage library.
"""
