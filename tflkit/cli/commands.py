"""The ``tflkit`` command's commands and groups, by name: where each is defined.

A table of module names, so a command line imports only the command it names
(:func:`tflkit.cli.app.build_app`), and :func:`named_command` finds it before Typer is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The commands, by name: the module that defines each and its function. A command line imports
#: only the command it names (``build_app``): ``tflkit check`` loads neither the runner registry
#: nor the other commands' modules (``check --json`` of a 3-op model: 1.41x the
#: ``import typer, rich`` anchor, 1.68x when every command was imported; ``bench/cli_startup.py``).
COMMANDS = {
    "inspect": ("tflkit.cli.inspect_cmd", "inspect"),
    "check": ("tflkit.cli.check_cmd", "check"),
    "convert": ("tflkit.cli.convert_cmd", "convert"),
    "validate": ("tflkit.cli.validate_cmd", "validate"),
    "rewrite": ("tflkit.cli.rewrite_cmd", "rewrite"),
    "rules": ("tflkit.cli.rules_cmd", "rules"),
    "doctor": ("tflkit.cli.doctor_cmd", "doctor"),
}
#: The command groups, by name: the module that defines each and its Typer app.
GROUPS = {
    "converters": ("tflkit.cli.converters_cmd", "app"),
    "device": ("tflkit.cli.device_cmd", "app"),
    "harness": ("tflkit.cli.harness_cmd", "app"),
    "regress": ("tflkit.cli.regress_cmd", "app"),
}
#: Flags of the ``tflkit`` group itself, allowed before the command's name.
GLOBAL_FLAGS = ("--debug", "--verbose")


def named_command(args: Sequence[str]) -> str | None:
    """The command or group a command line names (after the global flags), if it is one."""
    for arg in args:
        if arg not in GLOBAL_FLAGS:
            return arg if arg in COMMANDS or arg in GROUPS else None
    return None
