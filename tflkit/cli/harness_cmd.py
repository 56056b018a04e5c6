"""``tflkit harness``: fetch what the device harnesses need ahead of time.

``device validate --device browser`` (and ``validate --runner webgpu-*``) fetch LiteRT.js with npm
on first use; ``install browser`` does it before, e.g. in a CI job that caches
``$XDG_CACHE_HOME/tflkit/browser`` (or ``$TFLKIT_BROWSER_DIR``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from tflkit.cli.options import JsonOption

app = typer.Typer(
    help="What the device harnesses need on this machine (LiteRT.js for the browser harness).",
    no_args_is_help=True,
)

SCHEMA = "tflkit.harness/1"
TARGETS = ("browser",)


@app.command("install")
def install(
    targets: Annotated[
        list[str], typer.Argument(help="browser (default: all).", show_default=False)
    ] = [],  # noqa: B006
    json_output: JsonOption = False,
) -> None:
    """Fetch the harnesses' parts now (reused by every later job)."""
    from tflkit.cli.output import print_json
    from tflkit.delegates.browser.provision import ensure_litertjs
    from tflkit.errors import UsageError

    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        raise UsageError(f"unknown harness target(s) {unknown}; choose from {list(TARGETS)}")
    found = ensure_litertjs()
    record = {"target": "browser", "litertjs": found.version, "path": str(found.path)}
    if json_output:
        print_json({"schema": SCHEMA, "installed": [record]})
    else:
        typer.echo(f"installed: browser: LiteRT.js {found.version} in {found.path}")


@app.command("list")
def list_parts(json_output: JsonOption = False) -> None:
    """What is fetched already, and where."""
    from tflkit.cli.output import print_json
    from tflkit.delegates.browser.provision import (
        LITERTJS_VERSION,
        browser_cache_dir,
        find_litertjs,
    )

    found = find_litertjs()
    record = {
        "target": "browser",
        "litertjs": LITERTJS_VERSION,
        "path": str(found.path if found else browser_cache_dir()),
        "ready": found is not None,
    }
    if json_output:
        print_json({"schema": SCHEMA, "parts": [record]})
    else:
        state = (
            "ready" if found else "not fetched (fetched on first use, or: tflkit harness install)"
        )
        typer.echo(f"browser: LiteRT.js {LITERTJS_VERSION} {state}: {record['path']}")
