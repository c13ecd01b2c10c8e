"""`accelkit repro`: standalone reproducers that fail the same way on the same build and pass
on a build without the bug.

The slow tests break torch with tests/fixtures/faults/buggy_build/sitecustomize.py (the
fault of perturb_plugin.py in every process that has that folder on PYTHONPATH: a build with
the bug), run the suite on it, write the failed cases' reproducers and run them with accelkit
made unimportable, on the buggy build and on the clean one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelkit.errors import BadInput
from accelkit.results.io import load_results, write_results
from accelkit.results.model import Repro
from accelkit.suite.session.params import decode_param, encode_param
from accelkit.triage import bundle, replay_main, repro
from tests.factories import case, results
from tests.helpers import REPO, assert_one_line_error, run_cli

BUGGY_BUILD = REPO / "tests" / "fixtures" / "faults" / "buggy_build"

# Runs reproducer scripts in one process with accelkit unimportable (a finder that refuses
# every accelkit module the script does not embed itself): "needs only torch".
RUN_WITHOUT_ACCELKIT = r"""
import json, runpy, sys

class NoAccelkit:
    def find_spec(self, name, path=None, target=None):
        if name == "accelkit" or name.startswith("accelkit."):
            raise ImportError(f"accelkit is not installed here ({name})")
        return None

sys.meta_path.append(NoAccelkit())
codes = {}
for script in sys.argv[1:]:
    try:
        runpy.run_path(script, run_name="__main__")
        codes[script] = 0
    except SystemExit as exit:
        codes[script] = exit.code
    print(f"=== {script} ===", flush=True)
print("EXIT CODES " + json.dumps(codes))
"""


def _env(*, buggy: bool, **faults: str) -> dict[str, str]:
    path = [str(BUGGY_BUILD)] if buggy else []
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ACCELKIT_FAULT_")}
    return {**clean, "PYTHONPATH": os.pathsep.join([*path, str(REPO)]), **faults}


def _run_scripts(scripts: list[Path], env: dict[str, str]) -> tuple[dict[str, int], str]:
    proc = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_ACCELKIT, *map(str, scripts)],
        capture_output=True,
        text=True,
        env=env,
        cwd=scripts[0].parent,
        timeout=900,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("EXIT CODES ")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("EXIT CODES ")), proc.stdout


def _outputs_by_script(output: str) -> dict[str, str]:
    """Each script's output (the runner prints `=== script ===` after each)."""
    found: dict[str, str] = {}
    start = 0
    for match in re.finditer(r"^=== (.+) ===$", output, flags=re.M):
        found[match.group(1)] = output[start : match.start()]
        start = match.end()
    return found


def _greatest_difference(text: str) -> tuple[str, str]:
    """(value, index) of the worst element a failed comparison names: torch.testing's
    'Greatest absolute difference' line (for a scalar: 'Absolute difference', no index), or
    accelkit.suite.numerics.reference.check_close's 'worst at index I: ..., |difference| D'."""
    ours = re.search(r"worst at index (\([^)]*\)|\(\)): .*?\|difference\| (\S+)", text)
    if ours:
        return ours.group(2), ours.group(1)
    match = re.search(
        r"(?:Greatest absolute|Absolute) difference: (\S+)(?: at index (\([^)]*\)))?", text
    )
    assert match, text
    return match.group(1), match.group(2) or "()"


