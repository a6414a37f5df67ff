"""The skill's measured claims hold on the installed Warp, and its code blocks are programs that run.

Every number in skill/SKILL.md and references/*.md comes from a program in tests/reference_examples/.
Each program prints one JSON line last; CLAIMS pairs a sentence quoted from the markdown with an
assertion on that output, so a Warp release that changes a behaviour fails the test named for the
claim that went stale. Most programs are not shown to the model (the prose states the result); the
few that are, appear as ```python blocks preceded by `<!-- example: NAME.py -->`, verbatim copies of
the file. After editing such a file, run `python tests/test_skill_references.py --sync`. Probe files
(`probe_*.py`) print nothing: they are checked through `warpgrad gradcheck --probe`.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from warpgrad.agent import prompt

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests" / "reference_examples"
DOCS = [ROOT / "skill" / "SKILL.md", *sorted((ROOT / "references").glob("*.md"))]
BLOCK = re.compile(r"<!-- example: (?P<name>[\w.-]+\.py) -->\n```python\n(?P<code>.*?)```\n", re.DOTALL)
# An older Warp for the version caveats (optional). CI: `python -m venv $WARPGRAD_OLD_WARP_VENV &&
# $WARPGRAD_OLD_WARP_VENV/bin/pip install warp-lang==1.16.0 numpy`.
OLD_WARP_PYTHON = Path(os.environ.get("WARPGRAD_OLD_WARP_VENV", "/work/venv-warp116")) / "bin" / "python"


def sync() -> None:
    """Rewrite every embedded example block from its file (the files are the source of truth)."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        new = BLOCK.sub(
            lambda m: (
                f"<!-- example: {m['name']} -->\n```python\n"
                f"{(EXAMPLES / m['name']).read_text(encoding='utf-8')}```\n"
            ),
            text,
        )
        if new != text:
            doc.write_text(new, encoding="utf-8")
            print(f"synced {doc.relative_to(ROOT)}")


