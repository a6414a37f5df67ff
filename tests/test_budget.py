"""Output budgets: every tool's default answer fits one screen, repeats collapse with a count, and the whole
record stays one `detail="full"` away."""

import json
import math
import os
import shutil
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from pydantic import BaseModel

from warpgrad.tools.budget import OMITTED, SCREEN, compact, compact_json, fit_structured, relax_schema
from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
from warpgrad.tools.registry import load_tools

ROOT = Path(__file__).resolve().parents[1]
# The largest full record among the suite programs measured (`warpgrad diagnose --json --detail full`):
# cloth_drape_stiffness 653k characters, examples/bouncing_chain 220k, drone_swarm_formation 110k, mpm_sand_wind 78k.
LARGEST = "cloth_drape_stiffness"

REPEATED_LAUNCHES = """\
import numpy as np
import warp as wp

REPEATS = 60


@wp.kernel
def add_square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(y, i, x[i] * x[i])


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


x = wp.array(np.linspace(0.1, 0.9, 5).astype(np.float32), dtype=float, requires_grad=True)
for it in range(3):
    y = wp.zeros(5, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for _ in range(REPEATS):
            wp.launch(add_square, dim=5, inputs=[x], outputs=[y])
        wp.launch(total, dim=5, inputs=[y], outputs=[loss])
    tape.backward(loss)
    x.assign(x.numpy() - 0.01 * x.grad.numpy())
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
"""


def test_identical_items_collapse_to_one_with_their_count_and_span():
    launches = [{"index": i, "kernel": "step", "arrays": [{"array": f"a{i}", "shape": [4, 4]}]} for i in range(60)]
    launches.append({"index": 60, "kernel": "loss", "arrays": []})
    out = compact({"launches": launches})["launches"]
    assert out[0]["repeated"] == 60 and out[0]["index"] == "0..59" and out[0]["item"]["kernel"] == "step"
    assert out[1] == {"index": 60, "kernel": "loss", "arrays": []}
    # Numbers keep their order (a shape, a trajectory) and are capped, never grouped.
    assert compact([4, 4]) == [4, 4]
    assert compact(list(range(100)), list_cap=5) == [0, 1, 2, 3, 4, "... 94 more ...", 99]
    assert compact("x" * 700, str_cap=600).endswith("... [100 characters cut]")


class Launch(BaseModel):
    index: int
    kernel: str
    grad_norm: float
    source: str | None


class Record(BaseModel):
    ok: bool
    gradient: float
    launches: list[Launch]
    shape: tuple[int, int, int]
    trace: list[float]
    log: str


def _size(data) -> int:
    return len(json.dumps(data, separators=(",", ":")))


def test_a_structured_record_over_budget_is_fitted_and_still_validates_against_the_relaxed_schema():
    record = Record(ok=False, gradient=math.nan, shape=(3, 4, 5), trace=[float(i) for i in range(400)],
                    log="x" * 5000,
                    launches=[Launch(index=i, kernel="step", grad_norm=math.inf, source=None) for i in range(300)])
    data = json.loads(record.model_dump_json())  # as the MCP server holds it: NaN and inf are null
    schema = relax_schema(Record.model_json_schema())
    with pytest.raises(jsonschema.ValidationError):  # the model's own schema rejects a NaN gradient
        jsonschema.validate(data, Record.model_json_schema())
    jsonschema.validate(data, schema)
    small = {"ok": True, "gradient": None, "launches": [], "shape": [1, 2, 3], "trace": [], "log": ""}
    assert fit_structured(small, 200) is small  # a record that fits is returned as it is
    for budget in (SCREEN, 1500, 300):
        fitted = fit_structured(data, budget)
        assert _size(fitted) <= budget, budget
        jsonschema.validate(fitted, schema)
        assert fitted["ok"] is False  # the verdict, declared first, is the last thing left out
        assert OMITTED in fitted
    at_screen = fit_structured(data, SCREEN)
    assert at_screen["launches"][0]["repeated"] == 300 and at_screen["launches"][0]["index"] == "0..299"
    assert len(at_screen["trace"]) < 30 and "more" in at_screen["trace"][-2]
    assert "characters cut" in at_screen["log"]
    # Too small for even the tightest caps: whole fields go, last declared first, and are named with sizes.
    tiny = fit_structured(data, 300)
    assert "log" in tiny[OMITTED]["fields"] and "launches" in tiny[OMITTED]["fields"] and "ok" in tiny
    # A property named like a schema keyword is still a property.
    relaxed = relax_schema({"type": "object", "required": ["required"],
                            "properties": {"required": {"type": "integer"}, "type": {"type": "string"}}})
    assert relaxed["properties"] == {"required": {"type": ["integer", "null"]}, "type": {"type": "string"}}
    assert "required" not in relaxed