# --------------------------------------------------------------------------------------
# End to end: a planted wrong operator


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_reproducers_fail_like_the_case_on_the_buggy_build_and_pass_on_a_clean_one(
    tmp_path: Path,
) -> None:
    fault = {"ACCELKIT_FAULT_OP": "aten.mul.Tensor"}
    failing = {
        "conformance/opinfo/mul/float32": "opinfo",
        "conformance/opinfo/mul/float32/grad": "opinfo",
        # a sample in another layout (accelkit.suite.opinfo.layouts): the record names it
        "conformance/opinfo/mul/float32/noncontiguous": "opinfo",
        "conformance/ops/mul/float32": "function",
    }
    # One run per case module (--case collects only that module): the OpInfo cases of mul
    # (the prefix takes the forward and the gradient case) and the ops case.
    sources: dict[str, Path] = {}
    for n, prefix in enumerate(("conformance/opinfo/mul/float32", "conformance/ops/mul/float32")):
        path = tmp_path / f"results-{n}.json"
        test_args = ["--device", "cpu", "--case", prefix, "--workers", "0", "--json", str(path)]
        proc = run_cli("test", *test_args, env=_env(buggy=True, **fault), timeout=900)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        sources.update({c.id: path for c in load_results(path).cases})
    cases = {c.id: c for path in set(sources.values()) for c in load_results(path).cases}
    assert {k: cases[k].status for k in failing} == dict.fromkeys(failing, "failed")
    for case_id, kind in failing.items():
        record = cases[case_id].repro
        assert record is not None and record.kind == kind, (case_id, record)
        assert record.check is not None and record.check.index is not None, record
    assert cases["conformance/opinfo/mul/float32"].repro.sample is not None  # type: ignore[union-attr]
    layout = cases["conformance/opinfo/mul/float32/noncontiguous"].repro.layout  # type: ignore[union-attr]
    assert layout == "strided", layout  # the first layout tried, wrong as every other

    # Through the CLI once (writes and runs it: it fails as the case did, exit 1).
    def where(case_id: str) -> list[str]:
        return ["--from", str(sources[case_id]), "--out", str(tmp_path)]

    grad = "conformance/opinfo/mul/float32/grad"
    cli = run_cli("repro", grad, *where(grad), env=_env(buggy=True, **fault))
    assert cli.returncode == 1, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert "the same failure as recorded" in cli.stdout, cli.stdout
    scripts = [tmp_path / repro.script_name(case_id) for case_id in failing]
    for case_id in failing:
        if case_id != grad:
            written = run_cli("repro", case_id, *where(case_id), "--no-run")
            assert written.returncode == 0, written.stderr
    assert all(s.is_file() for s in scripts)

    # The same build: every reproducer fails, with the recorded worst element and difference.
    codes, output = _run_scripts(scripts, _env(buggy=True, **fault))
    assert codes == {str(s): 1 for s in scripts}, output[-4000:]
    per_script = _outputs_by_script(output)
    for case_id, script in zip(failing, scripts, strict=True):
        text = per_script[str(script)]
        assert "the same failure as recorded" in text, text
        assert _greatest_difference(text) == _greatest_difference(cases[case_id].message)

    # A build without the bug: every reproducer passes.
    codes, output = _run_scripts(scripts, _env(buggy=False))
    assert codes == {str(s): 0 for s in scripts}, output[-4000:]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_gradient_in_a_later_layout_reproduces_with_the_weights_the_case_drew(
    tmp_path: Path,
) -> None:
    """A fault on the expanded path alone fails a gradient case in its expanded layout, after
    the layouts checked before it drew their own random weights; the reproducer, which checks
    that layout alone, draws the weights the case drew (`running.layout_seed`): the same
    worst element and difference (seed 757575's prelu finding did not reproduce before)."""
    fault = {"ACCELKIT_FAULTS": "aten.mul.Tensor:float32:expanded"}
    case_id = "conformance/opinfo/mul/float32/grad/noncontiguous"
    results_path = tmp_path / "results.json"
    test_args = ["--device", "cpu", "--case", case_id, "--workers", "0"]
    proc = run_cli(
        "test", *test_args, "--json", str(results_path), env=_env(buggy=True, **fault), timeout=900
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    (failed,) = load_results(results_path).cases
    assert failed.repro is not None and failed.repro.layout == "expanded", failed.repro
    where = ["--from", str(results_path), "--out", str(tmp_path)]
    cli = run_cli("repro", case_id, *where, env=_env(buggy=True, **fault))
    assert cli.returncode == 1, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert "the same failure as recorded" in cli.stdout, cli.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_compiled_case_reproducer_shows_the_compiler_is_at_fault(tmp_path: Path) -> None:
    """A wrong Inductor decomposition: compiled fails, the same graphs run eagerly pass."""
    fault = {
        "ACCELKIT_FAULT_DECOMP": "softmax",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),
    }
    results_path = tmp_path / "results.json"
    case_id = "conformance/control_flow/switch/compiled"
    test_args = ["--device", "cpu", "--case", case_id, "--workers", "0"]
    proc = run_cli(
        "test", *test_args, "--json", str(results_path), env=_env(buggy=True, **fault), timeout=900
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    (failed,) = [c for c in load_results(results_path).cases if c.status == "failed"]
    assert failed.id == "conformance/control_flow/switch/compiled"
    where = ["--from", str(results_path), "--out", str(tmp_path)]
    cli = run_cli("repro", failed.id, *where, env=_env(buggy=True, **fault))
    assert cli.returncode == 1, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert "as recorded: FAILED" in cli.stdout
    assert "eager (same graphs, Inductor bypassed): PASSED" in cli.stdout
    assert "the compiler is at fault" in cli.stdout
    assert "the same failure as recorded" in cli.stdout


# --------------------------------------------------------------------------------------
# Bad input: one line, exit 2, nothing written


def _results_file(tmp_path: Path, *cases: object) -> Path:
    path = tmp_path / "r.json"
    write_results(results(list(cases)), path)  # type: ignore[arg-type]
    return path


def _record(**fields: object) -> Repro:
    base: dict[str, object] = {
        "kind": "function",
        "seed": 1,
        "device": "cpu",
        "file": "conformance/test_ops.py",
        "function": "test_ops",
        "params": {"op": "exp", "dtype_name": "float32"},
    }
    return Repro.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("case_id", "stored", "needle"),
    [
        ("conformance/ops/exp/float33", None, "did you mean conformance/ops/exp/float32"),
        ("conformance/ops/exp/float32", "none", "has no reproducer record"),
        (
            "conformance/ops/exp/float32",
            {"kind": "perf", "file": "perf/test_gemm.py", "function": "test_gemm"},
            "has no metrics for this case to compare",
        ),
        (
            "conformance/ops/exp/float32",
            {"file": "conformance/test_distributed.py", "function": "test_barrier", "params": {}},
            "needs the pytest fixture 'collectives'",
        ),
        (
            "conformance/ops/exp/float32",
            {
                "file": "conformance/test_inductor_targets.py",
                "function": "test_overlap_default",
                "params": {},
            },
            "needs the pytest fixture 'single_rank_group'",
        ),
        (
            "conformance/ops/exp/float32",
            {"file": "conformance/test_gone.py"},
            "is not in",
        ),
    ],
)
def test_cases_that_cannot_be_reproduced_are_one_line_errors(
    tmp_path: Path, case_id: str, stored: object, needle: str
) -> None:
    if stored == "none":
        record = None
    elif isinstance(stored, dict):
        record = _record(**stored)
    else:
        record = _record()
    path = _results_file(tmp_path, case("conformance/ops/exp/float32", "failed", repro=record))
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("repro", case_id, "--from", str(path), "--out", str(out))
    assert_one_line_error(proc, 2, needle)
    assert list(out.iterdir()) == []


