"""``tflkit device list|run|validate``: run models on phones and Linux boards (adb, ssh, local)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import (
    BackendTimeoutOption,
    DeviceOption,
    DevicePythonOption,
    HtmlOption,
    IdentityOption,
    InputKindOption,
    InputShapeOption,
    InputsOption,
    JsonOption,
    ModelArgument,
    NumInputsOption,
    ReferenceOption,
    RunsOption,
    RuntimeOption,
    SeedOption,
    SignatureOption,
    SshConfigOption,
    ThreadsOption,
    WarmupOption,
    options_from,
)
from tflkit.cli.output import console, print_json, show_validation
from tflkit.cli.runner_options import BackendOption, ToleranceOption
from tflkit.errors import UsageError

app = typer.Typer(
    help="Run jobs on devices (adb, ssh, local) and validate models there.",
    no_args_is_help=True,
)


def _progress(message: str) -> None:
    print(f"tflkit: {message}", file=sys.stderr, flush=True)


ViaOption = Annotated[
    str | None,
    typer.Option(
        "--via",
        help="adb devices: 'browser' runs the job with LiteRT.js in the device's browser (served "
        "from here through adb reverse), 'app' in the native harness (the tflkit app on Android, "
        "the Linux harness on Linux). Default: the native harness, or the browser on an Android "
        "phone without the tflkit app. webdriver devices: 'page' (the browser opens the job page "
        "from here) or 'session' (everything goes through the WebDriver session; the default "
        "when the server is elsewhere and no --public-url is given).",
    ),
]
HostOption = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="--device url or webdriver:URL: the interface the job is served on (default "
        "127.0.0.1: this machine only, or through adb reverse / ssh -R / a tunnel); 0.0.0.0 makes "
        "the model reachable on the network (with the job's token) while the job runs. "
        "webdriver:URL takes HOST:PORT too (the port a tunnel forwards to).",
    ),
]
CapabilitiesOption = Annotated[
    Path | None,
    typer.Option(
        "--capabilities",
        help="--device webdriver:URL: a JSON file of W3C capabilities, merged into the new "
        "session's alwaysMatch (browserName, goog:chromeOptions, appium:..., a farm's options).",
        show_default=False,
    ),
]
PublicUrlOption = Annotated[
    str | None,
    typer.Option(
        "--public-url",
        help="--device webdriver:URL: the URL the remote browser reaches this machine's job "
        "server by (a tunnel to it, or http://LAN-ADDRESS:PORT with --host 0.0.0.0); the job's "
        "token is added to its path. The server listens on this URL's port unless --host "
        "HOST:PORT names another.",
        show_default=False,
    ),
]


def _runtime_devices(specs: list[str]) -> list:
    """This machine once per ``--runtime``: the Linux harness with that runtime's venv Python
    (built on first use), named ``runtime:DIST==VERSION``."""
    from tflkit.harness.transport import LocalDevice
    from tflkit.regress.runtimes import ensure_runtime, parse_runtime

    for spec in specs:
        parse_runtime(spec)
    envs = [ensure_runtime(spec) for spec in specs]
    return [LocalDevice(str(env.python), spec=f"runtime:{env.label}") for env in envs]


def _devices(
    specs: list[str],
    identity: Path | None,
    ssh_config: Path | None,
    python: str | None,
    via: str | None = None,
    host: str | None = None,
    capabilities: Path | None = None,
    public_url: str | None = None,
) -> list:
    from tflkit.harness.browser.device import device_from_spec
    from tflkit.harness.browser.remote import remote_device
    from tflkit.harness.browser.webdriver_device import MODES, webdriver_devices

    drivers = webdriver_devices(
        specs, capabilities=capabilities, via=via, public_url=public_url, host=host
    )
    if drivers:  # the others as usual, with the options that are theirs
        rest = [s for s in specs if s not in drivers]
        via = None if via in MODES else via
        host = host if "url" in rest else None
        made = iter(_devices(rest, identity, ssh_config, python, via, host) if rest else [])
        return [drivers[s] if s in drivers else next(made) for s in specs]
    if capabilities is not None or public_url is not None:
        raise UsageError("--capabilities and --public-url are for --device webdriver:URL")
    if host is not None and "url" not in specs:
        raise UsageError("--host is for --device url")
    if via is not None and not any(s.startswith("adb:") for s in specs):
        raise UsageError("--via is for --device adb:SERIAL")
    remote = {
        s: remote_device(
            s, via=via, host=host if s == "url" else None, python=python, progress=_progress
        )
        for s in specs
    }
    if any(remote.values()):
        return [
            remote[s]
            or device_from_spec(s, identity=identity, ssh_config=ssh_config, python=python)
            for s in specs
        ]
    if not specs:
        raise UsageError(
            "give at least one --device (local, adb:SERIAL, ssh:USER@HOST[:PORT], browser, "
            "webdriver:URL)"
        )
    return [
        device_from_spec(s, identity=identity, ssh_config=ssh_config, python=python) for s in specs
    ]


@app.command("list")
def list_devices(json_output: JsonOption = False) -> None:
    """This machine, named devices (devices.toml) and adb devices (Android or Linux)."""
    from tflkit.harness.adb import AdbDevice, adb_devices
    from tflkit.harness.config import config_path, configured_devices
    from tflkit.harness.transport import DeviceError

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
    from tflkit.report.device_report import render_device_list

    render_device_list(rows, config_path(), console())


@app.command("job")
def make_job(
    model: ModelArgument,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The job folder to write (must not exist).")
    ],
    backend: BackendOption = [],  # noqa: B006
    inputs: InputsOption = None,
    num_inputs: NumInputsOption = 4,
    seed: SeedOption = 0,
    input_kind: InputKindOption = "realistic",
    input_shape: InputShapeOption = None,
    signature: SignatureOption = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Inputs as raw little-endian buffers, not .npy.")
    ] = False,
    threads: ThreadsOption = None,
    runs: RunsOption = 1,
    warmup: WarmupOption = 1,
    timeout: BackendTimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Write a job folder (model, input sets, job.json) for `device run` or a harness by hand."""
    from tflkit import ir
    from tflkit.delegates.device_protocol import JobOptions, write_job
    from tflkit.harness.device_validate import DEFAULT_BACKENDS
    from tflkit.ir.entry import entry_point
    from tflkit.ir.shapes import parse_input_shapes
    from tflkit.validation.inputs import make_input_sets

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
        backends=tuple(backend) or DEFAULT_BACKENDS,
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
    from tflkit.report.device_report import render_job

    render_job(path, sets, options, console())


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
        ),
    ] = None,
    identity: IdentityOption = None,
    ssh_config: SshConfigOption = None,
    device_python: DevicePythonOption = None,
    via: ViaOption = None,
    host: HostOption = None,
    capabilities: CapabilitiesOption = None,
    public_url: PublicUrlOption = None,
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
    """Run a job folder on the device(s) and write the result folder(s); a device that fails
    does not stop the others (their results are written, then exit code 4)."""
    from tflkit.harness.device_runs import device_run_results
    from tflkit.harness.device_validate import device_slug, run_each
    from tflkit.harness.transport import DeviceError

    if not (job / "job.json").is_file():
        raise UsageError(f"{job} is not a job folder (no job.json)")
    devices = _devices(
        device, identity, ssh_config, device_python, via, host, capabilities, public_url
    )
    out = output or job.with_name(job.name + ".result")
    if out.exists():
        raise UsageError(f"{out} already exists; refusing to overwrite it")
    dests = [out] if len(devices) == 1 else [out / device_slug(d.spec) for d in devices]
    outcomes = run_each(job, devices, dests, timeout=timeout, progress=_progress)
    failed = [(d, o) for d, o in zip(devices, outcomes, strict=True) if isinstance(o, DeviceError)]
    if len(failed) == len(devices):
        raise DeviceError("; ".join(str(e) for _, e in failed))
    ran = [(d, o) for d, o in zip(devices, outcomes, strict=True) if not isinstance(o, DeviceError)]
    runners = [run for d, r in ran for run in device_run_results(r, d.spec)]
    if json_output:
        from tflkit.report.speed_report import speed_json

        print_json(
            {
                "schema": "tflkit.device-run/1",
                "results": [
                    {"device": d.spec, "path": str(r.path), "result": r.document} for d, r in ran
                ]
                + [{"device": d.spec, "error": str(e)} for d, e in failed],
                "speed": speed_json(runners),
            }
        )
    else:
        from tflkit.report.device_report import render_device_run

        devs, results = [d for d, _ in ran], [r for _, r in ran]
        if render_device_run(devs, results, runners, console()) and not failed:
            raise typer.Exit(1)
    if failed:
        raise DeviceError("; ".join(str(e) for _, e in failed))


