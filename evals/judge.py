"""An LLM judge for suites that ship no machine graders (a published Agent Skills evals suite).

The judge reads one case (the user's prompt, the reference answer, the assertions) and the agent's
answer, and grades each assertion pass/fail with a one-line reason. It answers in JSON that
`JudgeReply` validates; a reply that does not validate grades nothing (the case is reported ungraded
with the reason), because a grade we cannot read is not a grade.

Without `ANTHROPIC_API_KEY` nothing is judged: `warpgrad eval` then lists each case's answer beside its
assertions and says that it is ungraded, rather than invent a score.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..agent.loop import DEFAULT_MODEL
from .suite import CaseMeta

ANSWER_LIMIT = 12_000  # characters of the agent's answer the judge reads (the start and the end are kept)

JUDGE_SYSTEM = """You grade an AI agent's answer to a user's request against a reference answer and a list \
of assertions. Judge each assertion on its own: it passes only if the answer (or the work it reports) \
clearly satisfies it; vague or missing evidence fails. For a case marked should_trigger=false, the \
assertions describe how the agent should decline or stay out of scope. Reply with JSON only, no prose \
around it, in exactly this shape:
{"assertions": [{"index": 0, "passed": true, "why": "one short sentence"}], "overall": "one sentence"}"""


class AssertionGrade(BaseModel):
    """One assertion of a case, graded (or not)."""

    assertion: str
    passed: bool | None = Field(None, description="None: not graded (no judge, or its reply was unreadable).")
    why: str = ""


class _GradeLine(BaseModel):
    index: int = Field(ge=0)
    passed: bool
    why: str = ""


class JudgeReply(BaseModel):
    """The JSON the judge must answer with."""

    assertions: list[_GradeLine]
    overall: str = ""


class Judgement(BaseModel):
    """What the judge concluded about one case."""

    graded: bool = Field(description="False: no grade (no key, or an unreadable reply); `note` says why.")
    grades: list[AssertionGrade]
    note: str = ""

    @property
    def passed(self) -> bool | None:
        """Every assertion passed (None when ungraded or the case has no assertions)."""
        if not self.graded or not self.grades:
            return None
        return all(g.passed is True for g in self.grades)


def ungraded(case: CaseMeta, why: str) -> Judgement:
    """The case's assertions, each left ungraded, with the reason."""
    return Judgement(graded=False, grades=[AssertionGrade(assertion=a) for a in case.assertions], note=why)


def _clip(answer: str) -> str:
    if len(answer) <= ANSWER_LIMIT:
        return answer
    half = ANSWER_LIMIT // 2
    return f"{answer[:half]}\n[... {len(answer) - ANSWER_LIMIT} characters left out ...]\n{answer[-half:]}"


def judge_request(case: CaseMeta, answer: str) -> str:
    """The user message the judge is sent."""
    listed = "\n".join(f"{i}. {a}" for i, a in enumerate(case.assertions))
    return (f"should_trigger: {str(case.should_trigger).lower()}\n\n## The user's request\n{case.prompt}\n\n"
            f"## Reference answer\n{case.expected_output}\n\n## Assertions (grade each by its index)\n{listed}\n\n"
            f"## The agent's answer\n{_clip(answer)}\n")


def _reply_json(text: str) -> Any:
    """The JSON object in the judge's text (a fenced block or bare)."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    return json.loads(fenced.group(1) if fenced else text[text.index("{"): text.rindex("}") + 1])


def judge(case: CaseMeta, answer: str, client: Any, model: str | None = None) -> Judgement:
    """Grade `answer` against the case's assertions with `client` (an `anthropic.Anthropic`)."""
    if not case.assertions:
        return Judgement(graded=True, grades=[], note="the case has no assertions to grade")
    reply = client.messages.create(
        model=model or os.environ.get("WARPGRAD_JUDGE_MODEL") or DEFAULT_MODEL, max_tokens=2000,
        system=JUDGE_SYSTEM, messages=[{"role": "user", "content": judge_request(case, answer)}])
    text = "".join(getattr(b, "text", "") for b in reply.content)
    try:
        parsed = JudgeReply.model_validate(_reply_json(text))
    except (ValueError, ValidationError) as e:  # json errors are ValueErrors; the reply is then no grade
        return ungraded(case, f"the judge's reply was not the JSON asked for ({str(e).splitlines()[0][:120]})")
    by_index = {g.index: g for g in parsed.assertions}
    missing = [i for i in range(len(case.assertions)) if i not in by_index]
    if missing:
        return ungraded(case, f"the judge left assertions {missing} ungraded")
    grades = [AssertionGrade(assertion=a, passed=by_index[i].passed, why=by_index[i].why)
              for i, a in enumerate(case.assertions)]
    return Judgement(graded=True, grades=grades, note=parsed.overall)
