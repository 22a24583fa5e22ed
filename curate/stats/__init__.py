"""Statistics collected while running: what each stage did, as counts in fixed bins.

- `bins`: the fixed bin schemes (log2 for lengths and tokens, linear for scores);
- `container`: `Stats` (integer sums and histograms) and `Histogram`, merged like counters;
- `measure`: the generic figures the engine takes of every stage call (characters,
  lengths, tokens);
- `document`: the version's `statistics.json`, merged from the partitions' records in
  partition order, and read back.
"""

from curate.stats.bins import LOG2, UNIT, Scheme, linear
from curate.stats.container import Histogram, Stats

__all__ = ["LOG2", "UNIT", "Histogram", "Scheme", "Stats", "linear"]
