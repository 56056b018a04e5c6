"""``tflkit converters``: build the ONNX and PyTorch converter environments ahead of time.

``convert`` builds a missing environment on first use; ``install`` does it before (e.g. in a CI
job that caches ``$XDG_CACHE_HOME/tflkit/converters``, or ``$TFLKIT_CONVERTERS_DIR``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from tflkit.cli.options import JsonOption

app = typer.Typer(
    help="The isolated environments of the ONNX (onnx2tf) and PyTorch (litert-torch) converters.",
    no_args_is_help=True,
)

SCHEMA = "tflkit.converters/1"


@app.command("install")
def install(
    routes: Annotated[
        list[str],
        typer.Argument(help="onnx, torch (default: both).", show_default=False),
    ] = [],  # noqa: B006
    base_python: Annotated[
        str | None,
        typer.Option(
            "--base-python",
            help="Interpreter to base the venv on (default: this Python, else python3.N on PATH).",
        ),
    ] = None,
) -> None:
    """Build the converter environments now (reused by every later convert)."""
    from tflkit.converters.envs import ROUTES, ensure_env, find_env
    from tflkit.errors import UsageError
    from tflkit.report.convert_report import converter_env_line

    unknown = sorted(set(routes) - set(ROUTES))
    if unknown:
        raise UsageError(f"unknown converter(s) {unknown}; known: {', '.join(ROUTES)}")
    for route in routes or list(ROUTES):
        had = base_python is None and find_env(route) is not None
        env = ensure_env(route, base_python=base_python)
        typer.echo(("already installed: " if had else "installed: ") + converter_env_line(env))


@app.command("list")
def list_envs(json_output: JsonOption = False) -> None:
    """What each route needs, and the environments built so far."""
    from tflkit.cli.output import print_json
    from tflkit.converters.envs import ROUTES, converters_dir, find_env, installed_envs

    current = {route: find_env(route) for route in ROUTES}
    in_use = {env.path for env in current.values() if env is not None}
    envs = installed_envs()
    if json_output:
        print_json(
            {
                "schema": SCHEMA,
                "directory": str(converters_dir()),
                "routes": {
                    route: {
                        "specs": [
                            {"packages": list(s.packages), "pythons": s.pythons, "note": s.note}
                            for s in specs
                        ],
                        "ready": str(current[route].path) if current[route] else None,
                    }
                    for route, specs in ROUTES.items()
                },
                "environments": [
                    {
                        "route": e.route,
                        "path": str(e.path),
                        "current": e.path in in_use,
                        **{k: v for k, v in e.record.items() if k != "freeze"},
                    }
                    for e in envs
                ],
            }
        )
        return
    from tflkit.report.convert_report import converter_env_lines

    for line in converter_env_lines(converters_dir(), ROUTES, current, envs):
        typer.echo(line)
