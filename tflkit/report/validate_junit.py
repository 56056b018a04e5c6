"""``validate --junit FILE``: JUnit XML for every subject of ``validate``, read off its JSON
document (the one a ``--json`` run prints), so a CI system shows each check as a test.

A ``.tflite`` (``tflkit.validate/1``): one testcase per runner (it ran) and per pair x output (its
verdict; "skipped", "unverified" and "not-meaningful" are skipped tests). ``--steps``
(``validate_steps``): one per runner (it ran every step and did not part from the CPU). A
``.litertlm`` bundle (``tflkit.validate-litertlm/1``): one per engine run and per GPU run x
prompt (a fault is a failure). The suite's failures are the report's findings' count of them.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from typing import Any

from tflkit.fsio import write_atomic

__all__ = ["junit_cases", "write_validate_junit"]

#: (name, status: "pass" | "fail" | "skipped", message)
Case = tuple[str, str, str]
_SKIPPED = ("skipped", "unverified", "not-meaningful")


def _tflite(doc: Mapping[str, Any]) -> Iterator[Case]:
    for run in doc["runners"]:
        ok = run["status"] == "ok"
        yield f"runner {run['runner']}", "pass" if ok else "fail", run.get("error") or ""
    for pair in doc["comparisons"]:
        if not pair["outputs"]:
            yield pair["pair"], "skipped", pair.get("reason") or "not compared"
        for out in pair["outputs"]:
            status = "skipped" if out["verdict"] in _SKIPPED else out["verdict"]
            yield f"{pair['pair']} output {out['name']}", status, "; ".join(out["reasons"])


def _steps(doc: Mapping[str, Any]) -> Iterator[Case]:
    for name, run in doc["runs"].items():
        if run["status"] != "ok":
            yield f"runner {name}", "fail", f"{run['status']}: {run.get('error') or ''}"
            continue
        part = run["first_part"]
        why = "" if part is None else f"parts from the CPU at step {part['step']}: {part['why']}"
        yield f"runner {name} ({doc['steps']} steps)", "pass" if part is None else "fail", why


def _bundle(doc: Mapping[str, Any]) -> Iterator[Case]:
    for name, run in doc["runs"].items():
        ok = run["status"] == "ok"
        yield f"engine {name}", "pass" if ok else "fail", f"{run['how']}: {run.get('error') or ''}"
    for name, items in doc["comparisons"].items():
        for c in items:
            status = "fail" if c["fault"] else "pass"
            yield f"{name} prompt {c['prompt']!r}", status, f"{c['verdict']}"


def junit_cases(doc: Mapping[str, Any]) -> tuple[str, list[Case]]:
    """The suite's name and its cases, for the JSON document of any ``validate`` report."""
    if doc.get("schema") == "tflkit.validate/1":
        return f"tflkit validate {doc['model']}", list(_tflite(doc))
    if doc.get("kind") == "validate_steps":
        return f"tflkit validate --steps {doc['model']}", list(_steps(doc))
    if doc.get("schema") == "tflkit.validate-litertlm/1":
        return f"tflkit validate {doc['bundle']}", list(_bundle(doc))
    raise TypeError(f"no JUnit cases for {doc.get('schema') or doc.get('kind')}")


def write_validate_junit(report: Any, path: str | os.PathLike[str]) -> None:
    """Write ``report`` (a ``validate`` report of any subject) as JUnit XML, atomically."""
    from tflkit.jsonable import plain

    name, cases = junit_cases(plain(report))
    root = ET.Element("testsuites", name="tflkit validate")
    suite = ET.SubElement(root, "testsuite", name=name)
    for label, status, message in cases:
        case = ET.SubElement(suite, "testcase", classname=name, name=label, time="0")
        if status == "fail":
            ET.SubElement(case, "failure", message=message.splitlines()[0] if message else label)
        elif status == "skipped":
            ET.SubElement(case, "skipped", message=message)
    counts = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c[1] == "fail"),
        "errors": 0,
        "skipped": sum(1 for c in cases if c[1] == "skipped"),
    }
    for element in (root, suite):
        for key, value in counts.items():
            element.set(key, str(value))
    tree = ET.ElementTree(root)
    ET.indent(tree)
    text = ET.tostring(root, encoding="unicode", xml_declaration=False)
    document = '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n"
    write_atomic(path, [document.encode("utf-8")])
