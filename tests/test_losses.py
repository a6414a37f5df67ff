from pathlib import Path

import pytest

from warpgrad.tools.losses import parse_losses, summarize


def test_common_progress_lines_are_read_as_iteration_and_loss():
    text = "iter 0 loss 1.5\nIteration 1: loss=1.2e-1\nstep 2 | loss: 0.1\n[3/10] loss 0.05\nepoch 4, cost 0.01\nsetting up the scene\n5 objective = nan"
    pts = parse_losses(text)
    assert [(p.iteration, p.value) for p in pts[:5]] == [(0, 1.5), (1, 0.12), (2, 0.1), (3, 0.05), (4, 0.01)]
    assert pts[5].iteration == 5 and pts[5].value != pts[5].value


def test_a_trajectory_is_summarized_by_its_trend():
    up = parse_losses("\n".join(f"it {i} loss {10.0**i}" for i in range(4)))
    assert summarize(up)["trend"] == "diverging"
    down = parse_losses("\n".join(f"it {i} loss {1.0 / (i + 1)}" for i in range(4)))
    assert summarize(down)["trend"] == "improving"
    assert summarize([])["n"] == 0


def test_a_line_built_to_backtrack_is_read_in_bounded_time():
    import time

    # Adjacent whitespace repeats around optional tokens backtrack polynomially on a long run of spaces.
    hostile = "\n".join(["cost" + " " * 3000 + "?", "objective:" + "\t" * 5000 + "nope"] * 50)
    start = time.monotonic()
    pts = parse_losses(hostile + "\nstep 7 cost = 0.25\n")
    assert time.monotonic() - start < 60  # a hang-catcher; the time itself: bench/bench_bounded.py
    assert [(p.iteration, p.value) for p in pts] == [(7, 0.25)]


def test_loss_lines_with_spaces_brackets_and_units_still_parse():
    pts = parse_losses("it 3  loss (mse) :  [ 0.5\nepoch # 4 error=  2e-3")
    assert [(p.iteration, p.value) for p in pts] == [(3, 0.5), (4, 0.002)]


def test_a_metric_regex_that_runs_out_of_time_reads_no_values_and_says_why():
    import time

    from warpgrad.tools.metric import MetricSpec

    start = time.monotonic()
    values, why = MetricSpec(regex="(a|aa)+$").scan("val aa\n" + ("a" * 40 + "b\n") * 5)
    assert time.monotonic() - start < 60  # a hang-catcher; the time itself: bench/bench_bounded.py
    # No values at all, not the ones before the timeout: a partial list could name a wrong "last" value.
    assert values == [] and why and "backtracks" in why


def test_progress_under_a_name_of_its_own_is_read_when_no_loss_is_printed() -> None:
    from warpgrad.tools.losses import parse_progress

    text = "\n".join(f"iter {i:3d} | lr 0.01 | misfit = {2.0 / (i + 1):.4f} | grad_norm {i}.5 | t=0.{i}s"
                     for i in range(5))
    pts = parse_progress(text)
    assert [(p.iteration, p.value) for p in pts] == [(i, round(2.0 / (i + 1), 4)) for i in range(5)]
    # A line-leading counter counts as the iteration too.
    pts = parse_progress("\n".join(f"[{i}/10] distance: {10 - i}.25" for i in range(1, 4)))
    assert [(p.iteration, p.value) for p in pts] == [(1, 9.25), (2, 8.25), (3, 7.25)]


def test_progress_needs_a_loss_word_or_a_name_on_enough_iteration_lines() -> None:
    from warpgrad.tools.losses import MIN_PROGRESS_LINES, parse_progress

    # A loss line wins over any other name.
    assert [p.value for p in parse_progress("step 1 misfit 3.0 loss 0.5\nstep 2 misfit 2.0 loss 0.25")] == [0.5, 0.25]
    # Too few iteration lines, or numbers on lines without an iteration: no guess.
    few = "\n".join(f"iter {i} misfit {i}.5" for i in range(MIN_PROGRESS_LINES - 1))
    assert parse_progress(few) == []
    assert parse_progress("\n".join(f"misfit {i}.5" for i in range(6))) == []
    # Only hyper-parameters and clocks on the iteration lines: no objective.
    assert parse_progress("\n".join(f"epoch {i} lr 0.1 elapsed 1.{i}" for i in range(6))) == []


@pytest.mark.warp
def test_a_run_reads_the_trajectory_of_a_script_that_names_its_objective(tmp_path: Path) -> None:
    from warpgrad.tools.run_script import RunScriptArgs, run_script

    (tmp_path / "train.py").write_text(
        "x = 3.0\n"
        "for it in range(6):\n"
        "    x -= 0.1 * 2 * x\n"
        "    print(f'iter {it:2d} | lr 0.1 | misfit {x * x:.6f}')\n")
    res = run_script(RunScriptArgs(script="train.py", record=False), tmp_path)
    assert res.ok, res.error
    assert res.loss_trajectory == [round(9.0 * 0.64 ** (k + 1), 6) for k in range(6)]
    assert res.trend == "improving"


def test_a_count_restated_on_every_progress_line_is_not_the_progress() -> None:
    """A line that says how many things its quantity sums over ("over 8 cells", "of 5 targets") before the value:
    the count never moves, the quantity does; the count ranks last whichever comes first on the line."""
    from warpgrad.tools.losses import parse_progress

    text = "\n".join(f"epoch {i}: heat misfit over 8 cells = {40 - 3 * i}.125" for i in range(5))
    assert [p.value for p in parse_progress(text)] == [40.125, 37.125, 34.125, 31.125, 28.125]
    text = "\n".join(f"round {i} | batch 16 | residual {0.5 / (i + 1):.4f}" for i in range(4))
    assert [p.value for p in parse_progress(text)] == [0.5, 0.25, 0.1667, 0.125]
    # Alone, a quantity that stays put is still read (a stalled objective is progress too).
    assert [p.value for p in parse_progress("\n".join(f"iter {i} gap 2.5" for i in range(4)))] == [2.5] * 4
