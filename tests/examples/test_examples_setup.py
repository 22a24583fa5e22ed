"""On Ray the driver sets up pii for its examples while the engine runs (`fork_setup`)."""

from __future__ import annotations

import pytest

from curate.engines.local import LocalEngine
from curate.engines.tasks import ready
from curate.fork_setup import set_up_for_examples
from curate.recipe import Recipe

pytest.importorskip("presidio_analyzer")
ray_engine = pytest.importorskip("curate.engines.ray", reason="Ray is not installed")


def stages() -> list:
    recipe = Recipe.from_dict(
        {"name": "t", "inputs": ["x.jsonl"], "stages": [{"normalize": {}}, {"pii": {}}]}
    )
    return recipe.build_stages()


def test_a_driver_that_does_not_fork_sets_pii_up_for_its_examples_meanwhile() -> None:
    engine = ray_engine.RayEngine(workers=2)  # not started: it only has to not fork
    thread = set_up_for_examples(engine, stages(), replayed=False, examples=5)
    assert thread is not None
    thread.join()
    fresh = stages()[1]  # an equal pii stage: ready() hands back the one set up meanwhile
    assert ready(fresh) is not fresh


def test_nothing_is_set_up_when_the_examples_do_not_need_it() -> None:
    ray = ray_engine.RayEngine(workers=2)
    assert set_up_for_examples(LocalEngine(2), stages(), False, 5) is None  # forked workers
    assert set_up_for_examples(ray, stages(), True, 5) is None  # pii's output replayed
    assert set_up_for_examples(ray, stages(), False, 0) is None  # no examples
    assert set_up_for_examples(ray, stages()[:1], False, 5) is None  # no pii stage