def embedded_examples() -> dict[str, list[str]]:
    """{example file name: [docs embedding it]}."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for m in BLOCK.finditer(doc.read_text(encoding="utf-8")):
            found.setdefault(m["name"], []).append(doc.name)
    return found


# --- drift between the markdown and the example files (no Warp needed) ---------------------------------


def test_every_python_block_in_the_skill_is_an_embedded_example_file():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        fences = len(re.findall(r"^```python$", text, flags=re.MULTILINE))
        embedded = len(BLOCK.findall(text))
        assert fences == embedded, (
            f"{doc.name}: {fences - embedded} python block(s) without an example marker"
        )


def test_embedded_examples_match_their_files_verbatim():
    for doc in DOCS:
        for m in BLOCK.finditer(doc.read_text(encoding="utf-8")):
            path = EXAMPLES / m["name"]
            assert path.is_file(), f"{doc.name} embeds {m['name']}, which does not exist"
            assert m["code"] == path.read_text(encoding="utf-8"), (
                f"{doc.name}: block for {m['name']} drifted from the file; run "
                "`python tests/test_skill_references.py --sync`"
            )


# --- running the examples against the installed Warp -----------------------------------------------------


@dataclass(frozen=True)
class Run:
    name: str
    args: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return " ".join((self.name, *self.args))


# Runs with the tracker on rebuild their module every time: start them first so the two workers finish
# together.
RUNS = [
    Run("ver_tracker.py"),
    Run("cs2_copy_overwrite.py", ("--tracker",)),
    Run("qc1_overwrite.py"),
    Run("cs1_state_aliasing.py", ("--tracker",)),
    Run("ver_tracker_build.py", ("on",)),
    Run("ver_tracker_build.py", ("off",)),
    Run("cs1_state_aliasing.py"),
    Run("cs2_copy_overwrite.py"),
]
RUNS += [
    Run(p.name)
    for p in sorted(EXAMPLES.glob("*.py"))
    if p.name not in {r.name for r in RUNS} and not p.name.startswith("probe_")
]
RUNS += [Run("qc6_component_and_loops.py", ("--overwrites",))]
# Examples that need a package outside warpgrad's dependencies: their claims are skipped without it.
NEEDS = {"interop_torch.py": "torch"}


def missing_dependency(example: str) -> str | None:
    module = NEEDS.get(example)
    return module if module and importlib.util.find_spec(module) is None else None


@dataclass
class Output:
    result: dict[str, Any] | None
    stdout: str
    stderr: str
    returncode: int


def run_example(run: Run, python: str = sys.executable, timeout: float = 240) -> Output:
    proc = subprocess.run(
        [python, str(EXAMPLES / run.name), *run.args],
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        cwd=EXAMPLES,
        env=os.environ.copy(),
    )
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if proc.returncode == 0 and lines and lines[-1].startswith("{") else None
    return Output(result, proc.stdout, proc.stderr, proc.returncode)


@pytest.fixture(scope="module")
def outputs() -> dict[str, Output]:
    # Two workers: one per core. Each example is its own Warp module, so they compile in parallel
    # into separate cache entries.
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(zip([r.key for r in RUNS], pool.map(run_example, RUNS)))
    # The second "on"/"off" runs show what the flag does to caching; they need the first ones finished.
    done["ver_tracker_build.py on#2"] = run_example(Run("ver_tracker_build.py", ("on",)))
    done["ver_tracker_build.py off#2"] = run_example(Run("ver_tracker_build.py", ("off",)))
    return done


def close(a: float, b: float, rel: float = 1e-3) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def decorator_line(example: str, kernel: str) -> int:
    """1-based line of the `@wp.kernel` decorator of `kernel` in an example file."""
    lines = (EXAMPLES / example).read_text(encoding="utf-8").splitlines()
    index = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {kernel}("))  # 0-based `def` line
    assert lines[index - 1].startswith("@wp.kernel")
    return index  # the 1-based number of the line above the `def`


def source_line(example: str, number: int) -> str:
    return (EXAMPLES / example).read_text(encoding="utf-8").splitlines()[number - 1]


def overwrite_warnings(text: str) -> int:
    return text.count("has already been read from")


@dataclass(frozen=True)
class Claim:
    doc: str
    quote: str  # must appear verbatim in `doc`
    run: str  # Run.key
    check: Callable[[Output], bool]


def r(out: Output) -> dict[str, Any]:
    assert out.result is not None, f"example failed (rc={out.returncode}):\n{out.stderr[-3000:]}"
    return out.result


QC, VER, CG, CS, SK = (
    "quick-checks.md",
    "verification.md",
    "custom-gradients.md",
    "case-studies.md",
    "SKILL.md",
)

CLAIMS: dict[str, Claim] = {
    # quick-checks.md §1
    "overwrite gives 10,10,10 instead of 2,4,6": Claim(
        QC,
        "the refill on the tape gives `x.grad = [10, 10, 10]` instead of `[2, 4, 6]`",
        "qc1_overwrite.py",
        lambda o: r(o)["taped"]["grad"] == [10.0] * 3 and r(o)["none"]["grad"] == [2.0, 4.0, 6.0],
    ),
    "untaped writes before backward corrupt too, silently; only a write after backward is safe": Claim(
        QC,
        "The same refill made outside `with tape:` or with `record_tape=False`, but before\n`backward()`",
        "qc1_overwrite.py",
        lambda o: (
            r(o)["untaped_before_backward"] == {"grad": [10.0] * 3, "tracker_warnings": []}
            and r(o)["record_tape_false"] == {"grad": [10.0] * 3, "tracker_warnings": []}
            and r(o)["after_backward"] == {"grad": [2.0, 4.0, 6.0], "tracker_warnings": []}
        ),
    ),
    "zero_, fill_ and assign(numpy) corrupt the gradient and the tracker stays silent": Claim(
        QC,
        "so do `x.fill_(5.0)` and `x.assign(numpy)`, and\n`x.zero_()` gives `[0, 0, 0]`",
        "qc1_overwrite.py",
        lambda o: (
            r(o)["fill_"] == {"grad": [10.0] * 3, "tracker_warnings": []}
            and r(o)["assign_numpy"] == {"grad": [10.0] * 3, "tracker_warnings": []}
            and r(o)["zero_"] == {"grad": [0.0] * 3, "tracker_warnings": []}
        ),
    ),
    "tracker points at the kernel's decorator line, not the launch": Claim(
        QC,
        "`kernel refill at ...:18`",
        "qc1_overwrite.py",
        lambda o: (
            len(r(o)["taped"]["tracker_warnings"]) == 1
            and f"argument x in kernel refill at {EXAMPLES / 'qc1_overwrite.py'}:"
            f"{decorator_line('qc1_overwrite.py', 'refill')} is being written"
            in r(o)["taped"]["tracker_warnings"][0]
            and r(o)["taped"]["tracker_warnings"][0].startswith("Array [5. 5. 5.]")
            and decorator_line("qc1_overwrite.py", "refill") == 18
        ),
    ),
    "a write-back that changes no value is harmless, one that does is not; the tracker warns for both": Claim(
        QC,
        "while the clip is idle the gradient is the exact\n`[3, 12]`, once it engages it is `[3, 6.75]`",
        "qc1_writeback.py",
        lambda o: (
            r(o)["clip_idle"] == {"grad": [3.0, 12.0], "tracker_warnings": 1}
            and r(o)["clip_engaged"] == {"grad": [3.0, 6.75], "tracker_warnings": 1}
        ),
    ),
    "copy adjoint correct on >= 1.17": Claim(
        QC,
        "(1.19.0 gives `8` and `6`)",
        "qc1_copy_versions.py",
        lambda o: r(o)["copy_and_reader"] == 8.0 and r(o)["copy_unused"] == 6.0,
    ),
    # quick-checks.md §2-§7
    "missing requires_grad gives silent zero": Claim(
        QC,
        "`x.grad = [0, 0]`\nwith the intermediate left at the default, `[3, 3]` with it set; no\nwarning",
        "qc2_requires_grad.py",
        lambda o: (
            r(o)["buggy"] == [0.0, 0.0]
            and r(o)["fixed"] == [3.0, 3.0]
            and "Warning" not in o.stderr
            and r(o)["zeros_default"] is False
            and r(o)["zeros_like_inherits"]
            and r(o)["clone_inherits"]
        ),
    ),
    "backward-disabled kernel cuts the gradient with a warning": Claim(
        QC,
        "`x.grad = [3]` instead of `[5]`",
        "qc3_enable_backward.py",
        lambda o: (
            r(o)["buggy"] == [3.0]
            and r(o)["fixed"] == [5.0]
            and "Running the tape backwards may produce incorrect gradients because recorded kernel double_nobwd "
            "is configured with the option 'enable_backward=False'."
            in o.stderr
        ),
    ),
    "second backward without zero doubles; zero() on a fresh tape zeroes nothing": Claim(
        QC,
        "the second `backward()` without `zero()` gives\n`x.grad = [4]` instead of `[2]`",
        "qc4_tape_zero.py",
        lambda o: (
            r(o)["first"] == [2.0]
            and r(o)["second_without_zero"] == [4.0]
            and r(o)["after_zero"] == [0.0]
            and r(o)["tracked_before_backward"] == 0
            and r(o)["after_zero_and_backward"] == [2.0]
        ),
    ),
    "in-place multiply gives b.grad 3,10": Claim(
        QC,
        "`b.grad = [3, 10]` instead of `[1, 2]`",
        "qc5_inplace.py",
        lambda o: r(o)["buggy"] == [3.0, 10.0] and r(o)["fixed"] == [1.0, 2.0],
    ),
    "component assigned twice sums both adjoints": Claim(
        QC,
        "gradient `[4, 3]` instead of `[3, 3]`",
        "qc6_component_and_loops.py",
        lambda o: (
            r(o)["component_buggy"] == [4.0, 3.0]
            and r(o)["component_fixed"] == [3.0, 3.0]
            and r(o)["component_overwrites_flag"] is False
        ),
    ),
    "enable_vector_component_overwrites makes component reassignment correct": Claim(
        QC,
        "with it the same\nkernel gives `[3, 3]`",
        "qc6_component_and_loops.py --overwrites",
        lambda o: r(o)["component_overwrites_flag"] is True and r(o)["component_buggy"] == [3.0, 3.0],
    ),
    "dynamic loop product is wrong, func wrapper does not help, static range does": Claim(
        QC,
        "`x.grad = [64, 32, 4]` instead of `[8, 4, 2]`",
        "qc6_component_and_loops.py",
        lambda o: (
            r(o)["loop_buggy"] == [64.0, 32.0, 4.0]
            and r(o)["loop_in_func"] == [64.0, 32.0, 4.0]
            and r(o)["loop_fixed"] == [8.0, 4.0, 2.0] == r(o)["loop_expected"]
        ),
    ),
    "a dynamic-loop sum: summands right, a factor applied after the loop gets zero": Claim(
        QC,
        "with `loss = s * w[0]`, `x.grad` is\nthe correct `[3, 3, 3]` and `w.grad` is `0` instead of `7`",
        "qc6_component_and_loops.py",
        lambda o: (
            r(o)["sum_then_scale"] == {"x": [3.0, 3.0, 3.0], "w": [0.0]}
            and r(o)["sum_then_scale_expected"]["w"] == [7.0]
        ),
    ),
    "duplicate launch inert unless retain_grad": Claim(
        QC,
        "a duplicated plain-store launch gives `x.grad = [2]`",
        "qc7_double_accumulation.py",
        lambda o: r(o)["duplicate_plain"] == [2.0] and r(o)["duplicate_retain_grad"] == [4.0],
    ),
    "ones seed on a mean objective is N times too large": Claim(
        QC,
        "`[8, 16, 24, 32]`, exactly 4× the mean objective's `[2, 4, 6, 8]`",
        "qc7_double_accumulation.py",
        lambda o: (
            r(o)["mean_ones_seed"] == [8.0, 16.0, 24.0, 32.0]
            and r(o)["mean_correct_seed"] == [2.0, 4.0, 6.0, 8.0] == r(o)["mean_expected"]
        ),
    ),
    # quick-checks.md §8
    "tape per step truncates the gradient": Claim(
        QC,
        "the per-step tapes give `dL/dk = 6.11`; one tape over the horizon gives `19.47`",
        "qc8_truncation.py",
        lambda o: (
            close(r(o)["tape_per_step"], 6.11, 1e-3)
            and close(r(o)["per_window_fd"], r(o)["tape_per_step"], 1e-3)
            and close(r(o)["one_tape"], 19.47, 1e-3)
            and close(r(o)["one_tape"], r(o)["fd_full_horizon"], 1e-4)
        ),
    ),
    "a warm-started taped solve: 0.80x gradient, right design if attainable, slightly off if not": Claim(
        QC,
        "AD was 0.80× the converged gradient",
        "qc8_warm_start.py",
        lambda o: (
            round(r(o)["warm_over_converged"], 2) == 0.80
            and all(abs(v - 1.0) < 1e-3 for v in r(o)["reachable"].values())
            and round(r(o)["unreachable"]["warm"], 4) == 0.2844
            and round(r(o)["unreachable"]["converged"], 4) == 0.2877
        ),
    ),
    # quick-checks.md §9
    "hand-written sqrt of dot is NaN at zero, wp.length is guarded": Claim(
        QC,
        "a hand-written\n`wp.sqrt(wp.dot(d, d))` at `d = 0` gives a NaN gradient",
        "qc9_nonsmooth.py",
        lambda o: (
            all(math.isnan(v) for v in r(o)["length_buggy"][0])
            and r(o)["length_fixed"][0] == [0.0, 0.0, 0.0]
            and close(r(o)["length_fixed"][1][0], 0.6)
            and close(r(o)["length_buggy"][1][1], 0.8)
        ),
    ),
    "where differentiates the unselected overflow; clamping fixes it": Claim(
        QC,
        "at `v = 100` the forward is `0` but the gradient is NaN",
        "qc9_nonsmooth.py",
        lambda o: (
            math.isnan(r(o)["where_buggy"][1])
            and r(o)["where_fixed"][1] == 0.0
            and close(r(o)["where_fixed"][0], 2.7182817)
        ),
    ),
    "softplus: the naive form is NaN at 100, the stable form gives 1": Claim(
        QC,
        "Softplus written `wp.log(1.0 + wp.exp(v))` has gradient NaN at\n   `v = 100`",
        "qc9_nonsmooth.py",
        lambda o: (
            math.isnan(r(o)["softplus_naive"][1])
            and r(o)["softplus_stable"][1] == 1.0
            and close(r(o)["softplus_stable"][0], r(o)["softplus_naive"][0])
        ),
    ),
    "floor has zero gradient, STE gives one, FD across a step is 1/(2 eps)": Claim(
        QC,
        "`floor` gives gradient `[0, 0]`",
        "qc9_nonsmooth.py",
        lambda o: (
            r(o)["floor"] == [0.0, 0.0]
            and r(o)["floor_ste"] == [1.0, 1.0]
            and close(r(o)["floor_fd_near_step"], 50.0)
        ),
    ),
    # verification.md
    "tracker flag forces a rebuild every run": Claim(
        VER,
        "A module built with the flag gets another\nmodule hash and is rebuilt in every process",
        "ver_tracker_build.py on#2",
        lambda o: (
            "(compiled)" in " ".join(r(o)["module_loads"])
            and overwrite_warnings(" ".join(r(o)["overwrite_warnings"])) == 1
        ),
    ),
    "flag set after the module loaded: cached and no warning": Claim(
        VER,
        "on a module\nalready loaded it does nothing (measured: no warning)",
        "ver_tracker_build.py off#2",
        lambda o: "(cached)" in " ".join(r(o)["module_loads"]) and r(o)["overwrite_warnings"] == [],
    ),
    "tracker detectors and blind spots": Claim(
        VER,
        "| the earlier read only as the LEFT operand of a binary op",
        "ver_tracker.py",
        lambda o: (
            {k: len(v) for k, v in r(o).items()}
            == {
                "codegen": 1,
                "inter_kernel": 1,
                "inter_kernel_no_tape": 0,
                "left_operand": 0,
                "struct": 0,
                "ptr_alias": 0,
                "reuse_after_backward": 0,
                "reuse_after_reset_with_grad": 0,
                "reuse_after_reset_without_grad": 0,
                "catch_warnings_records": 0,
                "inplace": 0,
                "copy_with_grads": 1,
                "copy_without_grads": 0,
            }
            and "within the same kernel" in r(o)["codegen"][0]
            and "by an array copy at" in r(o)["copy_with_grads"][0]
            and f"ver_tracker.py:{decorator_line('ver_tracker.py', 'fill')} is being written"
            in r(o)["inter_kernel"][0]
        ),
    ),
    "the blind-spot rows for untaped writes and zero_/fill_/assign": Claim(
        VER,
        "| `.zero_()`, `.fill_()`, `.assign(numpy)` on an array the tape read | **no** (still corrupts) |",
        "qc1_overwrite.py",
        lambda o: all(
            r(o)[w]["tracker_warnings"] == [] and r(o)[w]["grad"] != [2.0, 4.0, 6.0]
            for w in ("zero_", "fill_", "assign_numpy", "untaped_before_backward", "record_tape_false")
        ),
    ),
    "fd harness eps sweep numbers": Claim(
        VER,
        "relative error 3.7e-5 at eps 1e-1, 1.9e-3 at 1e-2, 1.2e-2\nat 1e-3, 7.0e-2 at 1e-4",
        "ver_fd_harness.py",
        lambda o: (
            close(r(o)["sweep"][0]["rel_err"], 3.7e-5, 0.05)
            and close(r(o)["sweep"][1]["rel_err"], 1.9e-3, 0.05)
            and close(r(o)["sweep"][2]["rel_err"], 1.2e-2, 0.05)
            and close(r(o)["sweep"][3]["rel_err"], 7.0e-2, 0.05)
            and r(o)["passed"]
            and r(o)["repeatable"]
        ),
    ),
    "autograd traps": Claim(
        VER,
        "end-to-end `gradcheck` fails the overwrite program and passes the clean one",
        "ver_autograd_traps.py",
        lambda o: (
            r(o)["forward_calls_for_3_inputs"] == 8
            and r(o)["jacobian_shapes"] == {"(0, 0)": [1, 3]}
            and r(o)["end_to_end_bug"] == [False, 1]
            and r(o)["end_to_end_clean"] == [True, 1]
            and r(o)["vacuous"] == [True, 0]
            and r(o)["restored"] == [True, 1]
            and r(o)["not_restored"] == [False, 1]
            and r(o)["float32_sum_64"] == [False, 1]
            and r(o)["tape_per_launch"] == [True, 2]
            and r(o)["tape_backward_disabled"] == [True, 1]
            and "A list of output arguments must be provided to compute kernel Jacobians"
            in r(o)["tape_crash"][0]
        ),
    ),
    "visualize omits copies": Claim(
        VER,
        "names both kernels and\nnever the copy",
        "ver_autograd_traps.py",
        lambda o: (
            r(o)["launches_recorded"] == 3
            and r(o)["dot_kernels"] == ["square", "total"]
            and r(o)["dot_mentions_copy"] is False
        ),
    ),
    "checkpointing over (x, v): exact with both seeds, wrong without v, localized per segment": Claim(
        VER,
        "seeding only `x` gives a relative error of 1.26",
        "ver_checkpoint.py",
        lambda o: (
            r(o)["good_max_abs_diff"] == 0.0
            and round(r(o)["bad_rel_err"], 2) == 1.26
            and r(o)["bad_per_segment"][-1] == 0.0
            and [round(e, 2) for e in r(o)["bad_per_segment"][:-1]] == [0.94, 1.98, 1.53]
            and max(r(o)["good_per_segment"]) < 1e-3
            and (r(o)["states_kept_checkpointed"], r(o)["states_kept_full"]) == (11, 25)
        ),
    ),
    "reordering a float32 atomic sum moves it at float level only": Claim(
        VER,
        "five orders of the same 100,000 float32 terms gave sums that differ by 1.9e-5 of their value",
        "ver_atomic_order.py",
        lambda o: round(r(o)["relative_spread"], 6) == 1.9e-5 and len(set(r(o)["sums"])) > 1,
    ),
    "torch zero_grad leaves Warp's grad accumulating": Claim(
        VER,
        "Warp's gradient grew `[2, 4]`,\n`[4, 8]`, `[6, 12]` over three iterations",
        "interop_torch.py",
        lambda o: (
            r(o)["shared_grad_at_start"] is True
            and r(o)["warp_grad_by_iteration"] == [[2.0, 4.0], [4.0, 8.0], [6.0, 12.0]]
            and r(o)["torch_grad_after_zero_grad"] is None
        ),
    ),
    # custom-gradients.md
    "func_grad assignment loses the other term": Claim(
        CG,
        "the\nassigning version gives `[0.25, 0.1667]` instead of\n`[3.25, 3.1667]`",
        "cg_func_grad.py",
        lambda o: (
            not r(o)["assign_term_after"][0]
            and close(r(o)["assign_term_after"][1][0], 0.25)
            and r(o)["assign_term_before"][0]
            and close(r(o)["assign_term_before"][1][0], 3.25)
            and r(o)["accumulate"][0]
            and close(r(o)["accumulate"][1][1], 3.0 + 1.0 / 6.0)
        ),
    ),
    "func_grad signature mismatch fails at registration; wp.grad in a plain kernel is forward-only": Claim(
        CG,
        "(measured: forward `6` for `x = 3`, backward `0`)",
        "cg_registration.py",
        lambda o: (
            r(o)["registration"].startswith("RuntimeError: No function overload found for gradient function")
            and r(o)["slope_forward"] == [6.0]
            and r(o)["slope_backward"] == [0.0]
        ),
    ),
    "atomic counter without replay scatters onto other slots": Claim(
        CG,
        "without it the gradient lands on slots 4-7 (`[0, 0, 0, 0, 4, 4, 4, 4]`) and the\ncounter ends at 8",
        "cg_func_replay.py",
        lambda o: (
            r(o)["with_replay"] == {"src_grad": [4.0] * 4 + [0.0] * 4, "counter_after_backward": 4}
            and r(o)["without_replay"] == {"src_grad": [0.0] * 4 + [4.0] * 4, "counter_after_backward": 8}
            and r(o)["inline_counter"]["src_grad"] == [4.0] + [0.0] * 7
        ),
    ),
    "gradcheck catches a bad native adjoint": Claim(
        CG,
        "`gradcheck` passes the\nkernel using the correct adjoint snippet and fails",
        "cg_func_native.py",
        lambda o: r(o) == {"correct_adjoint": True, "bad_adjoint": False},
    ),
    # case-studies.md (and the SKILL.md example session that retells case study 1)
    "case 1: learning rate does not matter, wrong sign, fix converges": Claim(
        CS,
        "autodiff says `+0.0600`, central differences\n   of the full-horizon loss say `−0.2955`",
        "cs1_state_aliasing.py",
        lambda o: (
            close(r(o)["buggy"]["ad"], 0.0600, 1e-2)
            and close(r(o)["buggy"]["fd"], -0.2955, 1e-3)
            and close(r(o)["buggy"]["loss_first"], 0.1020, 1e-3)
            and close(r(o)["buggy"]["loss_last"], 0.1612, 1e-3)
            and r(o)["buggy"]["loss_best"] == r(o)["buggy"]["loss_first"]
            and all(close(k, 0.835, 1e-3) for k in r(o)["buggy_k_final_by_lr"].values())
            and close(r(o)["fixed"]["ad"], -0.29551, 1e-4)
            and close(r(o)["fixed"]["fd"], -0.29553, 1e-4)
            and r(o)["fixed"]["loss_last"] < 1e-4
            and close(r(o)["fixed"]["k_final"], 2.30, 1e-2)
        ),
    ),
    "case 1: horizon bisection": Claim(
        CS,
        "AD/FD is 1.000, 0.994, 0.992, 0.976, 0.904, 0.647, −0.203",
        "cs1_state_aliasing.py",
        lambda o: (
            [round(v, 3) for v in r(o)["ad_over_fd_by_horizon"].values()]
            == [1.0, 0.994, 0.992, 0.976, 0.904, 0.647, -0.203]
        ),
    ),
    "case 1 (verification): horizon bisection": Claim(
        VER,
        "AD/FD = 1.000,\n  0.994, 0.992, 0.976, 0.904, 0.647, −0.203",
        "cs1_state_aliasing.py",
        lambda o: (
            [round(v, 3) for v in r(o)["ad_over_fd_by_horizon"].values()]
            == [1.0, 0.994, 0.992, 0.976, 0.904, 0.647, -0.203]
        ),
    ),
    "case 1: tracker reports 39 v_out warnings, none for x_out, none after the fix": Claim(
        CS,
        "prints 39 warnings, one per step after the first",
        "cs1_state_aliasing.py --tracker",
        lambda o: (
            o.returncode == 0
            and overwrite_warnings(o.stderr.split("--- fixed ---")[0]) == 39
            and o.stderr.count("argument v_out in kernel step") == 39
            and "argument x_out" not in o.stderr
            and overwrite_warnings(o.stderr.split("--- fixed ---")[1]) == 0
        ),
    ),
    "case 2: per-launch check passes, end-to-end fails, training worsens, fix improves": Claim(
        CS,
        "maximum relative error 1.78 and a cosine of 0.41",
        "cs2_copy_overwrite.py",
        lambda o: (
            r(o)["buggy"]["gradcheck_tape_passed"]
            and close(r(o)["buggy"]["max_rel_err"], 1.78, 1e-2)
            and close(r(o)["buggy"]["ad_dot_fd_cos"], 0.41, 1e-2)
            and close(r(o)["buggy"]["loss_first"], 1.049, 1e-3)
            and close(r(o)["buggy"]["loss_min"], 0.887, 1e-3)
            and close(r(o)["buggy"]["loss_last"], 1.265, 1e-3)
            and r(o)["fixed"]["max_rel_err"] < 1e-4
            and close(r(o)["fixed"]["loss_last"], 0.718, 1e-3)
            and r(o)["fixed"]["loss_never_rises"]
            and not r(o)["buggy"]["loss_never_rises"]
        ),
    ),
    "case 2: tracker reports the x copy 30 times and never the v copy": Claim(
        CS,
        "The copy onto `v` (line 52) is never reported",
        "cs2_copy_overwrite.py --tracker",
        lambda o: (
            o.returncode == 0
            and source_line("cs2_copy_overwrite.py", 51).strip().startswith("wp.copy(x, x_new)")
            and source_line("cs2_copy_overwrite.py", 52).strip().startswith("wp.copy(v, v_new)")
            and o.stderr.count("by an array copy at") == 30
            and o.stderr.count("cs2_copy_overwrite.py:51 but has already been read") == 30
        ),
    ),
    "skill example session: wrong sign before the fix": Claim(
        SK,
        "k = 1, AD `+0.0600` against full-horizon FD `−0.2955`",
        "cs1_state_aliasing.py",
        lambda o: (
            close(r(o)["buggy"]["ad"], 0.0600, 1e-2)
            and close(r(o)["buggy"]["fd"], -0.2955, 1e-3)
            and close(r(o)["buggy"]["loss_first"], 0.1020, 1e-3)
            and close(r(o)["buggy"]["loss_last"], 0.1612, 1e-3)
        ),
    ),
    "skill example session numbers": Claim(
        SK,
        "AD `−0.29551`, FD `−0.29553`",
        "cs1_state_aliasing.py",
        lambda o: (
            close(r(o)["fixed"]["ad"], -0.29551, 1e-4) and close(r(o)["fixed"]["loss_last"], 6.2e-5, 1e-2)
        ),
    ),
}


def doc_text(name: str) -> str:
    return next(d for d in DOCS if d.name == name).read_text(encoding="utf-8")


def in_doc(quote: str, name: str) -> bool:
    """`quote` appears in the document, whatever the line wrapping of either."""
    return " ".join(quote.split()) in " ".join(doc_text(name).split())


def test_every_claim_quotes_text_that_is_in_its_document():
    for name, claim in CLAIMS.items():
        assert in_doc(claim.quote, claim.doc), f"claim {name!r}: quote not found in {claim.doc}"


def test_every_example_backs_at_least_one_claim():
    claimed = {c.run.split()[0] for c in CLAIMS.values()}
    assert claimed == {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("probe_")}
    assert set(embedded_examples()) <= {p.name for p in EXAMPLES.glob("*.py")}


@pytest.mark.warp
@pytest.mark.parametrize("claim_name", list(CLAIMS))
def test_documented_claim_holds_on_installed_warp(claim_name, outputs):
    claim = CLAIMS[claim_name]
    if missing := missing_dependency(claim.run.split()[0]):
        pytest.skip(f"{claim.run} needs {missing}, which is not installed")
    out = outputs[claim.run]
    assert claim.check(out), (
        f"stale claim in {claim.doc}: {claim.quote!r}\nexample output: {out.result}\n"
        f"stderr tail: {out.stderr[-1500:]}"
    )


@pytest.mark.warp
def test_every_example_runs_cleanly_and_prints_a_json_result(outputs):
    for key, out in outputs.items():
        if missing_dependency(key.split()[0]):
            continue
        assert out.returncode == 0, f"{key} failed:\n{out.stderr[-3000:]}"
        if "--tracker" not in key:
            assert out.result is not None, f"{key} printed no JSON result line"


@pytest.mark.warp
def test_warpgrad_gradcheck_runs_the_documented_probe_and_finds_the_case_study_bug(tmp_path):
    for name in ("cs1_state_aliasing.py", "probe_cs1.py"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text(encoding="utf-8"), encoding="utf-8")
    code = "from warpgrad.cli.main import main; main()"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "gradcheck",
            "--probe",
            "probe_cs1.py",
            "--json",
            "--workspace",
            str(tmp_path),
        ],
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        cwd=tmp_path,
    )
    result = json.loads(proc.stdout)
    assert in_doc("reports `subtly_wrong` with maximum relative error 1.20", VER)
    assert "<!-- example: probe_cs1.py -->" in doc_text(SK)
    assert (result["ok"], result["passed"], result["signature"]) == (True, False, "subtly_wrong"), result
    assert close(result["max_rel_error"], 1.20, 1e-2)
    assert sorted(result["files"]) == ["cs1_state_aliasing.py", "probe_cs1.py"]


# --- version caveats, measured on an older Warp when one is installed ---------------------------------


@pytest.mark.warp
@pytest.mark.skipif(not OLD_WARP_PYTHON.exists(), reason="no older-Warp venv (set WARPGRAD_OLD_WARP_VENV)")
def test_copy_adjoint_and_restore_inputs_caveats_hold_on_warp_below_1_17():
    # Sharing WARP_CACHE_PATH with the main Warp is safe: Warp keeps one subfolder per version.
    out = run_example(Run("qc1_copy_versions.py"), python=str(OLD_WARP_PYTHON))
    assert out.result is not None, out.stderr[-2000:]
    result = out.result
    major, minor = (int(p) for p in result["warp"].split(".")[:2])
    assert (major, minor) < (1, 17), f"{OLD_WARP_PYTHON} runs Warp {result['warp']}, not an older one"
    # quick-checks.md §1.3 and the prompt's caveat quote these numbers.
    assert in_doc("Warp 1.16.0 gives `6` instead of `8`, and `0` instead of `6`", QC)
    assert "measured on 1.16.0: 6 instead of 8, 0 instead of 6" in prompt.VERSION_CAVEATS[0].text
    assert (result["copy_and_reader"], result["copy_unused"]) == (6.0, 0.0)
    assert result["gradcheck_has_restore_inputs"] is False
    # The tracker caveats: copy warnings without a call site, read flags that survive backward(), and a
    # reset() that clears them only for arrays that received gradients.
    tracker = run_example(Run("ver_tracker.py"), python=str(OLD_WARP_PYTHON)).result
    assert tracker is not None
    assert in_doc("no warning on 1.19.0, a false alarm on 1.16.0", VER)
    assert in_doc("On 1.16, `reset()` cleared the flags only of arrays that received gradients", VER)
    assert "`reset()` clears them only for arrays that received gradients" in prompt.VERSION_CAVEATS[3].text
    assert len(tracker["reuse_after_backward"]) == 1
    assert len(tracker["reuse_after_reset_with_grad"]) == 0
    assert len(tracker["reuse_after_reset_without_grad"]) == 1
    assert "is being written to but has already been read" in tracker["copy_with_grads"][0]
    assert "by an array copy at" not in tracker["copy_with_grads"][0]


if __name__ == "__main__":
    if "--sync" in sys.argv:
        sync()
