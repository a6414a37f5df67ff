"""inspect_tape on real Warp programs: each hazard kind appears for a program with that bug and not
for its fixed version (one small training script, the case and variant chosen on the command line)."""

from __future__ import annotations

import json

import pytest

from warpgrad.tools.harness.protocol import RecordedTape
from warpgrad.tools.registry import load_tools
from warpgrad.tools.tape import InspectTapeResult, inspect
from warpgrad.tools.tape_hazards import hazards

CASES_PY = r"""
import sys
import numpy as np
import warp as wp

BUG = sys.argv[1] == "bug"
CASES = sys.argv[2].split(",")


@wp.struct
class State:
    q: wp.array(dtype=float)


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def twice(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel(enable_backward=False)
def twice_nobwd(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel
def read_struct(s: State, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = s.q[i] * s.q[i]


@wp.kernel
def fill(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 3.0


@wp.kernel
def scale_inplace(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] *= b[i]


@wp.kernel
def scale_out(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float)):
    i = wp.tid()
    c[i] = a[i] * b[i]


@wp.kernel
def sin_inplace(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = wp.sin(a[i])


@wp.kernel
def sin_out(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = wp.sin(a[i])


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def arr(requires_grad=True, **kw):
    return wp.array(np.array([0.5, 1.0, 1.5]), dtype=float, requires_grad=requires_grad, **kw)


def case_war(tape, loss):
    a, b, c = arr(), arr(), arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.launch(square, 3, inputs=[a], outputs=[b])
        wp.launch(twice, 3, inputs=[x], outputs=[a if BUG else c])  # overwrites a, read just before
        wp.launch(total, 3, inputs=[b], outputs=[loss])
        wp.launch(total, 3, inputs=[a if BUG else c], outputs=[loss])


def case_struct(tape, loss):
    b, c = arr(), arr()
    s = State()
    s.q = wp.zeros(3, dtype=float, requires_grad=True)
    with tape:
        wp.launch(twice, 3, inputs=[x], outputs=[s.q])
        wp.launch(read_struct, 3, inputs=[s], outputs=[b])
        wp.launch(twice, 3, inputs=[b], outputs=[s.q if BUG else c])  # s.q was read through the struct
        wp.launch(total, 3, inputs=[b], outputs=[loss])


def case_alias(tape, loss):
    a, b, c = arr(), arr(), arr()
    view = wp.array(ptr=a.ptr, shape=(3,), dtype=float, device=a.device) if BUG else c
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.launch(square, 3, inputs=[a], outputs=[b])
        wp.launch(twice, 3, inputs=[x], outputs=[view])
        wp.launch(total, 3, inputs=[b], outputs=[loss])


def case_pingpong(tape, loss):
    cur, nxt = arr(), arr()
    states = [arr() for _ in range(4)]
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[cur if BUG else states[0]])
        for step in range(3):
            if BUG:
                wp.launch(square, 3, inputs=[cur], outputs=[nxt])
                cur, nxt = nxt, cur
            else:
                wp.launch(square, 3, inputs=[states[step]], outputs=[states[step + 1]])
        wp.launch(total, 3, inputs=[cur if BUG else states[3]], outputs=[loss])


def case_untaped(tape, loss):
    a, b, c = arr(), arr(), arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.launch(square, 3, inputs=[a], outputs=[b])
        wp.launch(fill, 3, inputs=[a if BUG else c], record_tape=False)
        wp.launch(total, 3, inputs=[b], outputs=[loss])


def case_host(tape, loss):
    a, b, c = arr(), arr(), arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.launch(square, 3, inputs=[a], outputs=[b])
        wp.launch(total, 3, inputs=[b], outputs=[loss])
    (a if BUG else c).fill_(7.0)


def case_nofeed(tape, loss):
    a, junk = arr(), arr()
    if not BUG:
        wp.launch(fill, 3, inputs=[junk])
    with tape:
        if BUG:
            wp.launch(fill, 3, inputs=[junk])
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.launch(total, 3, inputs=[a], outputs=[loss])


def case_twice(tape, loss):
    a = arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        if BUG:
            tape.record_launch(square, (3,), 0, [x], [a], x.device)
        wp.launch(total, 3, inputs=[a], outputs=[loss])


def case_stale(tape, loss):
    a = arr()
    if not BUG:
        tape.reset()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.launch(total, 3, inputs=[a], outputs=[loss])


def case_nograd(tape, loss):
    a, mid = arr(), arr(requires_grad=not BUG)
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[mid])
        wp.launch(square, 3, inputs=[mid], outputs=[a])
        wp.launch(total, 3, inputs=[a], outputs=[loss])


def case_copycut(tape, loss):
    a, c = arr(), arr()
    b = arr(requires_grad=not BUG)
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        wp.copy(b, a)  # without .grad on b Warp does not record the copy
        wp.launch(square, 3, inputs=[b], outputs=[c])
        wp.launch(total, 3, inputs=[c], outputs=[loss])


def case_nobwd(tape, loss):
    a = arr()
    with tape:
        wp.launch(twice_nobwd if BUG else twice, 3, inputs=[x], outputs=[a])
        wp.launch(total, 3, inputs=[a], outputs=[loss])


def case_retain(tape, loss):
    mid = wp.zeros(3, dtype=float, requires_grad=True, retain_grad=True)
    with tape:
        wp.launch(twice, 3, inputs=[x], outputs=[mid])
        if BUG:
            wp.launch(square, 3, inputs=[x], outputs=[mid])
        wp.launch(total, 3, inputs=[mid], outputs=[loss])


def case_copy(tape, loss):
    a, b = arr(), arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        if BUG:
            wp.copy(b, a)
        else:
            wp.launch(twice, 3, inputs=[a], outputs=[b])
        wp.launch(total, 3, inputs=[b], outputs=[loss])


def case_inplace(tape, loss):
    a, c = arr(), arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        if BUG:
            wp.launch(scale_inplace, 3, inputs=[a, x])
            wp.launch(total, 3, inputs=[a], outputs=[loss])
        else:
            wp.launch(scale_out, 3, inputs=[a, x], outputs=[c])
            wp.launch(total, 3, inputs=[c], outputs=[loss])


def case_within(tape, loss):
    a, c = arr(), arr()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[a])
        if BUG:
            wp.launch(sin_inplace, 3, inputs=[a])
            wp.launch(total, 3, inputs=[a], outputs=[loss])
        else:
            wp.launch(sin_out, 3, inputs=[a], outputs=[c])
            wp.launch(total, 3, inputs=[c], outputs=[loss])


x = arr()
shared_tape = wp.Tape()
for it in range(2):
    # One tape per case, each with its own backward, all in the same training iteration.
    for name in CASES:
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = shared_tape if name == "stale" else wp.Tape()
        globals()["case_" + name](tape, loss)
        tape.backward(loss)
    g = x.grad.numpy().copy()
    x.assign(x.numpy() - 0.01 * g)
    x.grad.zero_()
print("done")
"""

