"""The compiled OpInfo cases' known compile failures (`opinfo.skips.COMPILE_SKIPS`): each
names an op that exists in op_db, with the compile error as its reason; a listed case is
skipped with "cannot compile: <reason>", and the run summary counts those skips and names
their ops. Samples that cannot compile (`COMPILE_SAMPLE_SKIPS`) are left out of a case that
compiles and checks the others; the samples left out are those that fail to compile.

op_db is imported in a subprocess only (tests/test_probe.py must see it unimported).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from accelkit.cli.test import _summary
from accelkit.suite.opinfo import compiled, skips
from accelkit.suite.run import outcome
from tests.factories import case, results
from tests.helpers import run_python


def test_the_skip_prefix_is_the_one_the_summary_counts() -> None:
    assert compiled.COMPILE_SKIP_PREFIX == outcome.COMPILE_SKIP_PREFIX


def test_entries_are_forward_skips_with_the_compile_error() -> None:
    assert skips.COMPILE_SKIPS, "the full compiled breadth found ops that cannot compile"
    for key, skip in skips.COMPILE_SKIPS.items():
        assert skip.kind in (None, "forward"), key  # compiled cases are forward only
        assert len(skip.reason) > 30, key
        assert not skip.quick_still_checked, key


NONDETERMINISTIC = """
import json
from accelkit.suite.opinfo import op_db, skips
names = op_db.op_db_by_name()
print(json.dumps(sorted(n for n, op in names.items() if op.has_nondeterministic_output)))
"""


def test_an_opinfo_without_has_nondeterministic_output_falls_back_to_the_list() -> None:
    """Older torch (Debian trixie's 2.6) has no `has_nondeterministic_output` on OpInfo: the
    empty* family is skipped from the list instead of failing every case with
    AttributeError. The list is what this torch's op_db marks."""
    from accelkit.suite.opinfo.planning import OpinfoCase, skip_reason

    marked = set(run_python(NONDETERMINISTIC))
    assert marked <= skips.NONDETERMINISTIC_OUTPUT_OPS, marked - skips.NONDETERMINISTIC_OUTPUT_OPS
    old_op = SimpleNamespace(supported_dtypes=lambda device: set())  # no such attribute
    reason = skip_reason(old_op, OpinfoCase("empty_like", "float32"), "cpu")
    assert reason == "empty_like has nondeterministic output (OpInfo has_nondeterministic_output)"
    assert "nondeterministic" not in (
        skip_reason(old_op, OpinfoCase("add", "float32"), "cpu") or ""
    )


CHECK = """
import json
import torch
from accelkit.suite.opinfo import compiled, op_db, skips
from accelkit.suite.opinfo.planning import OpinfoCase
names = op_db.op_db_by_name()
problems = []
for (op, dtype, kind), skip in skips.COMPILE_SKIPS.items():
    if op not in names:
        problems.append(f"{op}: not in op_db")
        continue
    if dtype is not None and dtype not in op_db.DTYPES:
        problems.append(f"{op}: unknown dtype {dtype}")
        continue
    case = OpinfoCase(op, dtype or "float32")
    reason = compiled.compiled_skip_reason(names[op], case, "cpu", "full")
    if reason != compiled.COMPILE_SKIP_PREFIX + skip.reason:
        problems.append(f"{op}/{dtype}: skipped as {reason!r}")
print(json.dumps(problems))
"""


def test_every_listed_op_is_in_op_db_and_its_case_is_skipped_with_the_reason() -> None:
    assert run_python(CHECK) == []


def test_the_run_summary_counts_the_compile_skips_and_names_their_ops() -> None:
    run = results(
        [
            case("conformance/opinfo_compiled/abs/float32"),
            case(
                "conformance/opinfo_compiled/unique/float32",
                "skipped",
                message="cannot compile: Unsupported: dynamic shape operator",
            ),
            case(
                "conformance/opinfo_compiled/unique/float64",
                "skipped",
                message="cannot compile: Unsupported: dynamic shape operator",
            ),
            case("conformance/opinfo/bernoulli/float32", "skipped", message="random draws"),
        ]
    )
    assert outcome.compile_skips(run) == [
        "conformance/opinfo_compiled/unique/float32",
        "conformance/opinfo_compiled/unique/float64",
    ]
    console = Console(record=True, width=200)
    done = SimpleNamespace(results=run, exit_code=0, log_path=None)
    request = SimpleNamespace(device="cpu", json_path=None, junit_path=None)
    _summary(console, done, 1.0, request)
    text = console.export_text()
    assert "2 compiled OpInfo cases skipped, their ops cannot compile under Inductor" in text
    assert "(COMPILE_SKIPS): unique" in text
    assert "left out samples" not in text


def test_the_run_summary_names_the_cases_that_left_out_samples() -> None:
    note = compiled.CompiledRun(10, (8,), "InductorError: ...").note
    assert note == "cannot compile: sample 8 left out: InductorError: ..."
    assert compiled.CompiledRun(10).note is None
    run = results(
        [
            case("conformance/opinfo_compiled/add/complex64", message=note),
            case("conformance/opinfo_compiled/add/float32"),
        ]
    )
    assert outcome.compile_skips(run) == []
    assert outcome.compile_skips(run, status="passed") == [
        "conformance/opinfo_compiled/add/complex64"
    ]
    console = Console(record=True, width=200)
    done = SimpleNamespace(results=run, exit_code=0, log_path=None)
    _summary(console, done, 1.0, SimpleNamespace(device="cpu", json_path=None, junit_path=None))
    text = console.export_text()
    assert "1 compiled OpInfo cases left out samples that cannot compile" in text
    assert "add/complex64" in text


def test_sample_skip_entries_are_forward_and_name_the_compile_error() -> None:
    assert skips.COMPILE_SAMPLE_SKIPS
    for key, skip in skips.COMPILE_SAMPLE_SKIPS.items():
        assert not skip.grad, key  # compiled cases are forward only
        assert skip.reason.startswith(("InductorError", "BackendCompilerFailed")), key
        assert (skip.op, skip.dtype, None) not in skips.COMPILE_SKIPS, key


SAMPLE_SKIPS = """
import json, sys
import torch
from accelkit.suite.opinfo import compiled, op_db, skips
from accelkit.suite.opinfo.planning import OpinfoCase
names = op_db.op_db_by_name()
found = {}
for skip in skips.COMPILE_SAMPLE_SKIPS.values():
    case = OpinfoCase(skip.op, skip.dtype)
    op = names[skip.op]
    chosen = compiled.choose_samples(op, case, "cpu", "full", 0)
    samples = compiled.draw_samples(op, case, "cpu", None, 0)
    errors = []
    for i in chosen.left_out:  # each alone: the error of the reason
        try:
            compiled.compile_batch([(op, compiled.own_copies([samples[i]]))], dynamic=False)
            errors.append(None)
        except Exception as error:
            errors.append(str(error).splitlines()[0])
    run = compiled.run_compiled_case(op, case, "cpu", "full", 0)
    found[f"{skip.op}/{skip.dtype}"] = {
        "left_out": chosen.left_out, "errors": errors, "compared": run.compared,
        "indices": chosen.indices, "note": run.note, "reason": skip.reason,
    }
print(json.dumps(found))
"""


@pytest.mark.slow
def test_the_samples_left_out_are_those_that_cannot_compile() -> None:
    """Each COMPILE_SAMPLE_SKIPS entry leaves out at least one sample; each left out sample,
    compiled alone, fails with the error its reason quotes; the case compiles and compares
    all the others, and its note names the samples left out."""
    found = run_python(SAMPLE_SKIPS)
    ops = {"add", "__radd__", "logaddexp", "addr"}
    assert set(found) == {f"{op}/complex64" for op in ops}
    for name, got in found.items():
        assert got["left_out"], name
        quoted = got["reason"].split(" (")[0].removeprefix("InductorError: ")
        for error in got["errors"]:
            assert error is not None and quoted.split(": ", 1)[-1] in error, (name, error)
        assert got["compared"] == len(got["indices"]) > 0, name
        assert not set(got["left_out"]) & set(got["indices"]), name
        assert str(got["left_out"][0]) in got["note"], name
    assert found["add/complex64"]["left_out"] == [8]
    assert found["addr/complex64"]["left_out"] == [1]
