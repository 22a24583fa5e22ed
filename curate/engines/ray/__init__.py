"""The Ray engine (`engine: {kind: ray, address: ...}`); needs `pip install 'curate[ray]'`.

engine.py      passes as Ray Data `map_batches` over partitions, then each barrier's decision
adapter.py     the Ray Data function that runs one partition through one pass
collective.py  frames as object references, shuffles through files, `Summaries` over spills
exchange.py    Ray tasks for piece functions
placement.py   which node ran each task (markers in staging; the manifest's engine.nodes)
connect.py     reaching a cluster, or starting one of this machine's own on loopback
settle.py      Ray Data's driver threads joined before shutdown, so a run exits 0
"""

from curate.engines.ray.engine import RayEngine

__all__ = ["RayEngine"]
