"""``tflkit device list|run|validate``: run models on phones and Linux boards (adb, ssh, local)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import InputShapeOption, JsonOption, ModelArgument
from tflkit.cli.output import console, print_json
from tflkit.errors import UsageError

app = typer.Typer(
    help="Run jobs on devices (adb, ssh, local) and validate models there.",
    no_args_is_help=True,
)

DeviceOption = Annotated[
    list[str],
    typer.Option(
        "--device",
        "-d",
        help="local, adb:SERIAL, ssh:USER@HOST[:PORT] or a name from devices.toml (repeat to "
        "run on several at once).",
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
PythonOption = Annotated[
    str | None,
    typer.Option(
        "--device-python",
        help="Python on Linux devices, with numpy and ai-edge-litert (default: python3; "
        "local: this one).",
        show_default=False,
    ),
]
BackendOption = Annotated[
    list[str],
    typer.Option(
        "--backend",
        "-b",
        help="cpu, gpu_fp16, gpu_fp32, gpu_delegate (Android) (repeat). "
        "Default: cpu, gpu_fp16, gpu_fp32.",
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", help="Seconds per backend on the device.")
]


def _progress(message: str) -> None:
    print(f"tflkit: {message}", file=sys.stderr, flush=True)


def _devices(
    specs: list[str], identity: Path | None, ssh_config: Path | None, python: str | None
) -> list:
    from tflkit.harness.transport import parse_device

    if not specs:
        raise UsageError("give at least one --device (local, adb:SERIAL, ssh:USER@HOST[:PORT])")
    return [parse_device(s, identity=identity, ssh_config=ssh_config, python=python) for s in specs]


@app.command("list")
def list_devices(json_output: JsonOption = False) -> None:
    """This machine, named devices (devices.toml) and adb devices (Android or Linux)."""
    from tflkit.harness.config import config_path, configured_devices
    from tflkit.harness.transport import AdbDevice, DeviceError, adb_devices

    rows = [{"device": "local", "kind": "linux", "state": "ready", "detail": "this machine"}]
    for name, entry in configured_devices().items():
        target = entry["device"]
        rows.append(
            {
                "device": name,
                "kind": None,
                "state": "configured",
                "detail": f"{target} ({config_path()})",
            }
        )
    for target in adb_devices():
        spec = f"adb:{target.serial}"
        row = {"device": spec, "kind": None, "state": target.state, "detail": ""}
        if target.state == "device":
            try:
                device = AdbDevice(target.serial)
                row["kind"] = device.kind
                row["detail"] = device.describe()
            except DeviceError as exc:
                row["detail"] = str(exc)
        else:
            row["detail"] = " ".join(f"{k}:{v}" for k, v in target.details.items())
        rows.append(row)
    if json_output:
        print_json({"schema": "tflkit.device-list/1", "devices": rows})
        return
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("device", "kind", "state", "detail"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["device"], row["kind"] or "-", row["state"], row["detail"])
    console().print(table)
    console().print(
        f"name devices (ssh boards, phones) in {config_path()} to use them as --device NAME"
    )


@app.command("job")
def make_job(
    model: ModelArgument,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The job folder to write (must not exist).")
    ],
    backend: BackendOption = [],  # noqa: B006
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs", help=".npy / .npz (N sets on a leading axis).", show_default=False
        ),
    ] = None,
    num_inputs: Annotated[
        int, typer.Option("--num-inputs", "-n", help="Generated input sets.")
    ] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the generated inputs.")] = 0,
    input_kind: Annotated[
        str, typer.Option("--input-kind", help="realistic or random generated inputs.")
    ] = "realistic",
    input_shape: InputShapeOption = None,
    signature: Annotated[str | None, typer.Option("--signature", help="Signature key.")] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Inputs as raw little-endian buffers, not .npy.")
    ] = False,
    threads: Annotated[
        int | None, typer.Option("--threads", help="CPU threads on the device.")
    ] = None,
    runs: Annotated[int, typer.Option("--runs", help="Timed runs per input set.")] = 1,
    warmup: Annotated[int, typer.Option("--warmup", help="Warm-up runs.")] = 1,
    timeout: TimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Write a job folder (model, input sets, job.json) for `device run` or a harness by hand."""
    from tflkit import ir
    from tflkit.harness.protocol import JobOptions, write_job
    from tflkit.ir.shapes import parse_input_shapes
    from tflkit.validation.inputs import entry_point, make_input_sets

    data, label = ir.serde.read_model_bytes(model)
    loaded = ir.load(data, label=label)
    key, _, _, _ = entry_point(loaded, signature)
    sets = make_input_sets(
        loaded,
        signature=signature,
        source=inputs,
        count=num_inputs,
        seed=seed,
        shapes=parse_input_shapes(input_shape),
        kind=input_kind,
    )
    options = JobOptions(
        backends=tuple(backend) or ("cpu", "gpu_fp16", "gpu_fp32"),
        signature=key,
        threads=threads,
        warmup_runs=warmup,
        timed_runs=runs,
        timeout_seconds=timeout,
        input_format="raw" if raw else "npy",
    )
    path = write_job(output, data, sets.feeds, options)
    if json_output:
        import json

        print_json(
            {
                "schema": "tflkit.device-job/1",
                "path": str(path),
                "job": json.loads((path / "job.json").read_text()),
            }
        )
        return
    console().print(
        f"{path}: {len(sets.feeds)} input sets ({sets.source}), backends "
        f"{', '.join(options.backends)}; run it with `tflkit device run {path} --device ...`"
    )


