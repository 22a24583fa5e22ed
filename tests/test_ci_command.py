"""`.ci/run` runs exactly README's test command, so what README promises a new engineer is
what CI checks (the apt-get step that brings strace, chromium and fasttext included)."""

from __future__ import annotations

import re

from conftest import REPO


def test_ci_runs_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.DOTALL)
    test_command = next(b for b in blocks if ".venv/bin/pytest" in b)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == test_command
    assert "apt-get install -y strace chromium fasttext" in test_command
    assert "[test,pii,ray,report]" in test_command
