"""The tracker is clean on a correct program even when its module holds an in-place kernel it never tapes
and it updates parameters with warp.optim (whose own kernel writes in place outside the tape)."""

import pytest
from programs import HEADER, write_program

from warpgrad.tools.tracker import run_tracker

pytestmark = pytest.mark.warp


def test_untaped_and_warp_internal_in_kernel_warnings_do_not_make_a_correct_program_unclean(tmp_path):
    write_program(tmp_path, "healthy_optim")
    r = run_tracker(tmp_path, "train.py")
    assert r.ok and r.clean and r.records == []
    assert any("step_inplace" in n and "sgd_step_kernel" in n for n in r.notes)


def test_a_taped_overwrite_still_counts(tmp_path):
    write_program(tmp_path, "pingpong")
    r = run_tracker(tmp_path, "train.py")
    assert not r.clean and [x.kind for x in r.records] == ["across_launches"]


def test_an_in_place_kernel_launched_on_the_tape_is_reported_at_its_write(tmp_path):
    body = """
v = wp.array(init_v(), dtype=float, requires_grad=True)
x = wp.zeros(N, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(step_inplace, N, inputs=[x, v, 0.1])
    wp.launch(loss_k, N, inputs=[x, target], outputs=[loss])
tape.backward(loss)
print(v.grad.numpy())
"""
    (tmp_path / "train.py").write_text(HEADER + body, encoding="utf-8")
    r = run_tracker(tmp_path, "train.py")
    within = [x for x in r.records if x.kind == "within_kernel"]
    assert [(x.kernel, x.argument) for x in within] == [("step_inplace", "x")]
    src = (tmp_path / "train.py").read_text(encoding="utf-8").splitlines()
    assert src[within[0].line - 1].strip().startswith("x[i] = x[i] + v[i] * dt")
