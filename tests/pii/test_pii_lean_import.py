"""Presidio is imported without torch and transformers (`curate.pii.lean`), which cost
about 6 CPU seconds per process and which curate's no-op and spaCy engines never use;
afterwards both stay importable for any other code of the process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

pytest.importorskip("presidio_analyzer")

PROBE = """
import json, sys
from curate.pii.analyzer import Analysis, AnalyzerConfig
a = Analysis(AnalyzerConfig(("en",), ("EMAIL_ADDRESS", "PHONE_NUMBER"), 0.4))
found = [(s.start, s.end, s.entity) for s in a.analyze("mail a.b@example.org or call +44 20 7946 0958")[0]]
loaded = {name: name in sys.modules for name in ("torch", "transformers", "presidio_analyzer")}
importable = {}
for name in ("torch", "transformers"):
    try:
        __import__(name)
        importable[name] = True
    except ImportError:
        importable[name] = False
print(json.dumps({"found": found, "loaded": loaded, "importable": importable}))
"""


def test_presidio_imported_without_torch_and_transformers() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["found"] == [[5, 20, "EMAIL_ADDRESS"], [29, 45, "PHONE_NUMBER"]]
    assert out["loaded"] == {"torch": False, "transformers": False, "presidio_analyzer": True}
    for name in ("torch", "transformers"):  # blocked only while Presidio was imported
        assert out["importable"][name] == (importlib.util.find_spec(name) is not None)


CHECKS = """
import json, regex
compiled = []
real = regex.compile
regex.compile = lambda pattern, *a, **k: compiled.append(pattern) or real(pattern, *a, **k)
from curate.pii.analyzer import Analysis, AnalyzerConfig
from curate.pii import lean
with lean.presidio_import():
    import presidio_analyzer
during_import = len(compiled)
regex.compile = real
from presidio_analyzer import Pattern
try:
    Pattern("broken", "(", 0.5)
    checked_after = False
except ValueError:
    checked_after = True
a = Analysis(AnalyzerConfig(("en",), ("EMAIL_ADDRESS", "PHONE_NUMBER"), 0.4))
found = [(s.start, s.end, s.entity) for s in a.analyze("mail a.b@example.org or call +44 20 7946 0958")[0]]
print(json.dumps({"during_import": during_import, "checked_after": checked_after, "found": found}))
"""


def test_presidio_s_own_patterns_are_not_compiled_at_import_and_later_ones_are_checked() -> None:
    """Importing Presidio built ~170 patterns of every country's recognizers, each compiled
    once only to check it (0.35 CPU-s before the workers fork); `lean` skips that check
    during the import and restores it, so a pattern made afterwards is checked."""
    proc = subprocess.run(
        [sys.executable, "-c", CHECKS], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["during_import"] == 0
    assert out["checked_after"] is True
    assert out["found"] == [[5, 20, "EMAIL_ADDRESS"], [29, 45, "PHONE_NUMBER"]]


CLI = """
import json, sys
from curate.pii.analyzer import Analysis, AnalyzerConfig
a = Analysis(AnalyzerConfig(("en",), ("EMAIL_ADDRESS", "PHONE_NUMBER"), 0.4))
found = [(s.start, s.end, s.entity) for s in a.analyze("mail a.b@example.org or call +44 20 7946 0958")[0]]
out = {"found": found, "cli_loaded": [m for m in ("spacy.cli", "spacy.cli.info", "typer", "weasel") if m in sys.modules]}
import spacy
info = spacy.info(markdown=False, silent=True)  # spaCy's CLI imported now, when asked
import spacy.cli
out.update(info_version=info.get("spacy_version"), spacy_version=spacy.__version__,
           download=callable(getattr(spacy.cli, "download", None)), cli_file=spacy.cli.__file__)
print(json.dumps(out))
"""


def test_spacy_s_command_line_is_not_imported_with_presidio_and_still_works() -> None:
    """spaCy's package imports its CLI (typer, weasel: ~0.15 CPU-s, 200 modules) for
    `spacy.info`; while Presidio is imported it is a placeholder, and afterwards the real
    `spacy.cli` imports, and `spacy.info` works, when asked."""
    proc = subprocess.run([sys.executable, "-c", CLI], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["found"] == [[5, 20, "EMAIL_ADDRESS"], [29, 45, "PHONE_NUMBER"]]
    assert out["cli_loaded"] == []
    assert out["info_version"] == out["spacy_version"]
    assert out["download"] is True and out["cli_file"].endswith("__init__.py")
