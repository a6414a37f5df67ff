"""Docs a user can trust: what README.md, BENCHMARKS.md and the code's comments state is checked against the code.

- the commands README says take `--json` take it (the claim "every command takes --json" was false once);
- the prompt-size table in BENCHMARKS.md is what `bench/prompt_tokens.py` measures now (it went stale once);
- every "warp-facts §N" a source file cites is a section of docs/warp-facts.md (files once cited a facts
  document that was not in the repository).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _json_sentence() -> str:
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    m = re.search(r"Every command that reports a result takes `--json` \(([^)]*)\)", readme)
    assert m, "README no longer lists which commands take --json"
    return m.group(1)


def test_each_command_the_readme_says_takes_json_takes_it():
    commands = [c.strip(" `") for c in _json_sentence().replace("\n", " ").split(",")]
    assert len(commands) >= 10
    for command in commands:
        r = subprocess.run([sys.executable, "-m", "warpgrad", *command.split(), "--help"], capture_output=True,
                           text=True, timeout=120, check=False, env={**os.environ, "COLUMNS": "200"})
        assert r.returncode == 0, (command, r.stderr[-1000:])
        assert "--json" in r.stdout, f"README says `{command}` takes --json; its --help does not list it"


def test_the_prompt_size_table_is_what_the_benchmark_measures_now():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "prompt_tokens.py"), "--json"], capture_output=True,
                       text=True, timeout=300, check=True)
    counts = json.loads(p.stdout)
    bench = ROOT.joinpath("BENCHMARKS.md").read_text(encoding="utf-8")
    section = bench[bench.index("## Prompt size"):]
    section = section[:section.index("\n## ", 1)]

    def row(label: str) -> str:
        m = re.search(rf"^\| {re.escape(label)}[^|]*\| ([^|]+) \|$", section, re.M)
        assert m, f"no row {label!r} in BENCHMARKS.md's prompt-size table"
        return m.group(1).strip()

    fmt = "{:,}".format
    assert row("rendered SKILL.md") == fmt(counts["skill_tokens"])
    assert row("SKILL.md with all four references") == fmt(counts["skill_with_references_tokens"])
    assert row("exported standalone SKILL.md") == fmt(counts["standalone_skill_tokens"])
    refs = " / ".join(fmt(counts[f"{n}_tokens"]) for n in ("quick-checks", "verification", "case-studies",
                                                             "custom-gradients"))
    assert row("references: quick-checks / verification / case-studies / custom-gradients") == refs


@pytest.mark.parametrize("suffix", [".py", ".md"])
def test_every_cited_warp_facts_section_exists(suffix):
    facts = ROOT.joinpath("docs", "warp-facts.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^#+ (\d+(?:\.\d+)*)[. ]", facts, re.M))
    cited = {}
    for f in ROOT.rglob(f"*{suffix}"):
        if ".git" in f.parts or f.name == "warp-facts.md":
            continue
        for ref in re.findall(r"warp-facts §(\d+(?:\.\d+)*)", f.read_text(encoding="utf-8", errors="replace")):
            cited.setdefault(ref, f.relative_to(ROOT))
    if suffix == ".py":
        assert cited  # the code does cite it: the test would pass vacuously otherwise
    missing = {ref: str(f) for ref, f in cited.items() if ref not in sections}
    assert missing == {}
