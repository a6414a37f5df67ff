"""shrink: size-knob finding and value-only rewriting on real files; the shrunk copy runs with real Warp."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError
from warpgrad.tools.shrink import ShrinkArgs, find_knobs, knob_category, rewrite_values, shrink

SCRIPT = '''"""A cloth-like toy: the knobs below set its size."""
import argparse

import warp as wp

NUM_PARTICLES = 512   # particles in the chain
sim_steps, train_iters = 200, 50
DT = 0.01             # a float: not a size
SEED = 42             # not a count of anything


class Sim:
    def __init__(self, num_frames=300, device="cuda:0", *, grid_res=64):
        self.sim_substeps = 10
        self.n_springs = 4 * NUM_PARTICLES


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-epochs", type=int, default=100, help="epochs")
    parser.add_argument("--device", default="cuda")
    for it in range(1000):
        pass
    Sim(num_frames=120)


if __name__ == "__main__":
    wp.set_device("cuda:0")
    main()
'''


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("NUM_PARTICLES", "particles"),
        ("n_particles", "particles"),
        ("numParticles", "particles"),
        ("sim_steps", "steps"),
        ("num_substeps", "substeps"),
        ("sim_substeps", "substeps"),
        ("train_iters", "iterations"),
        ("n_iter", "iterations"),
        ("num_frames", "frames"),
        ("epochs", "epochs"),
        ("grid_res", "grid"),
        ("nx", "grid"),
        ("batch_size", "batch"),
        ("n_links", "count"),
        ("N", "count"),
        ("--num-epochs", "epochs"),
        ("DT", None),
        ("SEED", None),
        ("learning_rate", None),
        ("width", None),
    ],
)
def test_knob_names_are_classified_by_what_they_count(name, category):
    assert knob_category(name) == category


def test_find_knobs_reads_constants_defaults_argparse_keywords_loops_and_devices():
    knobs = {k.id: k for k in find_knobs(SCRIPT)}
    assert {k: (v.kind, v.value) for k, v in knobs.items()} == {
        "NUM_PARTICLES": ("constant", 512),
        "sim_steps": ("constant", 200),
        "train_iters": ("constant", 50),
        "num_frames@13": ("function_default", 300),
        "device@13": ("function_default", "cuda:0"),
        "grid_res": ("function_default", 64),
        "sim_substeps": ("attribute", 10),
        "num_epochs": ("argparse", 100),
        "device@21": ("argparse", "cuda"),
        "range@22": ("loop", 1000),
        "num_frames@24": ("keyword_arg", 120),
        "device@28": ("device", "cuda:0"),
    }
    assert knobs["sim_substeps"].suggested == 10  # fewer substeps can destabilise the sim: never suggested
    assert knobs["NUM_PARTICLES"].suggested == 16 and knobs["train_iters"].suggested == 3
    assert knobs["device@13"].suggested == knobs["device@28"].suggested == "cpu"


def test_keyword_only_defaults_are_knobs_and_a_keyword_without_default_is_skipped():
    src = "def simulate(*, device, num_steps=100, label='cuda'):\n    pass\n"
    assert [(k.id, k.kind, k.value) for k in find_knobs(src)] == [("num_steps", "function_default", 100)]


def test_bisect_refuses_a_device_other_than_cpu_before_running_anything(tmp_path):
    from pydantic import ValidationError

    from warpgrad.tools.registry import load_tools

    (tmp_path / "s.py").write_text("NUM_STEPS = 8\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="device"):
        load_tools()["bisect"].call({"script": "s.py", "device": "gpu"}, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.py"]


def test_rewriting_changes_only_the_chosen_values_and_keeps_every_comment_and_space():
    knobs = {k.id: k for k in find_knobs(SCRIPT)}
    out = rewrite_values(
        SCRIPT,
        [
            (knobs["NUM_PARTICLES"], 16),
            (knobs["train_iters"], 3),
            (knobs["device@28"], "cpu"),
            (knobs["range@22"], 5),
        ],
    )
    changed = [(a, b) for a, b in zip(SCRIPT.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed == [
        ("NUM_PARTICLES = 512   # particles in the chain", "NUM_PARTICLES = 16   # particles in the chain"),
        ("sim_steps, train_iters = 200, 50", "sim_steps, train_iters = 200, 3"),
        ("    for it in range(1000):", "    for it in range(5):"),
        ('    wp.set_device("cuda:0")', '    wp.set_device("cpu")'),
    ]
    # same tree apart from those constants
    def strip(src):
        return [type(n).__name__ for n in ast.walk(ast.parse(src))]
    assert strip(out) == strip(SCRIPT)


def test_rewriting_handles_non_ascii_text_before_the_literal():
    src = 'LABEL = "ünïcödé"; N_STEPS = 100  # ✓\n'
    (k,) = find_knobs(src)
    assert rewrite_values(src, [(k, 7)]) == 'LABEL = "ünïcödé"; N_STEPS = 7  # ✓\n'


def test_shrink_without_values_lists_knobs_and_writes_nothing(tmp_path):
    (tmp_path / "sim.py").write_text(SCRIPT, encoding="utf-8")
    r = shrink(ShrinkArgs(script="sim.py"), tmp_path)
    assert r.output is None and len(r.knobs) == 12 and "pass `values`" in r.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.py"]


def test_shrink_writes_a_copy_next_to_the_original_and_records_it(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "sim.py").write_text(SCRIPT, encoding="utf-8")
    r = shrink(
        ShrinkArgs(script="src/sim.py", values={"NUM_PARTICLES": 8, "sim_steps": 4}, force_cpu=True), tmp_path
    )
    assert r.output == "src/sim_shrunk.py"
    assert (tmp_path / "src" / "sim.py").read_text(encoding="utf-8") == SCRIPT  # the original is untouched
    text = (tmp_path / "src" / "sim_shrunk.py").read_text(encoding="utf-8")
    assert "NUM_PARTICLES = 8 " in text and "sim_steps, train_iters = 4, 50" in text and "cuda" not in text
    assert {(c.id, c.new) for c in r.changes} >= {
        ("NUM_PARTICLES", 8),
        ("sim_steps", 4),
        ("device@28", "cpu"),
    }
    rec = Ledger(tmp_path).records()[-1]
    assert (
        rec.kind == "shrink"
        and rec.payload["output"] == "src/sim_shrunk.py"
        and "src/sim_shrunk.py" in rec.files
    )
    # a second shrink may rewrite its own copy
    shrink(ShrinkArgs(script="src/sim.py", values={"NUM_PARTICLES": 4}), tmp_path)
    assert "NUM_PARTICLES = 4 " in (tmp_path / "src" / "sim_shrunk.py").read_text(encoding="utf-8")


def test_shrink_refuses_unknown_knobs_and_never_overwrites_a_user_file(tmp_path):
    (tmp_path / "sim.py").write_text(SCRIPT, encoding="utf-8")
    with pytest.raises(ToolError, match=r"unknown knob id.*NUM_PARTICLES=512"):
        shrink(ShrinkArgs(script="sim.py", values={"particles": 8}), tmp_path)
    with pytest.raises(ToolError, match="use force_cpu"):
        shrink(ShrinkArgs(script="sim.py", values={"device@28": 0}), tmp_path)
    (tmp_path / "sim_shrunk.py").write_text("# the user's own file\n", encoding="utf-8")
    with pytest.raises(ToolError, match="user's file"):
        shrink(ShrinkArgs(script="sim.py", values={"NUM_PARTICLES": 8}), tmp_path)
    assert (tmp_path / "sim_shrunk.py").read_text(encoding="utf-8") == "# the user's own file\n"
    with pytest.raises(ToolError, match="never changes the original"):
        shrink(ShrinkArgs(script="sim.py", values={"NUM_PARTICLES": 8}, output="sim.py"), tmp_path)


TOY = """import json
import numpy as np
import warp as wp

