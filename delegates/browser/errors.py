"""The browser harness's errors: one line each for the user, exit code 4 in the CLI.

Exit code 4 (README: "a device could not be reached, dropped the connection, or did not finish in
time") and not 2 (usage or input error): the browser with its LiteRT.js is the device here, and
every error below is about the machinery around the model (npm or its registry unreachable,
Chromium missing or dead, a page that never reports), never about the user's arguments or model.
A CI job can retry or fix its runner on 4 and knows the model itself was never judged.
"""

from __future__ import annotations

from tflkit.errors import TflkitError

__all__ = ["BrowserHarnessError", "BrowserTimeoutError", "ProvisionError"]


class BrowserHarnessError(TflkitError):
    """The browser harness could not be set up, or the browser did not finish the job."""

    exit_code = 4


class ProvisionError(BrowserHarnessError):
    """LiteRT.js could not be fetched (npm missing, the registry unreachable, a bad download)."""


class BrowserTimeoutError(BrowserHarnessError):
    """The page did not report within the job's time."""
