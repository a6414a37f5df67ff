"""Load, validate and assemble the broken-simulation eval suite.

A suite folder holds ``evals.json`` in the Agent Skills evals schema (``skill_name`` plus
``evals[]`` with ``id``, ``prompt``, ``expected_output``, ``assertions``, ``files``,
``should_trigger``), the fixtures under ``files/`` and, for graded suites, one
``graders/<case_id>/meta.json`` per case with the public fields plus the hidden grader fields.
``evals.json`` is generated from the meta files::

    python -m warpgrad.evals.suite --write           # regenerate evals/evals.json
    python -m warpgrad.evals.suite --check           # exit 1 and list problems if anything is off
    python -m warpgrad.evals.suite --check --suite DIR

A folder with only ``evals.json`` (another published suite) loads too; its cases simply have no
hidden grader fields. See ``evals/README.md`` for the case layout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..tools.signatures import Signature

SKILL_NAME = "warp-debug-gradients"
SUITE_DIR = Path(__file__).resolve().parent

Verdict = Literal["gradients_wrong", "gradients_correct", "not_applicable"]


class SuiteError(ValueError):
    """The suite folder is malformed; the message lists every problem found."""


class RootCause(BaseModel):
    """A place where the fix belongs; a diagnosis naming any one of a case's places counts."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(description="Workspace-relative path of the fixture file.")
    line: int = Field(ge=1, description="1-based line in the unpatched fixture file.")


class EvalCase(BaseModel):
    """One entry of ``evals.json`` (the Agent Skills evals schema): everything the agent may see.

    Published suites carry fields of their own (``expected_skill`` on every case, host-specific
    keys): they are kept (``model_extra``), never fatal. Our own graded meta files stay strict.
    """

    model_config = ConfigDict(extra="allow")

    id: str | int = Field(description="Case id; for graded suites also the fixture and grader folder name.")
    prompt: str = Field(min_length=1, description="What the user writes: the symptom, never the cause.")
    expected_output: str = Field(description="The reference answer.")
    assertions: list[str] = Field(default_factory=list, description="Ordered, checkable workflow steps.")
    files: list[str] = Field(default_factory=list, description="Fixture paths relative to the suite folder.")
    should_trigger: bool = Field(True, description="False for prompts the skill must not take on.")
    expected_skill: str | None = Field(None, description="The skill a triggering case should load (published "
                                       "suites name it on every case).")


class CaseMeta(EvalCase):
    """A case with its hidden grader fields (``graders/<id>/meta.json``).

    Strict (a typo in our own meta files fails the tests); the fields a published ``evals.json``
    adds beyond the schema are carried in ``unknown``.
    """

    model_config = ConfigDict(extra="forbid")

    expected_verdict: Verdict | None = Field(
        None, description="gradients_wrong / gradients_correct / not_applicable."
    )
    expected_signature: Signature | None = Field(
        None, description="Signature-table row the FD check should show."
    )
    expected_factor: float | None = Field(None, description="AD/FD ratio for exact_factor cases.")
    root_cause: list[RootCause] = Field(
        default_factory=list, description="Where the fix belongs (any one counts)."
    )
    params: list[str] = Field(
        default_factory=list, description="Names of the optimized arrays (probe.params())."
    )
    entry: str | None = Field(None, description="The script the user runs, relative to the workspace.")
    iteration: int | None = Field(
        None, ge=0, description="Optimizer iteration the probe's grad() reproduces."
    )
    quick_checks: list[str] = Field(default_factory=list, description="Quick-check rule ids the bug matches.")
    decoys: list[RootCause] = Field(
        default_factory=list, description="Lines that look like a known bug pattern but are benign here."
    )
    fd_eps: float | None = Field(
        None, gt=0, description="A central-difference step known to work for this case."
    )
    brief_case: int | None = Field(None, ge=1, description="Number of the case in the suite's design brief.")
    notes: str | None = Field(None, description="Grader notes: measurements, accepted alternative fixes.")
    unknown: dict[str, Any] = Field(default_factory=dict, description="Fields of a published evals.json that "
                                    "the schema does not name, kept as they were.")

    @model_validator(mode="after")
    def _hidden_fields_agree(self) -> CaseMeta:
        if self.expected_verdict is None:
            return self  # an ungraded case from a plain evals.json
        if not self.should_trigger:
            if self.expected_verdict != "not_applicable":
                raise ValueError(
                    "a case with should_trigger=false must have expected_verdict 'not_applicable'"
                )
            return self
        if self.expected_verdict == "not_applicable":
            raise ValueError("a triggering case needs expected_verdict gradients_wrong or gradients_correct")
        if self.expected_signature is None or not self.entry or not self.params or not self.files:
            raise ValueError("a triggering case needs expected_signature, entry, params and files")
        if self.expected_verdict == "gradients_wrong":
            if not self.root_cause:
                raise ValueError("a gradients_wrong case needs at least one root_cause location")
            if self.expected_signature == Signature.CORRECT:
                raise ValueError("a gradients_wrong case cannot expect the 'correct' signature")
        if self.expected_signature == Signature.EXACT_FACTOR and self.expected_factor is None:
            raise ValueError("an exact_factor case needs expected_factor")
        return self

    def public(self) -> EvalCase:
        """The fields that go into ``evals.json``."""
        return EvalCase.model_validate(self.model_dump(include=set(EvalCase.model_fields)))

    @classmethod
    def from_published(cls, case: EvalCase) -> CaseMeta:
        """A case of a published ``evals.json``: no hidden grader fields, its extra fields kept."""
        known = case.model_dump(include=set(EvalCase.model_fields))
        return cls.model_validate({**known, "unknown": dict(case.model_extra or {})})


