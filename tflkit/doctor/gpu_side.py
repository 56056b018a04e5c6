"""The GPU accelerator (the probe compiles a 1-op model in a child process: a crashing driver
is a finding) and the Vulkan stack under it: the loader, the drivers (ICDs), Mesa's version."""

from __future__ import annotations

import ctypes.util
import glob
import re

from .items import Item
from .system import apt_fix, deb_version, debian_release

__all__ = ["MESA_MIN", "gpu_items", "mesa_fix"]

#: Mesa's first major version whose lavapipe the accelerator takes (22.3 lacks
#: shader*ArrayDynamicIndexing: "No adapters found"; /work/shared/DESIGN.md, docs/ci.md)
MESA_MIN = 25
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")


def mesa_fix() -> str:
    """The command that brings Mesa >= 25's Vulkan drivers and the loader here."""
    distro, codename = debian_release()
    if distro == "debian" and codename == "bookworm":
        return (
            "add the suite bookworm-backports (your Debian source's mirror) to the apt sources, "
            "then: apt-get install -y -t bookworm-backports mesa-vulkan-drivers libvulkan1"
        )
    return apt_fix("mesa-vulkan-drivers libvulkan1", f"Mesa >= {MESA_MIN}'s Vulkan drivers")


def _mesa_item() -> Item:
    version = deb_version("mesa-vulkan-drivers")
    if version is None:
        return Item("gpu", "Mesa", "info", "no Debian package mesa-vulkan-drivers (not Debian, or "
                    "a vendor driver)")  # fmt: skip
    major = re.match(r"(?:\d+:)?(\d+)", version)
    if major and int(major.group(1)) >= MESA_MIN:
        return Item("gpu", "Mesa", "ok", f"mesa-vulkan-drivers {version} (lavapipe usable)")
    return Item(
        "gpu",
        "Mesa",
        "failed",
        f"mesa-vulkan-drivers {version}: lavapipe needs Mesa >= {MESA_MIN}",
        mesa_fix(),
    )


def _vulkan_items() -> list[Item]:
    loader = ctypes.util.find_library("vulkan")
    icds = sorted({p.rsplit("/", 1)[1] for d in ICD_DIRS for p in glob.glob(f"{d}/*.json")})
    lavapipe = [name for name in icds if name.startswith("lvp_icd")]
    items = [
        Item("gpu", "Vulkan loader", "ok", loader)
        if loader
        else Item("gpu", "Vulkan loader", "missing", "libvulkan.so.1 not found", mesa_fix()),
        Item(
            "gpu",
            "Vulkan drivers",
            "ok",
            ", ".join(
                f"{n.removesuffix('.json')}{' (lavapipe)' if n in lavapipe else ''}" for n in icds
            ),
        )
        if icds
        else Item("gpu", "Vulkan drivers", "missing", "no Vulkan driver (ICD) file", mesa_fix()),
    ]
    if icds and not lavapipe:
        items.append(Item("gpu", "lavapipe", "info", "no lavapipe ICD: only hardware drivers"))
    items.append(_mesa_item())
    return items


def _accelerator_item(timeout: float) -> Item:
    from tflkit.gpu.availability import gpu_available, software_gpu

    ok, why = gpu_available(timeout)
    if ok:
        note = ": correct numerics, not phone speed" if software_gpu(timeout) else ""
        return Item("gpu", "accelerator", "ok", f"{why}{note}")
    return Item("gpu", "accelerator", "failed", why, mesa_fix())


def gpu_items(timeout: float = 120.0) -> list[Item]:
    """The accelerator first (what the rest explains), then the Vulkan stack."""
    return [_accelerator_item(timeout), *_vulkan_items()]
