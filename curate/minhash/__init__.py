"""MinHash near-duplicate detection, vectorised: shingles, signatures, LSH bands, verification.

Each module does one job and none imports datasketch: signatures are computed with numpy
and equal datasketch's `MinHash` values bit for bit (the permutation parameters are
datasketch's own, handed in by the stage). The stage that wires them together is
`curate.stages.minhash_dedup`.
"""