CASES = {  # case -> hazard kind it must produce (and its fix must not)
    "war": "write_after_read",
    "struct": "write_after_read",
    "alias": "write_after_read",
    "pingpong": "write_after_read",
    "untaped": "mutated_before_backward",
    "host": "mutated_before_backward",
    "nofeed": "not_feeding_loss",
    "twice": "recorded_twice",
    "stale": "stale_launches",
    "nograd": "chain_cut_requires_grad",
    "copycut": "chain_cut_requires_grad",
    "nobwd": "chain_cut_backward_disabled",
    "retain": "retain_grad_rewritten",
    "copy": "copy_on_tape",
    "inplace": "inplace_update",
    "within": "within_kernel_overwrite",
}
RULES = {
    "struct": "WG019",
    "alias": "WG017",
    "pingpong": "WG005",
    "nograd": "WG001",
    "nobwd": "WG002",
    "retain": "WG018",
    "stale": "WG003",
    "inplace": "WG007",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, InspectTapeResult]:
    ws = tmp_path_factory.mktemp("tape_ws")
    (ws / "cases.py").write_text(CASES_PY, encoding="utf-8")
    cases = ",".join(CASES)
    # Every case runs as its own tape in iteration 1: one harness run per variant.
    return {
        v: inspect(ws, "cases.py", [v, cases], timeout_s=180, max_tapes=len(CASES)) for v in ("bug", "fix")
    }


