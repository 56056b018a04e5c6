"""Shared pytest plugins: the model corpus, the GPU fixture and the built package."""

pytest_plugins = [
    "tests.conftest_corpus",
    "tests.gpu_fixture",
    "tests.package_fixtures",
    "pytester",
]
