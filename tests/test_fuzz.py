"""A short seeded fuzz run: every mutator on a real and a generated model, all four commands.

The long run is ``python -m tests.fuzz.run --count 2000 --seed 1 --report docs/fuzz.md``; this
slice makes each mutator (raw and structured) once on ``deeplabv3`` (real) and
``if_cond`` (three subgraphs) and requires what the long run requires: no crash, hang,
traceback or internal error, every rejection in one ``tflkit: error:`` line, no damaged input,
stray temporary file or unsound output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest_corpus import Corpus
from tests.fuzz import execute, mutators, run

SEED = 1


@pytest.fixture(scope="module")
def seeds(corpus: Corpus, real_models: list[Path]) -> list[run.Seed]:
    real = next(p for p in real_models if p.name == "deeplabv3.tflite")
    execute.preload()
    return [
        run.Seed(real.name, real.read_bytes()),
        run.Seed("if_cond.tflite", corpus.path("if_cond").read_bytes()),
    ]


def test_every_mutator_on_real_and_generated_models(seeds: list[run.Seed], tmp_path: Path) -> None:
    results = []
    for name in sorted(mutators.ALL):
        for index in range(len(seeds)):
            try:
                results.append(run.run_one(seeds, SEED, index, tmp_path, timeout=120.0, only=name))
            except mutators.Skip:
                continue
    bad = [
        f"{r.seed} {r.mutator} ({r.what}): "
        + "; ".join(f"{o.command} {o.kind}: {o.message[:200]}" for o in r.outcomes if o.bad)
        + "; ".join(r.extra)
        for r in results
        if r.bad
    ]
    assert not bad, "\n".join(bad)
    kinds = {o.kind for r in results for o in r.outcomes}
    assert {"ok", "rejected"} <= kinds, kinds
    assert len(results) >= 30
