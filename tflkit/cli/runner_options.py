"""Options whose help texts name the runner registry's runners: the commands that run models
take them (``validate``, ``device``, ``regress``). Apart from :mod:`tflkit.cli.options` so that a
command that runs none (``check``, ``inspect``, ``rewrite``...) does not import the registry.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated

import typer

from tflkit.delegates.backends import RECORD_BACKENDS
from tflkit.delegates.base import RECORD_DEFAULT, RUNNER_SPECS, RunnerPair, find_spec, spec_names


def listed(names: Collection[str | None], last: str = "or") -> str:
    """``a, b or c``: names of the registry for a help text."""
    words = [str(n) for n in names]
    if not last or len(words) < 2:
        return ", ".join(words)
    return ", ".join(words[:-1]) + f" {last} " + words[-1]


#: the device protocol's backends (the registry's harness names): of a device, of the browser,
#: and those a device job runs by default
_HARNESS = {
    "device": [s.harness for s in RUNNER_SPECS if s.harness and s.device != "browser"],
    "browser": [s.harness for s in RUNNER_SPECS if s.harness and s.device == "browser"],
    "record": list(RECORD_BACKENDS),
}
#: an example pair for the help texts: the GPU in fp16 against the CPU
EXAMPLE_PAIR = RunnerPair(find_spec(device="gpu", precision="fp16").id, find_spec(harness="cpu").id)

ToleranceOption = Annotated[
    list[str],
    typer.Option(
        "--tolerance",
        help="[PAIR|CLASS|all@]rtol=..,atol=..,min_cosine=..,noise_factor=..;"
        " CLASS: fp32, fp16, int8, int8-fp16, int8-same-grid "
        f"(e.g. {EXAMPLE_PAIR}@noise_factor=128)",
    ),
]
BaselineRunnerOption = Annotated[
    list[str],
    typer.Option(
        "--runner",
        "-r",
        help=f"{listed(spec_names(device='cpu') + spec_names(device='gpu'), '')}, "
        f"{spec_names(device='external')[0]} (repeat). Record default: "
        f"{listed(RECORD_DEFAULT, '')}; check default: the baseline's.",
    ),
]
BaselineToleranceOption = Annotated[
    list[str],
    typer.Option(
        "--tolerance",
        help="[RUNNER|fp16|fp32|all@]rtol=..,atol=..,min_cosine=.. "
        f"(e.g. {EXAMPLE_PAIR.actual}@rtol=0.01)",
    ),
]
BackendOption = Annotated[
    list[str],
    typer.Option(
        "--backend",
        "-b",
        help=f"{listed(_HARNESS['device'], '')} (the last: Android); "
        f"{listed(_HARNESS['browser'], '')} (browser) (repeat). Default: "
        f"{listed(_HARNESS['record'], '')}; on a browser: the three browser ones.",
    ),
]
