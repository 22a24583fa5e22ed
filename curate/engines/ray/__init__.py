"""The Ray engine (`engine: {kind: ray, address: ...}`); needs `pip install 'curate[ray]'`.

engine.py      passes as Ray Data `map_batches` over partitions; decisions on the driver
adapter.py     the Ray Data function that runs one partition through one pass
collective.py  `Summaries` over the spilled summary files, with Ray tasks
exchange.py    the hash shuffle through Ray's object store those operations use
"""

from curate.engines.ray.engine import RayEngine

__all__ = ["RayEngine"]