from helpers import target  # a sibling module: the shrunk copy must still import it

N_PARTICLES = 4096
TRAIN_ITERS = 40


@wp.kernel
def sq_err(x: wp.array(dtype=float), t: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - t
    wp.atomic_add(loss, 0, d * d)


if __name__ == "__main__":
    x = wp.array(np.zeros(N_PARTICLES, dtype=np.float32), dtype=float, requires_grad=True)
    losses = []
    for it in range(TRAIN_ITERS):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(sq_err, dim=N_PARTICLES, inputs=[x, target()], outputs=[loss])
        tape.backward(loss)
        x.assign(x.numpy() - 0.1 * x.grad.numpy())
        losses.append(float(loss.numpy()[0]))
        print(f"iter {it} loss {losses[-1]}")
    print(json.dumps({"n": N_PARTICLES, "losses": losses}))
"""


@pytest.mark.warp
def test_the_shrunk_copy_of_a_real_warp_script_runs_at_the_small_size(tmp_path):
    (tmp_path / "toy.py").write_text(TOY, encoding="utf-8")
    (tmp_path / "helpers.py").write_text("def target():\n    return 1.0\n", encoding="utf-8")
    r = shrink(ShrinkArgs(script="toy.py", use_suggested=True), tmp_path)
    assert {(c.id, c.new) for c in r.changes} == {("N_PARTICLES", 16), ("TRAIN_ITERS", 3)}
    p = subprocess.run(
        [sys.executable, r.output],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=120,
        env=os.environ.copy(),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["n"] == 16 and len(out["losses"]) == 3
    assert out["losses"][0] == pytest.approx(16.0) and out["losses"][2] < out["losses"][0]


@pytest.mark.warp
def test_shrink_with_run_reports_the_time_and_loss_trajectory_of_the_copy(tmp_path):
    (tmp_path / "toy.py").write_text(TOY, encoding="utf-8")
    (tmp_path / "helpers.py").write_text("def target():\n    return 1.0\n", encoding="utf-8")
    r = shrink(
        ShrinkArgs(
            script="toy.py",
            values={"N_PARTICLES": 8, "TRAIN_ITERS": 4},
            force_cpu=True,
            run=True,
            timeout_s=120,
        ),
        tmp_path,
    )
    assert r.run is not None and r.run["ok"], r.run
    assert r.run["script"] == "toy_shrunk.py" and r.run["device"] == "cpu"
    assert r.wall_s is not None and r.wall_s > 0
    assert r.loss_trajectory is not None and len(r.loss_trajectory) == 4
    assert r.loss_trajectory[0] == pytest.approx(8.0) and r.loss_trajectory[-1] < r.loss_trajectory[0]
    # the copy imported its sibling module from the original's folder
    assert "helpers.py" in r.run["files"]


# A program whose sizes hide behind one-letter names: only their use says what they count.
TERSE = '''\
import numpy as np
import warp as wp

T = 60
P = 24
E = 3
DT = 0.01


@wp.kernel
def drift(x: wp.array(dtype=float), v: wp.array(dtype=float), out: wp.array(dtype=float), dt: float):
    i = wp.tid()
    out[i] = x[i] + v[i] * dt


@wp.kernel
def reduce(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


v = wp.array(np.linspace(0.1, 0.5, P).astype(np.float32), dtype=float, requires_grad=True)
for epoch in range(E):
    states = [wp.zeros(P, dtype=float, requires_grad=True) for _ in range(T + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(drift, dim=P, inputs=[states[t], v, states[t + 1], DT])
        wp.launch(reduce, dim=P, inputs=[states[T]], outputs=[loss])
    tape.backward(loss)
    v.assign(v.numpy() - 0.1 * v.grad.numpy())
    print(f"epoch {epoch} loss {loss.numpy()[0]:.6f} steps {T}")
'''


def test_module_constants_are_knobs_by_their_use_whatever_their_name():
    knobs = {k.name: k for k in find_knobs(TERSE)}
    assert (knobs["T"].category, knobs["T"].value) == ("steps", 60)
    assert (knobs["P"].category, knobs["E"].category) == ("particles", "iterations")
    assert "DT" not in knobs  # a float never sizes the work
    rebound = TERSE.replace("P = 24\n", "P = 24\nP = P * 2\n")
    assert "P" not in {k.name for k in find_knobs(rebound)}  # rebound: the literal is not the value used


@pytest.mark.warp
def test_shrink_varies_one_letter_constants_in_a_staged_copy_that_runs(tmp_path):
    (tmp_path / "roll.py").write_text(TERSE, encoding="utf-8")
    r = shrink(ShrinkArgs(script="roll.py", values={"T": 5, "P": 4}, run=True), tmp_path)
    assert {(c.id, c.new) for c in r.changes} == {("T", 5), ("P", 4)}
    assert (tmp_path / "roll.py").read_text(encoding="utf-8") == TERSE  # the user's file is never edited
    assert r.run is not None and r.run["ok"] and "steps 5" in r.run["stdout_tail"]


@pytest.mark.warp
def test_bisect_takes_a_time_loop_constant_as_its_horizon_without_a_wrapper(tmp_path):
    from warpgrad.tools.horizon import BisectArgs, bisect_horizon

    (tmp_path / "roll.py").write_text(TERSE, encoding="utf-8")
    r = bisect_horizon(BisectArgs(script="roll.py", record=False, device="cpu"), tmp_path)
    assert r.knob == "T" and r.knob_line == 4
    # v.grad is never zeroed (a fresh tape does not clear it): wrong at every horizon, so the staged copies at
    # T = 60 and T = 1 both fail and the bisection says so.
    assert r.ok and {c.horizon for c in r.checks} == {1, 60} and r.first_failing == 1
    assert sorted(p.name for p in tmp_path.glob("*.py")) == ["roll.py"]  # the staged copies are gone