@app.command("validate")
def validate(
    model: ModelArgument,
    device: DeviceOption = [],  # noqa: B006
    backend: BackendOption = [],  # noqa: B006
    reference: ReferenceOption = None,
    inputs: InputsOption = None,
    num_inputs: NumInputsOption = 4,
    seed: SeedOption = 0,
    input_kind: InputKindOption = "realistic",
    input_shape: InputShapeOption = None,
    signature: SignatureOption = None,
    tolerance: ToleranceOption = [],  # noqa: B006
    threads: ThreadsOption = None,
    runs: RunsOption = 1,
    warmup: WarmupOption = 1,
    keep: Annotated[
        Path | None,
        typer.Option("--keep", help="Keep each device's result folder here.", show_default=False),
    ] = None,
    html: HtmlOption = None,
    identity: IdentityOption = None,
    ssh_config: SshConfigOption = None,
    device_python: DevicePythonOption = None,
    via: ViaOption = None,
    host: HostOption = None,
    capabilities: CapabilitiesOption = None,
    public_url: PublicUrlOption = None,
    runtime: RuntimeOption = [],  # noqa: B006
    timeout: BackendTimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Run the model on the device(s); compare with the host CPU, the reference, each other."""
    from tflkit.harness.device_validate import DeviceValidateOptions, device_validate

    if html is not None and html.resolve() == model.resolve():
        raise UsageError("refusing to overwrite the input model with a report")
    devices = (
        _devices(device, identity, ssh_config, device_python, via, host, capabilities, public_url)
        if device
        else []
    )
    devices += _runtime_devices(runtime)
    options = options_from(
        DeviceValidateOptions,
        locals(),
        command=validate,
        elsewhere=(
            "model",
            "device",
            "backend",
            "runs",
            "warmup",
            "html",
            "identity",
            "ssh_config",
            "device_python",
            "via",
            "host",
            "capabilities",
            "public_url",
            "runtime",
            "json_output",
        ),
        backends=tuple(backend),
        warmup_runs=warmup,
        timed_runs=runs,
    )
    report = device_validate(model, devices, options, progress=_progress)
    show_validation(report, html=html, json_output=json_output)


@app.command("setup")
def setup(
    device: Annotated[
        str,
        typer.Argument(
            help="adb:SERIAL, ssh:USER@HOST[:PORT] or a name from devices.toml (a Linux device).",
        ),
    ],
    device_python: Annotated[
        str | None,
        typer.Option(
            "--device-python",
            help="The device's Python that builds the venv (default: python3).",
        ),
    ] = None,
    workdir: Annotated[
        str | None,
        typer.Option(
            "--workdir",
            help="Folder on the device for the venv (DIR/venv; default ~/.local/share/tflkit).",
        ),
    ] = None,
    identity: IdentityOption = None,
    ssh_config: SshConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """Build a venv with ai-edge-litert and numpy on a Linux device (wheels from this host, no
    network there) and record its Python in devices.toml for later jobs."""
    from tflkit.harness.config_write import record_python
    from tflkit.harness.device_spec import parse_device
    from tflkit.harness.setup import setup_device

    target = parse_device(device, identity=identity, ssh_config=ssh_config)
    result, _ = setup_device(target, python=device_python, workdir=workdir, progress=_progress)
    result.config = record_python(
        device,
        target.spec,
        result.python,
        identity=identity,
        ssh_config=ssh_config,
        note=f"tflkit device setup: ai-edge-litert {result.versions['ai-edge-litert']} venv",
    )
    if json_output:
        print_json(result.document())
        return
    config = result.config
    where = ", ".join(f"[{n}]" for n in config["entries"])
    print(
        f"{result.device}: ready: {result.python} (ai-edge-litert "
        f"{result.versions['ai-edge-litert']}, numpy {result.versions['numpy']}) on "
        f"{result.target.label}"
    )
    print(f"{config['action']} {where} in {config['path']}: later jobs use it with no flag")
