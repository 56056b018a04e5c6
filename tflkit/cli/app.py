"""The ``tflkit`` Typer app: the group, its global options, and the command a line names.

``--debug`` and ``--verbose`` are parsed by the app's callback, the one place that reads them: it
stores them on the :class:`GlobalOptions` the run was given (``ctx.obj``), which
:func:`tflkit.cli.main.main`'s error handler reads, and runs the command inside
``native_log(verbose)``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperGroup

from tflkit.cli.commands import COMMANDS, GROUPS
from tflkit.cli.output import native_log


@dataclass
class GlobalOptions:
    """The options given before the command (``ctx.obj`` of a run)."""

    debug: bool = False
    verbose: bool = False


class _TflkitGroup(TyperGroup):
    """The top-level group; ``--verbose`` counts anywhere on the line (moved before the command)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        rest = [a for a in args if a != "--verbose"]
        if rest and len(rest) < len(args):
            args = ["--verbose", *rest]
        elif not rest:
            args = rest  # `tflkit --verbose` alone shows the help, as `tflkit` does
        return super().parse_args(ctx, args)


def _global_options(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    verbose: bool = typer.Option(
        False, "--verbose", help="Show the native runtime's log lines (anywhere on the line)."
    ),
) -> None:
    """Global options (parsed before the command): kept on ``ctx.obj``; the command runs inside
    ``native_log(verbose)`` (closed with the context, before :func:`main` reports an error)."""
    options = ctx.ensure_object(GlobalOptions)
    options.debug, options.verbose = debug, verbose
    ctx.with_resource(native_log(verbose))


def _load(where: tuple[str, str]) -> Any:
    """The command function or group app at ``(module, name)``."""
    module, name = where
    return getattr(importlib.import_module(module), name)


def build_app(only: str | None = None) -> typer.Typer:
    """The Typer app: every command, or only the command or group named ``only``.

    Typer turns each command's signature into a click command on every start (15 ms for all
    of them here), so :func:`main` imports and builds only the one the line names (its help and
    errors are the same); a line naming none (``tflkit``, ``--help``, a mistyped name) gets every
    command.
    """
    app = typer.Typer(
        name="tflkit",
        cls=_TflkitGroup,
        help="Take a model to the TFLite / LiteRT GPU delegate and prove it works there.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, where in COMMANDS.items():
        if only in (None, name):
            app.command(name)(_load(where))
    for name, where in GROUPS.items():
        if only in (None, name):
            app.add_typer(_load(where), name=name)
    app.callback()(_global_options)
    return app
