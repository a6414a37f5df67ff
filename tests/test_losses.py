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
