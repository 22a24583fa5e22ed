"""The analyzer is warm once built (`analyzer._WARM_UP`): what recognizers build on their
first text is built in setup, so the local engine's forked workers inherit it from the
driver instead of each building its own (about 0.09 CPU-s per process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("presidio_analyzer")

PROBE = """
import json
from curate.pii import phone
from curate.pii.analyzer import Analysis, AnalyzerConfig
from curate.stages.pii import DEFAULT_ENTITIES
a = Analysis(AnalyzerConfig(("en",), tuple(DEFAULT_ENTITIES), 0.4))
regions, cold = [], []
for rec in a.engine.registry.recognizers:
    if not set(rec.supported_entities) & set(DEFAULT_ENTITIES):
        continue
    regions += list(getattr(rec, "supported_regions", None) or [])
    cold += [rec.name for p in getattr(rec, "patterns", None) or [] if p.compiled_regex is None]
print(json.dumps({"regions": sorted(set(regions)), "filters": sorted(phone._FILTERS),
                  "areas": sorted(phone._REGIONS), "cold_patterns": cold}))
"""


def test_recognizers_are_warm_once_the_analyzer_is_built() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["regions"]) >= 8
    assert set(out["regions"]) <= set(out["filters"])
    assert set(out["regions"]) <= set(out["areas"])
    # Presidio's IBAN recognizer matches through `regex`'s own cache, not `compiled_regex`
    assert set(out["cold_patterns"]) <= {"IbanRecognizer"}
