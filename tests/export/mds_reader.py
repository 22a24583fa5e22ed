"""Reads MDS folders with MosaicML Streaming's own `StreamingDataset` and prints every sample
as one JSON line (its folder; arrays as lists, with their dtype), for tests/export/test_mds.py.

It runs in `.venv-mds`, the virtual environment README's test command makes for streaming
(whose pins, numpy < 2.2, xxhash < 4, transformers < 5, clash with curate's). Its package
imports `streaming.vision`, whose torchvision has no wheel for the CPU build of torch on
PyPI (the PyPI build needs CUDA's libtorch); the vision datasets are not what is tested, so
that one module is left out. `--check` only imports `StreamingDataset`.
"""

import json
import sys
import types

sys.modules["streaming.vision"] = types.ModuleType("streaming.vision")

from streaming import StreamingDataset  # noqa: E402


def main() -> None:
    if sys.argv[1] == "--check":
        print(f"StreamingDataset imports: {StreamingDataset.__module__}")
        return
    for folder in sys.argv[1:]:  # one process for every folder: importing torch takes seconds
        ds = StreamingDataset(local=folder, shuffle=False, batch_size=1, validate_hash="xxh3_128")
        for i in range(len(ds)):
            out = {}
            for key, value in ds[i].items():
                if hasattr(value, "dtype"):
                    out[key] = {"dtype": str(value.dtype), "values": value.tolist()}
                else:
                    out[key] = value
            print(json.dumps({"folder": folder, "sample": out}))


if __name__ == "__main__":
    main()
