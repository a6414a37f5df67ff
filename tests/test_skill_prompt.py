"""The skill renders into a deterministic prompt and exports as a valid Agent Skills folder."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import skills_ref
from warpgrad.agent import prompt

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT.parent / "shared" / "seed" / "SKILL.seed.md"
SIGNATURES = [
    "correct",
    "zero",
    "nan_inf",
    "exact_factor",
    "subtly_wrong",
    "sparse_subset",
    "grows_across_iterations",
    "truncation",
    "inconclusive",
]
OUTCOMES = ["fixed", "gradients_correct", "not_a_gradient_bug", "blocked", "diagnosis_only"]
# The shared contract (team brief): rule id -> (reference file, section).
RULE_SECTIONS = {
    "WG001": ("quick-checks.md", "§2"),
    "WG002": ("quick-checks.md", "§3"),
    "WG003": ("quick-checks.md", "§4"),
    "WG004": ("quick-checks.md", "§8"),
    "WG005": ("quick-checks.md", "§1"),
    "WG006": ("quick-checks.md", "§1"),
    "WG007": ("quick-checks.md", "§5"),
    "WG008": ("quick-checks.md", "§6a"),
    "WG009": ("quick-checks.md", "§6b"),
    "WG010": ("quick-checks.md", "§9a"),
    "WG011": ("quick-checks.md", "§9b"),
    "WG012": ("quick-checks.md", "§9c"),
    "WG013": ("custom-gradients.md", "§2"),
    "WG014": ("custom-gradients.md", "§3"),
    "WG015": ("quick-checks.md", "§4"),
    "WG016": ("quick-checks.md", "§7"),
    "WG017": ("quick-checks.md", "§1"),
    "WG018": ("quick-checks.md", "§7"),
    "WG019": ("quick-checks.md", "§1"),
}


def section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end)]


def test_rendering_is_deterministic_within_and_across_processes():
    assert prompt.render_skill() == prompt.render_skill()
    code = "from warpgrad.agent import prompt; import sys; sys.stdout.write(prompt.render_skill())"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
            env=os.environ | {"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert outs == {prompt.render_skill()}


@pytest.mark.parametrize("render", [prompt.render_skill, prompt.render_standalone_skill])
def test_rendered_skill_has_no_template_syntax_left_and_stays_under_500_lines(render):
    text = render()
    assert not re.search(r"\{\{|\}\}|\{%|%\}|\{#", text)
    assert len(text.splitlines()) < 500


def test_rendering_the_prompt_never_imports_warp():
    code = (
        "import sys; from warpgrad.agent import prompt; prompt.render_skill(); print('warp' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", check=True
    )
    assert proc.stdout.strip() == "False"


def test_prompt_names_the_installed_warp_version_read_from_package_metadata():
    version = importlib.metadata.version("warp-lang")
    assert f"Warp {version}" in prompt.render_skill()
    assert f"Warp {version}" in prompt.render_standalone_skill()


def test_prompt_separates_the_running_warp_version_from_the_one_the_facts_were_measured_on():
    text = prompt.render_skill(warp_version="1.16.0")
    assert "run the user's code with Warp 1.16.0" in text
    assert f"measured on Warp {prompt.MEASURED_WARP}." in text
    for name in prompt.reference_names():
        assert f"Warp {prompt.MEASURED_WARP} (CPU)" in prompt.read_reference(name), name


def test_prompt_body_has_no_frontmatter_but_the_standalone_skill_does():
    assert prompt.render_skill().startswith("# Debugging gradients in Warp programs")
    assert prompt.render_standalone_skill().startswith("---\nname: warp-debug-gradients\n")


def test_version_caveats_follow_the_warp_version():
    new, v116, v112 = (prompt.render_skill(warp_version=v) for v in ("1.19.0", "1.16.0", "1.12.1"))
    assert "None of the older-version caveats" in new and "overwrites the source's gradient" not in new
    assert "overwrites the source's gradient" in v116 and "no `restore_inputs`" in v116
    assert "No store-adjoint consumption" not in v116
    assert "No store-adjoint consumption" in v112 and "overwrites the source's gradient" in v112
    assert prompt.version_caveats("1.17.0.dev4") == []
    assert len(prompt.version_caveats("1.16.0")) == 4 and len(prompt.version_caveats("1.12.1+cu12")) == 5


def test_standalone_skill_lists_every_caveat_with_the_version_it_applies_to():
    text = prompt.render_standalone_skill()
    assert "- Warp < 1.17: The adjoint of a recorded `wp.copy`" in text
    assert "- Warp < 1.13: No store-adjoint consumption" in text


def test_tool_list_shows_only_the_tools_passed_with_their_registry_descriptions():
    text = prompt.render_skill(
        tools=["gradcheck", "finish", "my_tool"],
        descriptions={"gradcheck": "Compare AD with FD, end to end."},
    )
    tools = section(text, "## Tools", "## Before you start")
    assert re.findall(r"^- `(\w+)`", tools, flags=re.MULTILINE) == ["gradcheck", "finish", "my_tool"]
    assert "- `gradcheck`: Compare AD with FD, end to end." in tools
    assert f"- `finish`: {prompt.KNOWN_TOOLS['finish']}" in tools
    assert "- `my_tool`: (no description available)" in tools


def test_tool_summaries_take_the_first_docstring_line_of_each_spec():
    class Spec:
        description = "Run the thing.\n\nMore detail the prompt does not need."

    assert prompt.tool_summaries({"thing": Spec()}) == {"thing": "Run the thing."}


def test_each_warpgrad_tool_is_named_in_the_method_next_to_the_plain_warp_way():
    method = section(prompt.render_skill(), "## Method", "## Failure signatures")
    for name in prompt.KNOWN_TOOLS:
        assert f"`{name}`" in method, name
    for plain in (
        "wp.config.verify_autograd_array_access",
        "warp.autograd.gradcheck",
        "gradcheck_tape",
        "tape.launches",
        "timeout",
    ):
        assert plain in method, plain


def test_signature_table_and_finish_gate_use_the_tool_vocabulary():
    text = prompt.render_skill()
    table = section(text, "## Failure signatures", "## Limitations")
    for sig in SIGNATURES:
        assert re.search(rf"^\| `{sig}`", table, flags=re.MULTILINE), sig
    finish = section(text, "10. **Finish**", "## Failure signatures")
    for outcome in OUTCOMES:
        assert f"`{outcome}`" in finish, outcome
    assert "same harness" in finish and "clean tracker rerun" in finish and "improves" in finish


def test_skill_states_the_corrected_tracker_facts():
    method = section(prompt.render_skill(), "3. **Instrument.**", "4. **Establish")
    assert "with or without a\n     tape" in method and "only while a tape records" in method
    assert "recompiled every run while it is\n     on" in method
    assert "no effect on modules already loaded" in method
    for blind_spot in (
        "`wp.struct`",
        "left operand",
        "`a[i] *= b[i]`",
        "copies between arrays\n     without gradients",
    ):
        assert blind_spot in method, blind_spot


@pytest.mark.skipif(not SEED.exists(), reason="the seed skill is not beside the checkout")
def test_skill_is_written_in_its_own_words_not_copied_from_the_seed():
    def sentences(text: str) -> list[str]:
        flat = re.sub(r"\s+", " ", text)
        return [s.strip() for s in re.split(r"(?<=[.!?])\s", flat) if len(s.split()) >= 10]

    ours = re.sub(r"\s+", " ", (ROOT / "skill" / "SKILL.md").read_text(encoding="utf-8"))
    copied = [s for s in sentences(SEED.read_text(encoding="utf-8")) if s in ours]
    assert copied == []


def test_frontmatter_uses_only_agent_skills_keys():
    front = prompt.render_standalone_skill().split("---\n")[1]
    keys = re.findall(r"^([a-z-]+):", front, flags=re.MULTILINE)
    assert keys == ["name", "description", "license", "compatibility"]
    assert set(keys) <= skills_ref.validator.ALLOWED_FIELDS


def test_references_are_listed_and_read_by_name_only():
    assert prompt.reference_names() == [
        "case-studies.md",
        "custom-gradients.md",
        "quick-checks.md",
        "verification.md",
    ]
    assert prompt.read_reference("quick-checks") == prompt.read_reference("quick-checks.md")
    assert prompt.read_reference("quick-checks").startswith("# Quick checks")
    with pytest.raises(KeyError, match="available: case-studies.md"):
        prompt.read_reference("../skill/SKILL.md")


SECTION_HEADING = re.compile(r"^#{2,3} (§\d+[a-z]?)\b", flags=re.MULTILINE)


def section_at(text: str, pos: int) -> tuple[str, str]:
    """(label, text) of the innermost §-section of a reference that contains offset `pos`."""
    before = list(SECTION_HEADING.finditer(text, 0, pos))
    after = SECTION_HEADING.search(text, pos)
    return before[-1].group(1), text[before[-1].start() : after.start() if after else len(text)]


def test_quick_check_rules_sit_in_the_sections_the_contract_names():
    for rule, (doc, wanted) in RULE_SECTIONS.items():
        text = prompt.read_reference(doc)
        hits = [m.start() for m in re.finditer(rf"Rule: {rule} `", text)]
        assert hits, f"{rule}: no 'Rule: {rule}' in {doc}"
        for pos in hits:
            assert section_at(text, pos)[0] == wanted, (
                f"{rule} sits under {section_at(text, pos)[0]} in {doc}"
            )


def test_quick_check_rule_docs_and_the_references_agree_on_every_rule():
    """The rules' own documentation (tools/quickchecks) and the references must not drift apart."""
    import warpgrad.tools.quickchecks  # noqa: F401  (registers every rule)
    from warpgrad.tools.quickchecks.base import RULES

    cited = set()
    for doc in ("quick-checks.md", "custom-gradients.md"):
        text = prompt.read_reference(doc)
        for m in re.finditer(r"Rule: (WG\d{3}) `([a-z-]+)`", text):
            code, name = m.groups()
            cited.add(code)
            assert code in RULES, f"{doc} cites {code}, which no rule implements"
            rule = RULES[code]
            assert name == rule.name, f"{doc} calls {code} {name!r}, the rule is {rule.name!r}"
            label, body = section_at(text, m.start())
            assert rule.reference == f"references/{doc} {label}", (code, rule.reference)
            assert f"`{rule.signatures[0]}`" in body, (
                f"{code}: its section never names `{rule.signatures[0]}`"
            )
    assert cited == set(RULES), f"rules without documentation in the references: {set(RULES) - cited}"


