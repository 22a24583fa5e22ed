"""The Ray engine (`engine: {kind: ray, address: ...}`); needs `pip install 'curate[ray]'`.

engine.py      passes as Ray Data `map_batches` over partitions, then each barrier's decision
adapter.py     the Ray Data function that runs one partition through one pass
collective.py  frames as object references, and `Summaries` over the spilled summary files
exchange.py    Ray tasks for piece functions, and the shuffle through the object store
"""

from curate.engines.ray.engine import RayEngine

__all__ = ["RayEngine"]