@pytest.mark.warp
def test_sixty_identical_launches_read_as_one_entry_and_the_full_record_keeps_all(tmp_path):
    (tmp_path / "train.py").write_text(REPEATED_LAUNCHES, encoding="utf-8")
    spec = load_tools()["inspect_tape"]
    result = spec.call({"script": "train.py", "iteration": 1}, tmp_path)
    full = json.loads(spec.answer(result, "full"))
    assert len(full["tapes"][0]["launches"]) == 61
    summary = spec.answer(result, "summary")
    assert len(summary) <= spec.budget
    launches = json.loads(summary)["tapes"][0]["launches"]
    assert launches[0]["repeated"] == 60 and launches[0]["item"]["kernel"] == "add_square"


@pytest.fixture(scope="module")
def largest(tmp_path_factory):
    ws = tmp_path_factory.mktemp("largest")
    shutil.copytree(ROOT / "evals" / "files" / LARGEST, ws, dirs_exist_ok=True)
    script = next(p.name for p in sorted(ws.glob("*.py")))
    return ws, run_diagnose(DiagnoseArgs(script=script, device="cpu", record=False), ws)


@pytest.mark.warp
def test_diagnose_on_the_largest_suite_program_reads_in_one_screen_and_full_gives_the_whole_record(largest):
    _ws, res = largest
    spec = load_tools()["diagnose"]
    text = spec.answer(res, "summary")
    assert len(text) <= 4000 < len(res.model_dump_json())
    lines = text.splitlines()
    assert lines[0].startswith(f"diagnose {res.script}: ") and res.summary[:80] in lines[0]
    assert any(ln.startswith("next: ") for ln in lines)
    if res.gradcheck is not None and res.gradcheck.directions:
        assert "AD " in text and "FD " in text and "band " in text
    for h in res.hypotheses[:3]:
        assert h.title[:60] in text
    assert json.loads(spec.answer(res, "full")) == json.loads(res.model_dump_json())
    # The structured --json: every top-level field kept, a fraction of the size.
    compacted = json.loads(compact_json(res))
    assert set(compacted) == {k for k, v in res.model_dump().items() if v is not None}
    assert len(compact_json(res)) < len(res.model_dump_json()) / 4


@pytest.mark.warp
def test_every_tool_stage_on_the_largest_suite_program_fits_its_budget(largest):
    ws, res = largest
    tools = load_tools()
    stages = {"gradcheck": res.gradcheck, "inspect_tape": res.tape, "run_script": res.run, "instrument": res.tracker}
    stages["diagnose"] = res
    direct = {"workspace_overview": {}, "quick_checks": {}, "search_code": {"pattern": "wp"},
              "shrink": {"script": res.script}, "read_file": {"path": res.script}}
    stages |= {name: tools[name].call(args, ws) for name, args in direct.items()}
    # The editing tools last (they change the workspace; undo puts it back), on the largest file of the program.
    big = max((p for p in ws.rglob("*.py") if ".warpgrad" not in p.parts), key=lambda p: p.stat().st_size)
    line = next(ln for ln in big.read_text(encoding="utf-8").splitlines() if ln.strip().startswith("import "))
    rel = big.relative_to(ws).as_posix()
    stages["edit_file"] = tools["edit_file"].call({"path": rel, "old_text": line, "new_text": line + "  # x"}, ws)
    stages["undo"] = tools["undo"].call({}, ws)
    for name, record in stages.items():
        if record is None:
            continue
        spec = tools[name]
        assert len(spec.answer(record, "summary")) <= spec.budget, name
        # The structured form too (MCP structured content), and it validates against the output schema.
        data = json.loads(record.model_dump_json())
        fitted = spec.structured(data, "summary")
        assert _size(fitted) <= spec.budget, name
        jsonschema.validate(fitted, spec.output_schema())
        jsonschema.validate(data, spec.output_schema())
    assert _size(json.loads(res.model_dump_json())) > 10 * SCREEN  # the record the budget is tested on is large


@pytest.mark.warp
def test_over_stdio_diagnose_on_the_largest_suite_program_answers_text_and_structured_content_within_budget(
    largest,
):
    """A real MCP client over stdio validates structured content against the listed output schema."""
    ws, _res = largest
    params = StdioServerParameters(command=sys.executable, args=["-m", "warpgrad.cli.agent", "mcp", "--workspace",
                                                                 str(ws)], env=dict(os.environ), cwd=str(ws))
    script = next(p.name for p in sorted(ws.glob("*.py")))

    async def go():
        async with Client(params, read_timeout_seconds=900) as client:
            await client.list_tools()  # so the client validates structured content against the schema
            summary = await client.call_tool("diagnose", {"script": script, "record": False, "device": "cpu"})
            full = await client.read_resource(summary.content[1].uri)
            return summary, full

    summary, full = anyio.run(go)
    assert not summary.is_error, summary.content[0].text
    budget = load_tools()["diagnose"].budget
    assert len(summary.content[0].text) <= budget
    assert _size(summary.structured_content) <= budget < len(full.contents[0].text)
    assert summary.structured_content["gradients_wrong"] is not None
    assert OMITTED in summary.structured_content  # it says that it was fitted and how to get the rest