def test_quick_checks_has_sections_one_to_nine_with_the_lettered_subsections():
    text = prompt.read_reference("quick-checks")
    found = re.findall(r"^#{2,3} (§\d+[a-z]?) ", text, flags=re.MULTILINE)
    assert found == ["§1", "§2", "§3", "§4", "§5", "§6", "§6a", "§6b", "§7", "§8", "§9", "§9a", "§9b", "§9c"]


def test_export_writes_a_skill_folder_that_the_skills_ref_validator_accepts(tmp_path):
    skill_dir = prompt.export_skill(tmp_path)
    assert skill_dir == tmp_path / "warp-debug-gradients"
    assert skills_ref.validate(skill_dir) == []
    props = skills_ref.read_properties(skill_dir)
    assert props.name == "warp-debug-gradients" and props.license == "Apache-2.0"
    assert "plateau" in props.description and "Do not use it" in props.description
    assert sorted(p.name for p in (skill_dir / "references").iterdir()) == prompt.reference_names()
    for name in prompt.reference_names():
        assert (skill_dir / "references" / name).read_text(encoding="utf-8") == prompt.read_reference(name)
    # Every reference the skill cites ships with it.
    for cited in set(
        re.findall(r"references/([\w-]+\.md)", (skill_dir / "SKILL.md").read_text(encoding="utf-8"))
    ):
        assert (skill_dir / "references" / cited).is_file(), cited


def test_cli_skill_export_writes_the_folder_and_reports_it_as_json(tmp_path):
    code = "from warpgrad.agent.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "skill", "export", str(tmp_path), "--json"],
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert Path(report["skill_dir"]) == tmp_path / "warp-debug-gradients"
    assert report["files"] == ["SKILL.md"] + [f"references/{n}" for n in prompt.reference_names()]
    assert skills_ref.validate(Path(report["skill_dir"])) == []


def test_prompt_token_benchmark_prints_the_counts():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "prompt_tokens.py"), "--json"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    counts = json.loads(proc.stdout)
    assert 0 < counts["skill_tokens"] < counts["skill_with_references_tokens"]
    assert counts["skill_tokens"] == len(prompt.render_skill()) // 4
