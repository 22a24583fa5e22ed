"""Pages with boilerplate: navigation bars, cookie notices and footers shared by many
documents, with text of their own between them (seeded, so every test sees the same)."""

from __future__ import annotations

import random
from typing import Any

NAV = ["Home | Products | About us | Contact", "Skip to main content", "Menu"]
COOKIE = "We use cookies to improve your experience. By continuing you accept our policy."
FOOTER = ["Copyright 2024 Example Corp. All rights reserved.", "Terms of use | Privacy"]
RARE = "This line appears in exactly two documents of the corpus."


def pages(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """n documents; most carry shared lines, some only boilerplate (emptied by line_dedup)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        lines: list[str] = []
        if rng.random() < 0.7:
            lines += NAV
        own = [f"Doc {i} line {j}: " + " ".join(f"w{rng.randrange(500)}" for _ in range(8))
               for j in range(rng.randrange(0, 5))]  # fmt: skip
        if i % 17 == 5:
            own = []  # boilerplate only
        lines += own
        if rng.random() < 0.5:
            lines += ["", COOKIE]
        if i in (3, 40):
            lines.append(RARE)
        lines += ["", *FOOTER] if rng.random() < 0.8 else []
        out.append({"id": f"p{i}", "text": "\n".join(lines) or "Only this."})
    return out