def test_missing_results_file_and_output_folder_are_one_line_errors(tmp_path: Path) -> None:
    proc = run_cli("repro", "x", "--from", str(tmp_path / "nope.json"))
    assert_one_line_error(proc, 2, "no such file")
    path = _results_file(tmp_path, case("conformance/ops/exp/float32", "failed", repro=_record()))
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    proc = run_cli(
        "repro", "conformance/ops/exp/float32", "--from", str(path), "--out", str(a_file)
    )
    assert_one_line_error(proc, 2, f"--out {a_file}: not a directory")
    under_a_file = a_file / "sub"
    proc = run_cli(
        "repro", "conformance/ops/exp/float32", "--from", str(path), "--out", str(under_a_file)
    )
    assert_one_line_error(proc, 2, f"--out {under_a_file}: cannot make the folder")


def test_out_is_made_when_missing(tmp_path: Path) -> None:
    path = _results_file(tmp_path, case("conformance/ops/exp/float32", "failed", repro=_record()))
    out = tmp_path / "new" / "folder"
    proc = run_cli(
        "repro", "conformance/ops/exp/float32", "--from", str(path), "--out", str(out), "--no-run"
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in out.iterdir()] == [proc.stdout.split("/")[-1].strip()]


# --------------------------------------------------------------------------------------
# Pieces


def test_a_written_reproducer_embeds_its_modules_and_no_other_accelkit(tmp_path: Path) -> None:
    path = _results_file(tmp_path, case("conformance/ops/exp/float32", "failed", repro=_record()))
    plan = repro.plan_repro(path, "conformance/ops/exp/float32")
    assert plan.file_name == "repro_conformance_ops_exp_float32.py"
    assert set(plan.embedded) >= {
        "accelkit.suite.numerics.reference",
        "accelkit.suite.conformance.test_ops",
        "pytest",
        "accelkit.triage.replay_main",
    }
    tree = ast.parse(plan.script)  # valid Python, and its own imports are stdlib only
    top_imports = {
        alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
    }
    hook = {"importlib.abc", "importlib.machinery", "importlib.util", "linecache"}
    assert top_imports <= {"sys", *hook}
    assert "CASE = {'case': 'conformance/ops/exp/float32'" in plan.script


def test_the_embedded_import_hook_refuses_accelkit_modules_it_does_not_carry(
    tmp_path: Path,
) -> None:
    module = bundle.Embedded(
        "accelkit.demo", "accelkit/demo.py", "def main(case):\n    import accelkit.errors\n"
    )
    script = bundle.render_script(
        docstring="demo", case={"x": 1}, modules=[module], entry="accelkit.demo:main"
    )
    (tmp_path / "demo.py").write_text(script)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "demo.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # accelkit importable: still refused
        check=False,
    )
    assert proc.returncode == 1
    assert "accelkit.errors is not embedded in this reproducer" in proc.stderr
    assert '<embedded accelkit/demo.py>", line 2' in proc.stderr


