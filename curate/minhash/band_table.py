"""datasketch's choice of LSH (bands, rows), precomputed for the thresholds users write.

`datasketch.lsh._optimal_param` integrates false positive and negative probabilities with
scipy, and importing it (datasketch, then scipy.integrate) takes about a second: paid by
every process that only needs the band shape, such as a rerun whose MinHash signatures
come from the stage cache, where it was a tenth of a tokenizer-only rerun's wall time.
This table holds its answers for the default false-negative weight, thresholds 0.01 to
0.99 in steps of 0.01 and 64, 128 or 256 permutations, as datasketch 2.0.0 gives them
(`tests/minhash/test_band_table.py` checks them against datasketch); any other case, or
another datasketch version, asks datasketch.
"""

from __future__ import annotations

DATASKETCH = "2.0.0"
"""The datasketch version these answers are from."""

FN_WEIGHT = 0.98
"""The false-negative weight they are for (the stage's default)."""

THRESHOLDS = tuple(float(f"{i / 100:.2f}") for i in range(1, 100))
"""The thresholds, as a recipe's YAML reads them (0.07 is the float `0.07`)."""

# fmt: off
BANDS: dict[int, tuple[tuple[int, int], ...]] = {
    64: (
        (64, 1), (64, 1), (64, 1), (64, 1), (64, 1), (64, 1), (64, 1), (64, 1), (61, 1),
        (54, 1), (49, 1), (45, 1), (41, 1), (38, 1), (35, 1), (32, 1), (30, 1), (28, 1),
        (27, 1), (25, 1), (24, 1), (22, 1), (21, 1), (20, 1), (19, 1), (18, 1), (18, 1),
        (17, 1), (16, 1), (32, 2), (32, 2), (32, 2), (32, 2), (32, 2), (32, 2), (32, 2),
        (32, 2), (31, 2), (29, 2), (27, 2), (26, 2), (25, 2), (23, 2), (22, 2), (21, 2),
        (20, 2), (19, 2), (18, 2), (17, 2), (16, 2), (21, 3), (21, 3), (21, 3), (21, 3),
        (21, 3), (21, 3), (21, 3), (21, 3), (19, 3), (18, 3), (17, 3), (16, 3), (15, 3),
        (16, 4), (16, 4), (16, 4), (16, 4), (16, 4), (16, 4), (16, 4), (14, 4), (14, 4),
        (13, 4), (12, 5), (12, 5), (12, 5), (12, 5), (12, 5), (11, 5), (10, 6), (10, 6),
        (10, 6), (10, 6), (9, 7), (9, 7), (9, 7), (8, 8), (8, 8), (7, 9), (7, 9),
        (6, 10), (6, 10), (5, 12), (5, 12), (4, 14), (4, 16), (4, 16), (3, 21), (2, 32),
    ),
    128: (
        (128, 1), (128, 1), (128, 1), (128, 1), (113, 1), (93, 1), (79, 1), (69, 1), (61, 1),
        (54, 1), (49, 1), (45, 1), (41, 1), (38, 1), (35, 1), (32, 1), (30, 1), (28, 1),
        (27, 1), (25, 1), (24, 1), (64, 2), (64, 2), (64, 2), (64, 2), (64, 2), (64, 2),
        (59, 2), (55, 2), (51, 2), (48, 2), (45, 2), (42, 2), (39, 2), (37, 2), (35, 2),
        (33, 2), (31, 2), (29, 2), (27, 2), (42, 3), (42, 3), (42, 3), (42, 3), (42, 3),
        (42, 3), (41, 3), (39, 3), (36, 3), (34, 3), (32, 3), (30, 3), (28, 3), (26, 3),
        (32, 4), (32, 4), (32, 4), (32, 4), (32, 4), (31, 4), (29, 4), (27, 4), (25, 4),
        (24, 4), (25, 5), (25, 5), (25, 5), (25, 5), (25, 5), (23, 5), (21, 5), (21, 6),
        (21, 6), (21, 6), (21, 6), (19, 6), (18, 7), (18, 7), (18, 7), (17, 7), (16, 8),
        (16, 8), (16, 8), (14, 9), (14, 9), (13, 9), (12, 10), (11, 11), (11, 11), (10, 12),
        (9, 13), (9, 14), (8, 16), (8, 16), (7, 18), (6, 21), (5, 25), (4, 32), (3, 42),
    ),
    256: (
        (256, 1), (256, 1), (191, 1), (142, 1), (113, 1), (93, 1), (79, 1), (69, 1), (61, 1),
        (54, 1), (49, 1), (45, 1), (41, 1), (38, 1), (35, 1), (128, 2), (128, 2), (128, 2),
        (128, 2), (120, 2), (108, 2), (98, 2), (90, 2), (82, 2), (75, 2), (70, 2), (64, 2),
        (59, 2), (55, 2), (51, 2), (48, 2), (45, 2), (85, 3), (85, 3), (85, 3), (85, 3),
        (85, 3), (81, 3), (74, 3), (69, 3), (64, 3), (59, 3), (55, 3), (51, 3), (47, 3),
        (44, 3), (64, 4), (64, 4), (64, 4), (64, 4), (63, 4), (58, 4), (53, 4), (49, 4),
        (46, 4), (42, 4), (51, 5), (51, 5), (51, 5), (51, 5), (48, 5), (44, 5), (41, 5),
        (42, 6), (42, 6), (42, 6), (42, 6), (40, 6), (37, 6), (36, 7), (36, 7), (36, 7),
        (35, 7), (32, 7), (32, 8), (32, 8), (31, 8), (28, 9), (28, 9), (28, 9), (25, 10),
        (25, 10), (23, 11), (23, 11), (21, 12), (21, 12), (19, 13), (18, 14), (17, 15), (16, 16),
        (15, 17), (14, 18), (12, 20), (11, 23), (10, 25), (9, 28), (7, 36), (6, 42), (4, 64),
    ),
}
# fmt: on
"""Per permutation count, (bands, rows) for each of `THRESHOLDS`, in order."""


def known(
    threshold: float, num_perm: int, fn_weight: float, datasketch: str
) -> tuple[int, int] | None:
    """The precomputed (bands, rows), or None when the table does not hold this case."""
    if datasketch != DATASKETCH or fn_weight != FN_WEIGHT or num_perm not in BANDS:
        return None
    try:
        return BANDS[num_perm][THRESHOLDS.index(threshold)]
    except ValueError:
        return None
