"""JUnit XML from a results file: one <testcase> per case, for CI systems that read JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from accelkit.results.io import atomic_write_text
from accelkit.results.model import Case, Results

# JUnit knows four outcomes; accelkit's statuses map onto them, the status kept as `type`.
_ELEMENT_FOR_STATUS = {
    "failed": "failure",
    "error": "error",
    "crashed": "error",
    "timeout": "error",
    "skipped": "skipped",
}
_COUNTER_FOR_ELEMENT = {"failure": "failures", "error": "errors", "skipped": "skipped"}


def _clean(text: str) -> str:
    # XML 1.0 forbids most control characters; crash messages can contain them.
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)


def _testcase(parent: ET.Element, case: Case) -> str | None:
    classname, _, name = case.id.rpartition("/")
    element = ET.SubElement(
        parent,
        "testcase",
        classname=classname.replace("/", "."),
        name=name,
        time=f"{case.duration_s:.6f}",
    )
    tag = _ELEMENT_FOR_STATUS.get(case.status)
    if tag is not None:
        first_line = case.message.splitlines()[0] if case.message else ""
        child = ET.SubElement(element, tag, message=_clean(first_line))
        if tag != "skipped":
            child.set("type", case.status)
            child.text = _clean(case.message)
    if case.metrics:
        props = ET.SubElement(element, "properties")
        for metric_name, metric in case.metrics.items():
            ET.SubElement(
                props, "property", name=metric_name, value=f"{metric.value:.6g} {metric.unit}"
            )
    return tag


def _set_counts(element: ET.Element, counts: Counter[str], seconds: float) -> None:
    for key in ("tests", "failures", "errors", "skipped"):
        element.set(key, str(counts[key]))
    element.set("time", f"{seconds:.6f}")


def junit_xml(results: Results) -> str:
    root = ET.Element("testsuites", name=f"accelkit {results.run.device}")
    suite_names = list(dict.fromkeys([*results.run.suites, *(c.suite for c in results.cases)]))
    total: Counter[str] = Counter()
    total_s = 0.0
    for suite_name in suite_names:
        element = ET.SubElement(root, "testsuite", name=f"{suite_name} ({results.run.device})")
        counts: Counter[str] = Counter()
        seconds = 0.0
        for case in (c for c in results.cases if c.suite == suite_name):
            tag = _testcase(element, case)
            counts["tests"] += 1
            if tag is not None:
                counts[_COUNTER_FOR_ELEMENT[tag]] += 1
            seconds += case.duration_s
        _set_counts(element, counts, seconds)
        total.update(counts)
        total_s += seconds
    _set_counts(root, total, total_s)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(results: Results, path: Path) -> None:
    atomic_write_text(path, junit_xml(results))
