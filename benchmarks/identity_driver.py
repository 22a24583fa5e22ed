"""Runs the identity check's builds inside the tree under test (one process per engine setting).

Started by benchmarks/identity.py as ``python -P identity_driver.py PLAN.json RESULT.json``
with ``PYTHONPATH=<tree>``, so ``curate`` is that tree's. It is run by file path and
imports nothing from ``benchmarks`` (the tree under test may not have this harness,
and -P keeps benchmarks/tokenize.py from shadowing the standard library's tokenize).
It uses only what every commit has: ``curate.run(path)`` and, for the Ray setting,
``ray.init`` (as tests/engines/test_ray_engine.py starts it; curate's Ray engine uses a
session that is already running), so the Ray start-up is paid once per side, not per
recipe.

For each build the plan names a scratch folder, the files to write there, the recipe
to run (relative to the scratch folder, which is the working directory), and where to
move the scratch folder when done. The scratch path is the same for both commits, so
absolute paths a build records agree between them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path


def main() -> None:
    plan_path, result_path = sys.argv[1:3]
    plan = json.loads(Path(plan_path).read_text())
    started_ray = _start_ray(plan) if plan["engine"] == "ray" else None
    import curate

    results = []
    try:
        for build in plan["builds"]:
            scratch = Path(build["scratch"])
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            for name, text in build["files"].items():
                (scratch / name).parent.mkdir(parents=True, exist_ok=True)
                (scratch / name).write_text(text)
            for name, target in build["links"].items():
                (scratch / name).symlink_to(target, target_is_directory=True)
            os.chdir(scratch)
            t = time.perf_counter()
            try:
                curate.run(build["recipe"])
                outcome = "built"
            except Exception as exc:  # recorded and compared: a failure must fail alike
                outcome = f"error: {type(exc).__name__}: {exc}"
                traceback.print_exc()
            seconds = time.perf_counter() - t
            os.chdir("/")
            dest = Path(build["dest"])
            shutil.rmtree(dest, ignore_errors=True)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(scratch), dest)
            results.append(
                {
                    "name": build["name"],
                    "outcome": outcome,
                    "seconds": seconds,
                    "curate": curate.__file__,
                }
            )
            print(f"    {build['name']}: {outcome} ({seconds:.1f} s)", flush=True)
            Path(result_path).write_text(json.dumps(results, indent=1))
    finally:
        if started_ray is not None:
            import ray

            ray.shutdown()
            shutil.rmtree(started_ray, ignore_errors=True)


def _start_ray(plan: dict) -> str:
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    temp = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths must stay < 108 bytes
    ray.init(
        num_cpus=plan["workers"],
        include_dashboard=False,
        _temp_dir=temp,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}},
    )
    return temp


if __name__ == "__main__":
    main()
