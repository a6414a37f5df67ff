"""Quick-check rules: fixtures with `# expect: WGnnn` markers, rule docs, the registry tool, doc drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from warpgrad.tools.quickchecks import RULES, Finding, check_files, run_rules
from warpgrad.tools.quickchecks.base import DOC_SECTIONS, REFERENCE_SECTIONS
from warpgrad.tools.registry import ToolError, load_tools

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "quickchecks"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>WG\d{3}(?:\s*,\s*WG\d{3})*)")

# The brief's table: rule ids, names and reference sections are fixed there.
BRIEF = {
    "WG001": ("missing-requires-grad", "references/quick-checks.md §2"),
    "WG002": ("backward-disabled", "references/quick-checks.md §3"),
    "WG003": ("missing-tape-zero", "references/quick-checks.md §4"),
    "WG004": ("backward-per-step", "references/quick-checks.md §8"),
    "WG005": ("ping-pong-rebinding", "references/quick-checks.md §1"),
    "WG006": ("copy-onto-read-array", "references/quick-checks.md §1"),
    "WG007": ("inplace-mul-div", "references/quick-checks.md §5"),
    "WG008": ("component-reassign", "references/quick-checks.md §6a"),
    "WG009": ("dynamic-loop-mutated-local", "references/quick-checks.md §6b"),
    "WG010": ("nonsmooth-at-zero", "references/quick-checks.md §9a"),
    "WG011": ("where-overflow", "references/quick-checks.md §9b"),
    "WG012": ("piecewise-constant", "references/quick-checks.md §9c"),
    "WG013": ("adjoint-assign", "references/custom-gradients.md §2"),
    "WG014": ("atomic-counter-without-replay", "references/custom-gradients.md §3"),
    "WG015": ("grad-read-before-backward", "references/quick-checks.md §4"),
    "WG016": ("sum-seed-for-mean-objective", "references/quick-checks.md §7"),
    "WG017": ("ptr-alias", "references/quick-checks.md §1"),
    "WG018": ("retain-grad-rewritten", "references/quick-checks.md §7"),
    "WG019": ("struct-array-overwrite", "references/quick-checks.md §1"),
}
SIGNATURES = {
    "zero",
    "nan_inf",
    "exact_factor",
    "subtly_wrong",
    "sparse_subset",
    "grows_across_iterations",
    "truncation",
}


def expected_pairs(path: Path) -> set[tuple[str, int]]:
    out = set()
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            out |= {(code, i) for code in re.findall(r"WG\d{3}", m.group("codes"))}
    return out


FIXTURE_FILES = sorted(FIXTURES.glob("WG*.py"))


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=[f.stem for f in FIXTURE_FILES])
def test_rules_flag_exactly_the_annotated_lines_of_each_fixture(fixture: Path):
    report = check_files([fixture], FIXTURES)
    assert report.errors == []
    flagged = {(f.code, f.line) for f in report.findings}
    assert flagged == expected_pairs(fixture), "\n".join(
        f"{f.line}: {f.code} {f.message}" for f in report.findings
    )


def test_every_rule_has_a_fixture_with_a_positive_and_true_negatives():
    annotated = {code for f in FIXTURE_FILES for code, _ in expected_pairs(f)}
    assert annotated == set(RULES)
    for code in RULES:
        own = [f for f in FIXTURE_FILES if f.stem.startswith(code)]
        assert own, f"{code} has no fixture file"
        unmarked_lines = sum(
            1
            for f in own
            for line in f.read_text(encoding="utf-8").splitlines()
            if line.strip() and not EXPECT.search(line)
        )
        assert unmarked_lines > 10, f"{code}: fixtures need realistic true negatives too"


def test_rule_codes_names_and_references_match_the_brief_table():
    assert {code: (r.name, r.reference) for code, r in RULES.items()} == BRIEF
    assert len({r.name for r in RULES.values()}) == len(RULES)


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_documentation_has_every_section_like_a_linter_rule(code: str):
    rule = RULES[code]
    sections = rule.doc_sections()
    for heading in DOC_SECTIONS:
        assert sections.get(heading), f"{code}: missing or empty section {heading!r}"
    assert "```python" in sections["## Example"] and "```python" in sections["Use instead:"]
    assert rule.reference in REFERENCE_SECTIONS
    assert rule.reference in sections["## References"]
    assert "Warp docs" in sections["## References"]
    assert rule.signatures and set(rule.signatures) <= SIGNATURES
    assert any(sig in sections["## Signature"] for sig in rule.signatures)
    assert rule.message and rule.docs_section


@pytest.mark.parametrize("code", sorted(RULES))
def test_reference_section_named_by_the_rule_cites_it(code: str):
    # references/*.md is written by another engineer; this keeps the two from drifting apart.
    ref_file, section = RULES[code].reference.split(" §")
    text = (ROOT / ref_file).read_text(encoding="utf-8")
    body = _section(text, section) or _section(text, section.rstrip("abcdefgh"))
    assert body is not None, f"{ref_file} has no section §{section}"
    assert f"Rule: {code}" in body, f"{ref_file} §{section} does not cite `Rule: {code}`"


def _section(text: str, number: str) -> str | None:
    lines = text.splitlines()
    head = re.compile(rf"^(#+)\s*§?\s*{re.escape(number)}(?![0-9a-z])")
    for i, line in enumerate(lines):
        m = head.match(line)
        if m:
            level = len(m.group(1))
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if re.match(r"^(#+)\s", lines[j]) and len(re.match(r"^(#+)", lines[j]).group(1)) <= level
                ),
                len(lines),
            )
            return "\n".join(lines[i:end])
    return None


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "sim").mkdir(parents=True)
    (tmp_path / "sim" / "kernels.py").write_text(
        "import warp as wp\n\n\n"
        "@wp.kernel(enable_backward=False)\n"
        "def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):\n"
        "    i = wp.tid()\n"
        "    y[i] = 2.0 * x[i]\n",
        encoding="utf-8",
    )
    (tmp_path / "train.py").write_text(
        "import warp as wp\n"
        "from sim.kernels import step\n\n"
        "open('SIDE_EFFECT', 'w').write('user code ran')\n\n\n"
        "def train(x, y, loss):\n"
        "    tape = wp.Tape()\n"
        "    for it in range(10):\n"
        "        with tape:\n"
        "            wp.launch(step, dim=4, inputs=[x], outputs=[y])\n"
        "        tape.backward(loss)\n",
        encoding="utf-8",
    )
    (tmp_path / "broken.py").write_text("def oops(:\n", encoding="utf-8")
    (tmp_path / ".warpgrad").mkdir()
    (tmp_path / ".warpgrad" / "probe_copy.py").write_text(
        (tmp_path / "train.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "venv" / "lib").mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (tmp_path / "venv" / "lib" / "dep.py").write_text(
        "import warp as wp\nwp.config.enable_backward = False\n", encoding="utf-8"
    )
    return tmp_path


def test_quick_checks_tool_scans_a_multi_file_workspace_without_running_it(tmp_path: Path):
    ws = _workspace(tmp_path)
    spec = load_tools()["quick_checks"]
    result = spec.call({}, ws)
    assert sorted(result.files_scanned) == ["sim/kernels.py", "train.py"]
    assert [(e.path, "SyntaxError" in e.message) for e in result.parse_errors] == [("broken.py", True)]
    assert result.rules_run == sorted(RULES)
    got = {(f.code, f.path, f.line) for f in result.findings}
    # The kernel defined in one file is launched on a tape in the other.
    assert ("WG002", "sim/kernels.py", 4) in got
    assert ("WG003", "train.py", 10) in got  # the `with tape:` that keeps recording onto the reused tape
    assert not (ws / "SIDE_EFFECT").exists()
    assert spec.read_only
    assert "quick_checks" in {p["name"] for p in [s.anthropic_param() for s in load_tools().values()]}


def test_quick_checks_tool_honours_paths_select_and_ignore(tmp_path: Path):
    ws = _workspace(tmp_path)
    spec = load_tools()["quick_checks"]
    only_train = spec.call({"paths": ["train.py"], "select": ["WG003"]}, ws)
    assert only_train.files_scanned == ["train.py"] and only_train.rules_run == ["WG003"]
    assert {f.code for f in only_train.findings} == {"WG003"}
    folder = spec.call({"paths": ["sim"], "ignore": ["WG002"]}, ws)
    assert folder.files_scanned == ["sim/kernels.py"] and "WG002" not in folder.rules_run


@pytest.mark.parametrize("bad", ["../outside.py", "/etc", "sim/../../x"])
def test_quick_checks_tool_refuses_paths_outside_the_workspace(tmp_path: Path, bad: str):
    ws = _workspace(tmp_path / "ws")
    (tmp_path / "outside.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ToolError, match="outside the workspace"):
        load_tools()["quick_checks"].call({"paths": [bad]}, ws)


def test_quick_checks_tool_refuses_unknown_rule_codes_and_missing_paths(tmp_path: Path):
    ws = _workspace(tmp_path)
    spec = load_tools()["quick_checks"]
    with pytest.raises(ToolError, match="unknown rule"):
        spec.call({"select": ["WG999"]}, ws)
    with pytest.raises(ToolError, match="does not exist"):
        spec.call({"paths": ["nope.py"]}, ws)


def test_quick_checks_tool_skips_files_linked_from_outside_the_workspace(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = tmp_path / "secret.py"
    secret.write_text("import warp as wp\nwp.config.enable_backward = False\nwp.Tape()\n", encoding="utf-8")
    (ws / "link.py").symlink_to(secret)
    result = load_tools()["quick_checks"].call({}, ws)
    assert result.files_scanned == [] and result.findings == []


def test_run_rules_returns_findings_with_workspace_relative_paths(tmp_path: Path):
    ws = _workspace(tmp_path)
    findings = run_rules([ws / "train.py", ws / "sim" / "kernels.py", ws / "broken.py"], ws)
    assert findings and all(isinstance(f, Finding) for f in findings)
    assert {f.path for f in findings} == {"train.py", "sim/kernels.py"}
    assert all(f.reference.startswith("references/") and f.message for f in findings)


def test_noqa_comment_silences_one_rule_on_one_line(tmp_path: Path):
    ws = _workspace(tmp_path)
    train = ws / "train.py"
    train.write_text(
        train.read_text(encoding="utf-8").replace("with tape:\n", "with tape:  # noqa: WG003\n"),
        encoding="utf-8",
    )
    codes = {(f.code, f.path) for f in run_rules([train, ws / "sim" / "kernels.py"], ws)}
    assert ("WG003", "train.py") not in codes and ("WG002", "sim/kernels.py") in codes


def test_a_negative_float_loop_bound_does_not_crash_the_checks(tmp_path: Path):
    """`range(-1.5, 4)` is no compile-time bound; WG009 once negated the literal and called range() on it
    (TypeError: the whole check failed). It is judged like any other unknown bound: a dynamic loop."""
    src = tmp_path / "train.py"
    src.write_text(
        "import warp as wp\n\n\n"
        "@wp.kernel\n"
        "def prod(x: wp.array(dtype=float), out: wp.array(dtype=float)):\n"
        "    p = float(1.0)\n"
        "    for i in range(-1.5, 4):\n"
        "        p = p * x[0]\n"
        "    out[0] = p\n\n\n"
        "tape = wp.Tape()\n",
        encoding="utf-8",
    )
    report = check_files([src], tmp_path, select=["WG009"])
    assert not report.errors
    assert [(f.code, f.line) for f in report.findings] == [("WG009", 7)]
