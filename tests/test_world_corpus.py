"""The real third-party corpus: declared tags hold, and the cheap commands hold on every model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus.fetch import world_names, world_tags
from tests.corpus.tags import TAGS, model_tags


def test_declared_tags_match_the_files(world_models: dict[str, Path]) -> None:
    assert sorted(world_models) == sorted(world_names())
    declared = world_tags()
    wrong = {}
    for name, path in world_models.items():
        actual = model_tags(path.read_bytes())
        if actual != declared[name]:
            wrong[name] = (sorted(declared[name]), sorted(actual))
    assert not wrong, f"declared vs measured tags: {wrong}"


@pytest.mark.parametrize("name", world_names())
def test_tags_are_known(name: str) -> None:
    assert world_tags()[name] <= set(TAGS)
