"""The broken-simulation eval cases of issue 7, second half (cases B).

The metadata checks are static and cover every case. The Warp checks run three representative cases
for real (fixture staged in a temporary folder, probe and FD in a subprocess through
``evals/graders/fdcheck_b.py``) and assert the signature each case promises, before and after its
reference fix.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path

import pytest

EVALS = Path(__file__).resolve().parents[1] / "evals"
GRADERS = EVALS / "graders"

CASES_B = {
    "ballistic_sensor_fit": 13,
    "heater_layout_steady_state": 14,
    "drone_swarm_formation": 15,
    "hanging_rope_mocap": 16,
    "spray_nozzle_aim": 17,
    "particle_heat_recovery": 18,
    "suspension_rig_identification": 19,
    "dye_stirring_vortices": 20,
    "moon_mass_ephemeris": 21,
    "vibration_isolator_tuning": 22,
    "stepper_cart_parking": 23,
    "glider_gust_launch": 24,
    "field_robot_rally": 25,
    "puck_drop_release_heights": 26,
    "parcel_chute_peak_speed": 26,
}
SIGNATURES = {
    "correct",
    "zero",
    "nan_inf",
    "exact_factor",
    "subtly_wrong",
    "sparse_subset",
    "grows_across_iterations",
    "truncation",
    "inconclusive",
}
VERDICTS = {"gradients_wrong", "gradients_correct", "not_applicable"}


def _load_fdcheck():
    spec = importlib.util.spec_from_file_location("fdcheck_b", GRADERS / "fdcheck_b.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _meta(case_id: str) -> dict:
    return json.loads((GRADERS / case_id / "meta.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case_id", sorted(CASES_B))
def test_case_metadata_is_complete_and_points_at_real_fixture_lines(case_id: str) -> None:
    meta = _meta(case_id)
    assert meta["id"] == case_id
    assert meta["brief_case"] == CASES_B[case_id]
    assert meta["should_trigger"] is True
    assert meta["expected_verdict"] in VERDICTS
    assert meta["expected_signature"] in SIGNATURES
    assert meta["prompt"].strip() and meta["expected_output"].strip()
    assert len(meta["assertions"]) >= 4
    for rel in meta["files"]:
        assert (EVALS / rel).is_file(), rel
    fixture = EVALS / "files" / case_id
    assert (fixture / meta["entry"]).is_file()
    assert any(rel.endswith(meta["entry"]) for rel in meta["files"])
    for loc in meta["root_cause"]:
        lines = (fixture / loc["file"]).read_text(encoding="utf-8").splitlines()
        assert 1 <= loc["line"] <= len(lines) and lines[loc["line"] - 1].strip(), loc
    if meta["expected_verdict"] == "gradients_wrong":
        assert meta["root_cause"], "a positive case must say where the fix belongs"
        assert (GRADERS / case_id / "fixed").is_dir()
    probe = ast.parse((GRADERS / case_id / "probe.py").read_text(encoding="utf-8"))
    defined = {n.name for n in probe.body if isinstance(n, ast.FunctionDef)}
    assert {"params", "loss", "grad"} <= defined


@pytest.mark.parametrize("case_id", sorted(CASES_B))
def test_fixture_files_are_listed_and_fixes_only_patch_existing_files(case_id: str) -> None:
    meta = _meta(case_id)
    fixture = EVALS / "files" / case_id
    on_disk = {p.relative_to(EVALS).as_posix() for p in fixture.rglob("*.py")}
    assert on_disk == set(meta["files"])
    fixed = GRADERS / case_id / "fixed"
    if fixed.is_dir():
        patched = [p.relative_to(fixed) for p in fixed.rglob("*.py")]
        assert patched
        for rel in patched:
            original = (fixture / rel).read_text(encoding="utf-8")
            assert (fixed / rel).read_text(encoding="utf-8") != original, f"{rel} is not patched"


@pytest.mark.warp
def test_duplicate_launch_onto_retain_grad_array_doubles_the_gradient_and_the_fix_restores_it() -> None:
    fd = _load_fdcheck()
    bug = fd.check_case("ballistic_sensor_fit")
    fixed = fd.check_case("ballistic_sensor_fit", fixed=True)
    assert bug["ok"] and fixed["ok"], (bug, fixed)
    assert bug["ratio"] == pytest.approx(2.0, rel=5e-3)
    assert fixed["ratio"] == pytest.approx(1.0, rel=5e-3)


@pytest.mark.warp
def test_dynamic_loop_accumulators_give_nan_gradients_until_the_loop_moves_into_a_function() -> None:
    fd = _load_fdcheck()
    bug = fd.check_case("particle_heat_recovery")
    fixed = fd.check_case("particle_heat_recovery", fixed=True)
    assert bug["ok"] and fixed["ok"], (bug, fixed)
    assert bug["ad_nonfinite"] and math.isfinite(bug["fd_dot_v"]) and bug["fd_dot_v"] != 0.0
    assert not fixed["ad_nonfinite"]
    assert fixed["ratio"] == pytest.approx(1.0, rel=5e-3)


@pytest.mark.warp
def test_stochastic_forward_makes_naive_fd_inconclusive_while_a_pinned_seed_confirms_the_gradient() -> None:
    fd = _load_fdcheck()
    naive = fd.check_case("glider_gust_launch")
    pinned = fd.check_case("glider_gust_launch", probe_name="probe_seeded.py")
    assert naive["ok"] and pinned["ok"], (naive, pinned)
    # The user's objective redraws its gusts on every call, so two calls at the same point differ.
    assert naive["loss_repeat_diff"] > 0.0
    assert pinned["loss_repeat_diff"] == 0.0
    assert pinned["ratio"] == pytest.approx(1.0, rel=5e-3)
