"""Presidio imported without torch and Hugging Face transformers, which curate never uses.

`import presidio_analyzer` imports transformers (for its transformers NLP engine and a
spaCy component wrapping a Hugging Face pipeline) and, through thinc, torch, whenever
they are installed: about 6 CPU seconds, in every worker process of every run, where the
analysis itself takes a few seconds per 10 MB. curate builds only Presidio's no-op and
spaCy NLP engines, so while Presidio is imported both are made unimportable
(`sys.modules[name] = None`, which `import` reports as ImportError, the case Presidio and
thinc handle: no transformers pipeline, no torch device); afterwards the names are
importable again for any other code of the process.

torch stays importable when a spaCy plugin that runs torch models is installed
(spacy-transformers, spacy-curated-transformers): thinc decides once per process whether
torch is there, and a transformer-based `spacy_model` needs it to say yes.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager

UNUSED = ("transformers", "torch")
TORCH_SPACY_PLUGINS = ("spacy_transformers", "spacy_curated_transformers")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@contextmanager
def presidio_import() -> Iterator[None]:
    """Within this block, importing Presidio does not import torch or transformers."""
    if "presidio_analyzer" in sys.modules:
        yield
        return
    blocked = [name for name in UNUSED if name not in sys.modules]
    if "torch" in blocked and any(_installed(p) for p in TORCH_SPACY_PLUGINS):
        blocked.remove("torch")
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