@app.command("run")
def run(
    job: Annotated[
        Path, typer.Argument(help="A job folder (job.json, model, inputs).", show_default=False)
    ],
    device: DeviceOption = [],  # noqa: B006
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Result folder (several devices: one sub-folder each). Default: JOB.result.",
            show_default=False,
        ),
    ] = None,
    identity: IdentityOption = None,
    ssh_config: SshConfigOption = None,
    device_python: PythonOption = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds for the whole job on each device (push, run, pull); the job's own "
            "timeout_seconds still bounds each backend there.",
        ),
    ] = 1200.0,
    json_output: JsonOption = False,
) -> None:
    """Run a job folder on the device(s) and write the result folder(s)."""
    from tflkit.harness.device_validate import device_slug, run_on_devices

    if not (job / "job.json").is_file():
        raise UsageError(f"{job} is not a job folder (no job.json)")
    devices = _devices(device, identity, ssh_config, device_python)
    out = output or job.with_name(job.name + ".result")
    if out.exists():
        raise UsageError(f"{out} already exists; refusing to overwrite it")
    dests = [out] if len(devices) == 1 else [out / device_slug(d.spec) for d in devices]
    results = run_on_devices(job, devices, dests, timeout=timeout, progress=_progress)
    if json_output:
        print_json(
            {
                "schema": "tflkit.device-run/1",
                "results": [
                    {"device": d.spec, "path": str(r.path), "result": r.document}
                    for d, r in zip(devices, results, strict=True)
                ],
            }
        )
        return
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("device", "backend", "status", "compile s", "mean run s", "ops on accelerator"):
        table.add_column(col)
    failed = False
    for d, r in zip(devices, results, strict=True):
        for b in r.backends.values():
            rec = b.record
            runs = [t for each in rec.get("run_seconds") or [] for t in each]
            mean = f"{sum(runs) / len(runs):.3g}" if runs else "-"
            comp = rec.get("compile_seconds")
            ops = (
                f"{rec['ops_delegated']}/{rec['ops_total']}"
                if b.backend != "cpu"
                and rec.get("ops_total") is not None
                and rec.get("ops_delegated") is not None
                else "-"
            )
            status = b.status if b.status == "ok" else f"[red]{b.status}[/red]: {b.error or ''}"
            failed |= b.status != "ok"
            table.add_row(d.spec, b.backend, status, f"{comp:.3g}" if comp else "-", mean, ops)
    console().print(table)
    console().print(f"results: {', '.join(str(r.path) for r in results)}")
    if failed:
        raise typer.Exit(1)


@app.command("validate")
def validate(
    model: ModelArgument,
    device: DeviceOption = [],  # noqa: B006
    backend: BackendOption = [],  # noqa: B006
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="Keras file, SavedModel dir, or reference bundle (.npz).",
            show_default=False,
        ),
    ] = None,
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs", help=".npy / .npz (N sets on a leading axis).", show_default=False
        ),
    ] = None,
    num_inputs: Annotated[int, typer.Option("--num-inputs", "-n", help="Random input sets.")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    input_kind: Annotated[
        str,
        typer.Option(
            "--input-kind", help="realistic (images, audio, valid indices) or random inputs."
        ),
    ] = "realistic",
    input_shape: InputShapeOption = None,
    signature: Annotated[str | None, typer.Option("--signature", help="Signature key.")] = None,
    tolerance: Annotated[
        list[str],
        typer.Option("--tolerance", help="[PAIR|fp16|fp32|all@]rtol=..,atol=..,min_cosine=.."),
    ] = [],  # noqa: B006
    threads: Annotated[
        int | None, typer.Option("--threads", help="CPU threads on the device.")
    ] = None,
    runs: Annotated[int, typer.Option("--runs", help="Timed runs per input set.")] = 1,
    warmup: Annotated[int, typer.Option("--warmup", help="Warm-up runs.")] = 1,
    keep: Annotated[
        Path | None,
        typer.Option("--keep", help="Keep each device's result folder here.", show_default=False),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write a self-contained HTML report.", show_default=False),
    ] = None,
    identity: IdentityOption = None,
    ssh_config: SshConfigOption = None,
    device_python: PythonOption = None,
    timeout: TimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Run the model on the device(s); compare with the host CPU, the reference, each other."""
    from tflkit.compare.tolerances import parse_overrides
    from tflkit.harness.device_validate import DeviceValidateOptions, device_validate
    from tflkit.ir.shapes import parse_input_shapes

    if html is not None and html.resolve() == model.resolve():
        raise UsageError("refusing to overwrite the input model with a report")
    devices = _devices(device, identity, ssh_config, device_python)
    options = DeviceValidateOptions(
        backends=tuple(backend) or ("cpu", "gpu_fp16", "gpu_fp32"),
        reference=reference,
        inputs=inputs,
        num_inputs=num_inputs,
        seed=seed,
        input_kind=input_kind,
        input_shapes=parse_input_shapes(input_shape),
        signature=signature,
        tolerances=parse_overrides(tolerance),
        threads=threads,
        warmup_runs=warmup,
        timed_runs=runs,
        timeout=timeout,
        keep=keep,
    )
    report = device_validate(model, devices, options, progress=_progress)
    if html is not None:
        from tflkit.report.html import write_html

        write_html(report, html)
    if json_output:
        print_json(report.to_json())
    else:
        from tflkit.report.validate_report import render_terminal

        render_terminal(report, console())
    if not report.passed:
        raise typer.Exit(1)