class EvalsFile(BaseModel):
    """The whole ``evals.json`` (fields beyond ``skill_name`` and ``evals`` are kept, not fatal)."""

    model_config = ConfigDict(extra="allow")

    skill_name: str
    evals: list[EvalCase]


@dataclass
class Suite:
    """A loaded suite: its folder and its cases sorted by id."""

    root: Path
    cases: list[CaseMeta]
    graded: bool

    def case(self, case_id: str) -> CaseMeta:
        """Return the case with this id.

        Raises:
            KeyError: No such case.
        """
        for c in self.cases:
            if str(c.id) == str(case_id):
                return c
        raise KeyError(
            f"no case {case_id!r} in {self.root}; known: {', '.join(str(c.id) for c in self.cases)}"
        )

    def workspace(self, case_id: str) -> Path:
        """Folder staged as the case's workspace root."""
        return self.root / "files" / str(case_id)

    def stage(self, case: CaseMeta, ws: Path) -> None:
        """Copy the case's fixture into the workspace `ws`.

        A graded suite stages its ``files/<id>/`` folder as the workspace root. A published suite lists
        its files relative to the suite folder or to the skill folder above it; they are laid out relative
        to their common folder, so a case's package structure is kept.
        """
        folder = self.workspace(str(case.id))
        if folder.is_dir():
            shutil.copytree(folder, ws, dirs_exist_ok=True)
            return
        found = [self.resolve_file(rel) for rel in case.files]
        paths = [f for f in found if f is not None]
        if not paths:
            return
        common = Path(os.path.commonpath([p.parent for p in paths]))
        for src in paths:
            dest = ws / src.relative_to(common)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)

    def resolve_file(self, rel: str) -> Path | None:
        """A listed fixture path: relative to the suite folder, else to the skill folder above it."""
        for base in (self.root, self.root.parent):
            if (base / rel).is_file():
                return base / rel
        return None

    def grader_dir(self, case_id: str) -> Path:
        """Folder with the case's meta.json, probe.py and fixed/."""
        return self.root / "graders" / str(case_id)

    def probe(self, case_id: str) -> Path:
        """The hidden FD probe of a case."""
        return self.grader_dir(case_id) / "probe.py"

    def fixed_dir(self, case_id: str) -> Path:
        """The reference fix (patched copies of the changed fixture files)."""
        return self.grader_dir(case_id) / "fixed"

    def independent_grader(self) -> Path | None:
        """The suite's own FD checker (`graders/fdcheck.py`), independent of warpgrad's code.

        A suite without one (a blind suite may ship only its cases) is graded by the checker of the
        source checkout's suite; None when neither exists (an installed wheel ships no graders).
        """
        for candidate in (self.root / "graders" / "fdcheck.py", SUITE_DIR / "graders" / "fdcheck.py"):
            if candidate.is_file():
                return candidate
        return None

    def evals_file(self) -> EvalsFile:
        """The ``evals.json`` content these cases produce."""
        return EvalsFile(skill_name=SKILL_NAME, evals=[c.public() for c in self.cases])

    def evals_json(self) -> dict[str, Any]:
        """``evals_file()`` as written to disk (optional fields left unset are left out)."""
        return self.evals_file().model_dump(mode="json", exclude_none=True)

    def problems(self) -> list[str]:
        """Everything wrong with the suite on disk; empty when it is consistent.

        Checks that every listed fixture file exists and the listed files are the whole fixture
        folder (the runner stages exactly these), that triggering cases have their entry, probe
        and root-cause lines, that fixes only patch the fixture layout, and that ``evals.json``
        matches the meta files.
        """
        found: list[str] = []
        for c in self.cases:
            cid = str(c.id)
            for rel in c.files:
                if self.resolve_file(rel) is None:
                    found.append(f"{cid}: listed file {rel} does not exist")
            if not self.graded:
                continue
            ws = self.workspace(cid)
            on_disk = (
                sorted(
                    p.relative_to(self.root).as_posix()
                    for p in ws.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts
                )
                if ws.is_dir()
                else []
            )
            if on_disk and sorted(c.files) != on_disk:
                missing = sorted(set(on_disk) - set(c.files))
                extra = sorted(set(c.files) - set(on_disk))
                found.append(
                    f"{cid}: files does not match files/{cid}/ (unlisted {missing}, not under it {extra})"
                )
            if not c.should_trigger:
                continue
            if c.entry and not (ws / c.entry).is_file():
                found.append(f"{cid}: entry {c.entry} is not in files/{cid}/")
            if not self.probe(cid).is_file():
                found.append(f"{cid}: graders/{cid}/probe.py is missing")
            for rc in c.root_cause:
                path = ws / rc.file
                if not path.is_file():
                    found.append(f"{cid}: root_cause file {rc.file} is not in files/{cid}/")
                elif rc.line > len(path.read_text(encoding="utf-8").splitlines()):
                    found.append(f"{cid}: root_cause {rc.file}:{rc.line} is past the end of the file")
            fixed = self.fixed_dir(cid)
            if c.expected_verdict == "gradients_wrong" and not fixed.is_dir():
                found.append(f"{cid}: graders/{cid}/fixed/ (the reference fix) is missing")
        evals_json = self.root / "evals.json"
        if self.graded:
            if not evals_json.is_file():
                found.append("evals.json is missing; run `python -m warpgrad.evals.suite --write`")
            elif json.loads(evals_json.read_text(encoding="utf-8")) != self.evals_json():
                found.append(
                    "evals.json is out of date with graders/*/meta.json; run `python -m warpgrad.evals.suite --write`"
                )
        return found


