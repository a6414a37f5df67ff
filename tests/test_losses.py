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
