"""Shared pytest plugins: the model corpus and the GPU fixture."""

pytest_plugins = ["tests.conftest_corpus", "tests.gpu_fixture", "pytester"]