def _of(res: InspectTapeResult, case: str) -> list:
    k = list(CASES).index(case)
    return [h for h in res.hazards if h.tape == k]


def _kinds(hs: list) -> set[str]:
    return {h.kind for h in hs}


@pytest.mark.warp
@pytest.mark.parametrize("case", list(CASES))
def test_each_hazard_kind_appears_for_the_bug_and_not_for_its_fix(results, case):
    bug, fix = results["bug"], results["fix"]
    assert bug.ok and fix.ok, (bug.reason, bug.error, fix.reason, fix.error)
    assert len(bug.tapes) == len(fix.tapes) == len(CASES)
    kind = CASES[case]
    assert kind in _kinds(_of(bug, case)), [h.model_dump() for h in _of(bug, case)]
    assert kind not in _kinds(_of(fix, case)), [h.model_dump() for h in _of(fix, case)]
    if case in RULES:
        assert RULES[case] in {h.rule for h in _of(bug, case) if h.kind == kind}
    assert all(h.reference and h.reference.startswith("references/quick-checks.md §") for h in _of(bug, case))


@pytest.mark.warp
def test_fixed_programs_have_no_error_or_warning_hazards(results):
    noisy = [(h.tape, h.kind, h.message) for h in results["fix"].hazards if h.severity != "info"]
    assert noisy == []


@pytest.mark.warp
def test_hazards_point_at_the_users_launch_line(results):
    src = CASES_PY.splitlines()
    war = next(h for h in _of(results["bug"], "war") if h.kind == "write_after_read")
    assert war.file == "cases.py"
    assert "wp.launch(twice" in src[war.line - 1]
    assert war.severity == "error"  # the fingerprint proves the values changed before backward
    untaped = next(h for h in _of(results["bug"], "untaped") if h.kind == "mutated_before_backward")
    assert "record_tape=False" in src[untaped.line - 1]
    host = next(h for h in _of(results["bug"], "host") if h.kind == "mutated_before_backward")
    assert host.severity == "error" and host.arrays == ["a"]
    nograd = next(h for h in _of(results["bug"], "nograd") if h.kind == "chain_cut_requires_grad")
    assert nograd.arrays == ["mid"]


@pytest.mark.warp
def test_the_described_tape_is_the_captured_iterations_with_arrays_and_access(results):
    res = results["bug"]
    assert res.iteration == 1
    tape = res.tapes[list(CASES).index("struct")]
    assert [launch.kernel for launch in tape.launches] == ["twice", "read_struct", "twice", "total"]
    assert tape.loss == ["loss"]
    rs = tape.launches[1]
    struct_use = next(u for u in rs.arrays if u.arg == "s")
    assert struct_use.field == "q" and struct_use.read and not struct_use.written
    assert struct_use.shape == [3] and struct_use.dtype == "float32" and struct_use.requires_grad
    nb = res.tapes[list(CASES).index("nobwd")].launches[0]
    assert nb.backward_enabled is False and nb.backward_disabled_by == "kernel"


@pytest.mark.warp
def test_a_script_that_fails_gives_a_structured_error(tmp_path):
    (tmp_path / "broken.py").write_text("import warp as wp\nraise RuntimeError('boom')\n", encoding="utf-8")
    res = inspect(tmp_path, "broken.py", [], timeout_s=60)
    assert not res.ok
    assert res.error is not None and res.error.kind == "script_raised" and "boom" in res.error.message


