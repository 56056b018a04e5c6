"""Options more than one command takes, declared once: one flag, one help text.

A command gives the default at its parameter (``inputs: InputsOption = None``). An option that
means something else in another command (``--timeout`` of ``check`` bounds the probe, of
``device run`` the whole job; ``--probe`` of ``rewrite`` probes before and after) is declared by
that command. A command turns its arguments into its options dataclass with :func:`options_from`,
which parses the shared ``--input-shape`` and ``--tolerance`` the one way.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

T = TypeVar("T")


def options_from(
    cls: type[T],
    params: Mapping[str, Any],
    *,
    command: Callable[..., Any],
    elsewhere: Collection[str] = (),
    **given: Any,
) -> T:
    """An options dataclass from a command's arguments (its ``locals()``: the values Typer
    converted, ``Path`` and ``list``; ``ctx.params`` holds them unconverted).

    A field takes the argument of the same name; ``input_shapes`` and ``tolerances`` take
    ``--input-shape`` and ``--tolerance`` parsed (one parser each, whichever command); ``given``
    sets the fields whose command-line form differs otherwise (renamed or derived). A field
    that none of these sets keeps its default. Every argument of ``command`` (the function whose
    ``locals()`` these are) must land somewhere: a field, or one of ``elsewhere`` (the arguments
    the command reads itself or turns into a ``given`` field); any other is a programming error
    (a renamed field would silently fall back to its default), raised as ``TypeError``."""
    from tflkit.compare.tolerances import parse_overrides
    from tflkit.ir.shapes import parse_input_shapes

    values = dict(params)
    if "input_shape" in params:
        values["input_shapes"] = parse_input_shapes(params["input_shape"])
    if "tolerance" in params:
        values["tolerances"] = parse_overrides(params["tolerance"])
    values.update(given)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if not given.keys() <= names:
        raise TypeError(f"{cls.__name__} has no field {sorted(given.keys() - names)}")
    arguments = inspect.signature(command).parameters.keys()
    lost = sorted(set(arguments) - names - {"input_shape", "tolerance"} - set(elsewhere))
    if lost:
        raise TypeError(f"{cls.__name__} has no field for the argument(s) {lost}")
    return cls(**{name: values[name] for name in names & values.keys()})


# --- every command -------------------------------------------------------------------------------

JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
ModelArgument = Annotated[
    Path, typer.Argument(help="Path to a .tflite model or a .litertlm bundle.", show_default=False)
]
OptionalModelArgument = Annotated[
    Path | None, typer.Argument(help="Path to a .tflite model.", show_default=False)
]
InputShapeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input-shape",
        help=(
            "Fix a dynamic input: NAME=D1,D2,... by signature or tensor name (repeatable); "
            "'*=N' sets every other dynamic dimension to N."
        ),
        metavar="NAME=D1,D2",
    ),
]

# --- running a model on inputs: validate, device job|validate, regress record|check|update --------

InputsOption = Annotated[
    Path | None,
    typer.Option(
        "--inputs",
        help=".npy / .npz (N sets on a leading axis) or a folder of images.",
    ),
]
NumInputsOption = Annotated[int, typer.Option("--num-inputs", "-n", help="Generated input sets.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the generated inputs.")]
InputKindOption = Annotated[
    str,
    typer.Option(
        "--input-kind",
        help="realistic (photographs, speech-like audio and its spectrograms, valid indices; "
        "random where nothing fits) or random.",
    ),
]
SignatureOption = Annotated[str | None, typer.Option("--signature", help="Signature key.")]
ReferenceOption = Annotated[
    Path | None,
    typer.Option(
        "--reference",
        help="Keras file, SavedModel dir, reference file (.npz) or the .tflite this model "
        "replaces.",
    ),
]
DelegateOption = Annotated[
    Path | None, typer.Option("--delegate", help="External delegate .so.", show_default=False)
]
HtmlOption = Annotated[
    Path | None,
    typer.Option("--html", help="Write a self-contained HTML report.", show_default=False),
]
RunnerTimeoutOption = Annotated[float, typer.Option("--timeout", help="Seconds per runner.")]

# --- baselines: regress record|check -------------------------------------------------------------

BaselineProbeOption = Annotated[
    bool | None,
    typer.Option(
        "--probe/--no-probe", help="Compile on the real GPU accelerator too.", show_default=False
    ),
]
SuiteOption = Annotated[
    Path | None, typer.Option("--suite", help="A tflkit.toml suite file.", show_default=False)
]
JobsOption = Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel processes.")]
ShardOption = Annotated[
    str | None,
    typer.Option(
        "--shard",
        help="Run shard I of N of the suite's items (e.g. 1/4); `regress merge` joins the N "
        "results files.",
        show_default=False,
    ),
]
ResultsOption = Annotated[
    Path | None,
    typer.Option(
        "--results",
        help="Keep each finished item's result here (a re-run resumes from it; `regress merge` "
        "reads it). Default: .tflkit/ beside the suite, removed once the run is complete.",
        show_default=False,
    ),
]
RuntimeOption = Annotated[
    list[str],
    typer.Option(
        "--runtime",
        help="Run the runners with this runtime, in its own venv built on first use "
        "(ai-edge-litert==2.2.0, ai-edge-litert-nightly, tflite-runtime==2.14.0); repeat it for "
        "a matrix of runtimes.",
        show_default=False,
    ),
]
ClusterOption = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Run the suite's items as Ray tasks on this cluster: ray://HOST:PORT, HOST:PORT or "
        "auto (pip install 'tflkit[ray]').",
        show_default=False,
    ),
]
TriesOption = Annotated[
    int,
    typer.Option(
        "--tries", min=1, help="With --cluster: runs of an item whose node dies before it is lost."
    ),
]
FreshOption = Annotated[
    bool, typer.Option("--fresh", help="Ignore the results of an earlier run; run every item.")
]

# --- devices: device job|run|validate ------------------------------------------------------------

DeviceOption = Annotated[
    list[str],
    typer.Option(
        "--device",
        "-d",
        help="local, adb:SERIAL, ssh:USER@HOST[:PORT], browser[:swiftshader|lavapipe] (this "
        "machine's headless Chromium with LiteRT.js), webdriver:URL (the browser of a W3C "
        "WebDriver session: Appium, a Selenium Grid, a device farm) or a name from devices.toml "
        "(repeat to run on several at once).",
    ),
]
IdentityOption = Annotated[
    Path | None,
    typer.Option("--identity", "-i", help="ssh private key (ssh -i).", show_default=False),
]
SshConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--ssh-config", help="ssh config file (ssh -F; default: yours).", show_default=False
    ),
]
DevicePythonOption = Annotated[
    str | None,
    typer.Option(
        "--device-python",
        help="Python on Linux devices, with numpy and ai-edge-litert (default: python3; "
        "local: this one).",
    ),
]
ThreadsOption = Annotated[int | None, typer.Option("--threads", help="CPU threads on the device.")]
RunsOption = Annotated[int, typer.Option("--runs", help="Timed runs per input set.")]
WarmupOption = Annotated[int, typer.Option("--warmup", help="Warm-up runs.")]
BackendTimeoutOption = Annotated[
    float, typer.Option("--timeout", help="Seconds per backend on the device.")
]
