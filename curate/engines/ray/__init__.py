"""The Ray engine (`engine: {kind: ray, address: ...}`); needs `pip install 'curate[ray]'`.

engine.py      passes as one Ray task per partition, then each barrier's decision
adapter.py     the task body that runs one partition through one pass
collective.py  frames as object references, shuffles through files, `Summaries` over spills
exchange.py    Ray tasks for piece functions
placement.py   which node ran each task (markers in staging; the manifest's engine.nodes)
connect.py     reaching a cluster, or starting one of this machine's own on loopback
"""

from curate.engines.ray.engine import RayEngine

__all__ = ["RayEngine"]
