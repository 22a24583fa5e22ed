"""`import curate` and `curate --help` stay light: no Presidio, spaCy, Ray, scipy or torch."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("presidio_analyzer", "spacy", "ray", "scipy", "torch", "datasets", "tokenizers")


def loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('MODULES:', ' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split("MODULES:")[-1].split())


def test_import_curate_is_light() -> None:
    mods = loaded_after("import curate")
    assert not {m for m in mods if m.split(".")[0] in HEAVY}


def test_cli_help_is_light() -> None:
    code = (
        "import sys\nfrom curate.cli import main\nsys.argv=['curate','--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    mods = loaded_after(code)
    assert not {m for m in mods if m.split(".")[0] in HEAVY}