def load_suite(root: Path | str = SUITE_DIR) -> Suite:
    """Load and validate a suite folder.

    Graded suites are read from ``graders/*/meta.json``; a folder without graders is read from its
    ``evals.json``.

    Args:
        root: The suite folder (defaults to the suite shipped with warpgrad).

    Returns:
        The suite, cases sorted by id.

    Raises:
        SuiteError: A meta file or evals.json does not validate, ids repeat, or a meta file's id
            differs from its folder name.
    """
    root = Path(root)
    metas = sorted((root / "graders").glob("*/meta.json"))
    errors: list[str] = []
    cases: list[CaseMeta] = []
    if metas:
        for path in metas:
            try:
                case = CaseMeta.model_validate_json(path.read_text(encoding="utf-8"))
            except ValidationError as exc:
                errors.append(f"{path.relative_to(root)}: {exc}")
                continue
            if str(case.id) != path.parent.name:
                errors.append(f"{path.relative_to(root)}: id {case.id!r} differs from its folder name")
            cases.append(case)
    elif (root / "evals.json").is_file():
        try:
            data = EvalsFile.model_validate_json((root / "evals.json").read_text(encoding="utf-8"))
        except ValidationError as exc:
            raise SuiteError(f"{root / 'evals.json'}: {exc}") from exc
        cases = [CaseMeta.from_published(e) for e in data.evals]
    else:
        raise SuiteError(f"{root} has neither graders/*/meta.json nor evals.json")
    ids = [str(c.id) for c in cases]
    errors += [f"duplicate case id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if errors:
        raise SuiteError("invalid suite:\n" + "\n".join(errors))
    cases.sort(key=lambda c: str(c.id))
    return Suite(root=root, cases=cases, graded=bool(metas))


def write_evals_json(suite: Suite) -> Path:
    """Regenerate ``evals.json`` from the suite's meta files and return its path."""
    path = suite.root / "evals.json"
    text = json.dumps(suite.evals_json(), indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--write`` regenerates evals.json, ``--check`` lists problems."""
    parser = argparse.ArgumentParser(
        prog="python -m warpgrad.evals.suite", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--suite", type=Path, default=SUITE_DIR, help="suite folder (default: the shipped one)"
    )
    parser.add_argument("--write", action="store_true", help="regenerate evals.json from graders/*/meta.json")
    parser.add_argument("--check", action="store_true", help="exit 1 if the suite has problems")
    args = parser.parse_args(argv)
    try:
        suite = load_suite(args.suite)
    except SuiteError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.write:
        if not suite.graded:
            print("nothing to write: this suite has no graders/*/meta.json", file=sys.stderr)
            return 1
        print(f"wrote {write_evals_json(suite)} ({len(suite.cases)} cases)")
    problems = suite.problems()
    for p in problems:
        print(p, file=sys.stderr)
    if not args.write:
        positives = sum(c.should_trigger for c in suite.cases)
        print(
            f"{len(suite.cases)} cases ({positives} positive, {len(suite.cases) - positives} negative), "
            f"{len(problems)} problems"
        )
    return 1 if problems and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