def test_closed_bundles_and_their_imports() -> None:
    reference = bundle.accelkit_module("accelkit.suite.numerics.reference")
    with pytest.raises(BadInput, match=r"imports accelkit\.suite\.session\.failures"):
        bundle.check_closed([reference])
    with pytest.raises(BadInput, match=r"imports accelkit\.suite\.session\.outputs"):
        bundle.check_closed([reference, bundle.accelkit_module("accelkit.suite.session.failures")])
    closed = [
        reference,
        *(bundle.accelkit_module(f"accelkit.suite.session.{n}") for n in ("failures", "outputs")),
    ]
    bundle.check_closed(closed)
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import accelkit.x\n"
    source += "def f():\n    import accelkit.y\n"
    module = bundle.Embedded("m", "m.py", source)
    assert "accelkit.x" not in bundle.module_imports(module, top_level_only=False)
    assert "accelkit.y" in bundle.module_imports(module, top_level_only=False)
    assert "accelkit.y" not in bundle.module_imports(module, top_level_only=True)


def test_embedded_modules_need_only_the_standard_library_and_torch() -> None:
    stdlib = {"__future__", "typing", "collections", "types", "re", "importlib", "inspect"}
    stdlib |= {"linecache", "math", "random", "sys", "traceback", "contextlib", "hashlib"}
    stdlib |= {"pathlib"}
    for name in (
        "accelkit.suite.session.failures",
        "accelkit.suite.session.outputs",
        "accelkit.suite.session.params",
        "accelkit.triage.embedded",
        "accelkit.triage.pytest_shim",
        "accelkit.triage.replay_main",
    ):
        imported = bundle.module_imports(bundle.accelkit_module(name), top_level_only=True)
        assert not [i for i in imported if i.split(".")[0] not in stdlib], (name, imported)


def test_the_fixtures_a_reproducer_supplies_are_one_list() -> None:
    assert repro.FIXTURES_FROM_RECORD == replay_main.FIXTURES_FROM_RECORD


@pytest.mark.parametrize(
    "value", [None, 1, 2.5, "x", ("float32", (4, 8)), ["a", ("b",)], {"k": (1, 2)}]
)
def test_case_parameters_round_trip_through_json(value: object) -> None:
    assert decode_param(json.loads(json.dumps(encode_param(value)))) == value


def test_parameters_without_a_json_form_are_refused() -> None:
    with pytest.raises(ValueError, match="object has no JSON form"):
        encode_param(object())


def test_the_same_failure_means_the_same_worst_element_and_difference() -> None:
    recorded = {"index": [3], "abs_diff": 0.25}
    assert replay_main.same_failure({"index": [3], "abs_diff": 0.25}, recorded)
    assert replay_main.same_failure({"index": [3], "abs_diff": 0.25 * (1 + 1e-9)}, recorded)
    assert not replay_main.same_failure({"index": [4], "abs_diff": 0.25}, recorded)
    assert not replay_main.same_failure({"index": [3], "abs_diff": 0.26}, recorded)


# --------------------------------------------------------------------------------------
# Where the reproducer command shows: the HTML report, compare's Markdown, the nightly


def test_reports_and_summaries_give_each_new_failure_its_repro_line(tmp_path: Path) -> None:
    from accelkit.results.compare import compare
    from accelkit.results.nightly import judge_nightly
    from accelkit.results.render.html import report_html
    from accelkit.results.render.markdown import comparison_markdown, nightly_markdown
    from accelkit.results.report.model import load_report

    exp, mul, added = (f"conformance/ops/{op}/float32" for op in ("exp", "mul", "abs"))
    base = results([case(exp), case(mul)])
    new = results(
        [
            case(exp, "failed", message="boom", repro=_record()),
            case(mul, "failed", message="boom"),  # no record: no line
            case(added, "failed", message="boom", repro=_record()),  # new tonight, failing
        ]
    )
    for folder, data in (("baseline", base), ("results", new)):
        (tmp_path / folder / "leg").mkdir(parents=True)
        write_results(data, tmp_path / folder / "leg" / "results.json")
    new_path = str(tmp_path / "results" / "leg" / "results.json")
    expected = [f"accelkit repro {c} --from {new_path}" for c in (exp, added)]

    text = comparison_markdown(compare(base, new), new_source=new_path)
    block = text.split("#### Reproduce the new failures", 1)[1].split("```")[1]
    assert block.strip().splitlines() == ["bash", *expected], text

    verdict = judge_nightly(["leg"], tmp_path / "results", tmp_path / "baseline")
    summary = nightly_markdown(verdict)
    assert all(line in summary for line in expected), summary
    assert f"accelkit repro {mul}" not in summary

    page = report_html(load_report([Path(new_path)]))
    assert f"accelkit repro {exp} --from {new_path}" in page
    assert f"accelkit repro {mul}" not in page
