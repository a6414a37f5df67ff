"""Size of the skill prompt: the rendered SKILL.md alone and with all four references.

Token counts are an estimate, `len(text) // 4` (about 4 characters per token for English prose and
code; no tokenizer is installed and Anthropic's token-counting endpoint is not reachable offline).
Characters, words and lines are exact.

    python bench/prompt_tokens.py          # a table
    python bench/prompt_tokens.py --json   # one JSON object
"""

from __future__ import annotations

import json
import sys

from warpgrad.agent import prompt


def estimate_tokens(text: str) -> int:
    return len(text) // 4


def measure() -> dict[str, int | str]:
    skill = prompt.render_skill()
    references = {name: prompt.read_reference(name) for name in prompt.reference_names()}
    combined = skill + "".join(references.values())
    counts: dict[str, int | str] = {
        "warp_version": prompt.installed_warp_version() or "unknown",
        "skill_chars": len(skill),
        "skill_lines": len(skill.splitlines()),
        "skill_tokens": estimate_tokens(skill),
        "skill_with_references_chars": len(combined),
        "skill_with_references_tokens": estimate_tokens(combined),
        "standalone_skill_tokens": estimate_tokens(prompt.render_standalone_skill()),
    }
    for name, text in references.items():
        counts[f"{name.removesuffix('.md')}_tokens"] = estimate_tokens(text)
    counts["references_tokens"] = sum(estimate_tokens(text) for text in references.values())
    return counts


def main() -> None:
    counts = measure()
    if "--json" in sys.argv:
        print(json.dumps(counts))
        return
    width = max(map(len, counts))
    print("prompt size (tokens = len(text) // 4)")
    for key, value in counts.items():
        print(f"  {key:<{width}}  {value}")


if __name__ == "__main__":
    main()