def test_hazards_is_a_pure_function_of_a_json_description():
    desc = {
        "backward_index": 0,
        "loss": ["a2"],
        "warp_version": "1.16.0",
        "arrays": {
            "a0": {
                "id": "a0",
                "name": "x",
                "shape": [3],
                "dtype": "float32",
                "device": "cpu",
                "requires_grad": True,
                "retain_grad": False,
                "ptr": 1000,
                "nbytes": 12,
            },
            "a1": {
                "id": "a1",
                "name": "y",
                "shape": [3],
                "dtype": "float32",
                "device": "cpu",
                "requires_grad": True,
                "retain_grad": False,
                "ptr": 2000,
                "nbytes": 12,
            },
            "a2": {
                "id": "a2",
                "name": "loss",
                "shape": [1],
                "dtype": "float32",
                "device": "cpu",
                "requires_grad": True,
                "retain_grad": False,
                "ptr": 3000,
                "nbytes": 4,
            },
        },
        "launches": [
            {
                "index": 0,
                "type": "copy",
                "kernel": "wp.copy",
                "site": {"file": "s.py", "line": 5},
                "arrays": [
                    {"arg": "src", "array": "a0", "read": True, "written": False},
                    {"arg": "dest", "array": "a1", "read": False, "written": True},
                ],
            },
            {
                "index": 1,
                "type": "kernel",
                "kernel": "k",
                "site": {"file": "s.py", "line": 6},
                "arrays": [
                    {"arg": "x", "array": "a0", "read": True, "written": False},
                    {"arg": "y", "array": "a1", "read": True, "written": False},
                    {"arg": "loss", "array": "a2", "read": False, "written": True, "accumulate_only": True},
                ],
            },
        ],
    }
    desc = json.loads(json.dumps(desc))
    hs = hazards(RecordedTape.model_validate(desc))
    copy = next(h for h in hs if h.kind == "copy_on_tape")
    # Before 1.17 a copy whose source has another reader loses that reader's gradient.
    assert copy.severity == "error" and copy.line == 5
    desc["warp_version"] = "1.19.0"
    assert next(h for h in hazards(RecordedTape.model_validate(desc)) if h.kind == "copy_on_tape").severity == "info"


def test_inspect_tape_and_instrument_are_registered_tools():
    tools = load_tools()
    assert {"inspect_tape", "instrument"} <= set(tools)
    assert tools["inspect_tape"].long_running and tools["instrument"].long_running


LOCALIZE_PY = r"""
import sys
import numpy as np
import warp as wp


@wp.func
def cube_ish(x: float):
    return x * x


@wp.func_grad(cube_ish)
def adj_cube_ish(x: float, adj_ret: float):
    wp.adjoint[x] += 3.0 * x * adj_ret  # wrong on purpose: d/dx x^2 is 2x


@wp.kernel
def root(x: wp.array(dtype=float), d: wp.array(dtype=float)):
    i = wp.tid()
    d[i] = wp.sqrt(x[i])


@wp.kernel
def custom(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = cube_ish(x[i])


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel(enable_backward=False)
def frozen(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + 1.0


@wp.kernel
def total3(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, a[i] + b[i] + c[i])


x = wp.array(np.array([0.0, 2.0]), dtype=float, requires_grad=True)
for it in range(2):
    d, f, s, s2, k = (wp.zeros(2, dtype=float, requires_grad=True) for _ in range(5))
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(root, 2, inputs=[x], outputs=[d])
        wp.launch(custom, 2, inputs=[x], outputs=[f])
        wp.launch(square, 2, inputs=[x], outputs=[s])
        wp.copy(s2, s)
        wp.launch(frozen, 2, inputs=[x], outputs=[k])
        wp.launch(total3, 2, inputs=[d, f, s2, loss])
    tape.backward(loss)
    np.save(f"grad_{sys.argv[1]}_{it}.npy", x.grad.numpy())
    tape.zero()
"""


@pytest.mark.warp
def test_localization_finds_the_nan_origin_and_the_failing_kernel_and_lists_what_it_skipped(tmp_path):
    import subprocess
    import sys

    import numpy as np

    (tmp_path / "loc.py").write_text(LOCALIZE_PY, encoding="utf-8")
    res = inspect(tmp_path, "loc.py", ["loc"], gradcheck_launches=True, timeout_s=180)
    assert res.ok, (res.reason, res.error)
    tape = res.tapes[0]
    src = LOCALIZE_PY.splitlines()
    nan = tape.nan_origin
    assert nan is not None and nan.nonfinite_adjoints
    assert nan.kernel == "root" and nan.arrays == ["x"] and nan.output_adjoints_finite
    assert "wp.launch(root" in src[nan.line - 1]
    status = {c.kernel: (c.status, c.passed) for c in tape.gradcheck}
    assert status == {"root": ("nan", False), "custom": ("failed", False), "square": ("passed", True)}
    custom = next(c for c in tape.gradcheck if c.kernel == "custom")
    assert custom.rows[0].ad == pytest.approx(6.0, rel=1e-3) and custom.rows[0].fd == pytest.approx(
        4.0, rel=1e-2
    )
    skipped = {s.kernel: s.reason for s in tape.gradcheck_skipped}
    assert "enable_backward=False" in skipped["frozen"]
    assert "no outputs=" in skipped["total3"]
    assert any(
        "copy" in s.reason for s in tape.gradcheck_skipped if s.kernel is None or s.kernel == "wp.copy"
    )
    # The checks left the user's gradients exactly as a plain run computes them.
    subprocess.run(
        [sys.executable, "loc.py", "plain"], cwd=tmp_path, check=True, capture_output=True, timeout=120
    )
    for it in (0, 1):
        assert np.array_equal(
            np.load(tmp_path / f"grad_loc_{it}.npy"),
            np.load(tmp_path / f"grad_plain_{it}.npy"),
            equal_nan=True,
        )


def _dup_desc(retain: bool, accumulate: bool, version: str = "1.19.0") -> dict:
    arr = {"device": "cpu", "shape": [3], "dtype": "float32", "requires_grad": True, "nbytes": 12}
    use = [
        {"arg": "x", "array": "a0", "read": True, "written": False},
        {"arg": "y", "array": "a1", "read": False, "written": True, "accumulate_only": accumulate},
    ]
    return {
        "backward_index": 0,
        "loss": ["a1"],
        "warp_version": version,
        "arrays": {
            "a0": {**arr, "id": "a0", "name": "x", "ptr": 100, "retain_grad": False},
            "a1": {**arr, "id": "a1", "name": "y", "ptr": 200, "retain_grad": retain},
        },
        "launches": [
            {
                "index": k,
                "type": "kernel",
                "kernel": "k",
                "site": {"file": "s.py", "line": 3 + k},
                "signature": "k|a0|a1",
                "arrays": [dict(u) for u in use],
            }
            for k in range(2)
        ],
    }


@pytest.mark.parametrize(
    ("retain", "accumulate", "version", "severity"),
    [
        (False, False, "1.19.0", "info"),  # plain stores: the first adjoint consumes the gradient
        (True, False, "1.19.0", "error"),  # retain_grad: counted twice
        (False, True, "1.19.0", "warning"),  # accumulation: value and gradient both doubled
        (False, False, "1.12.1", "error"),  # before 1.13 stores were not consumed
    ],
)
def test_a_duplicate_launch_is_graded_by_what_its_adjoint_does_twice(retain, accumulate, version, severity):
    desc = RecordedTape.model_validate(_dup_desc(retain, accumulate, version))
    h = next(h for h in hazards(desc) if h.kind == "recorded_twice")
    assert h.severity == severity and h.launches == [0, 1] and h.line == 4
