"""Same program, same verdict (issue 22, item 1): the capture's parameter roles, the iteration checked,
the verdict and the numbers do not depend on anything that changes between runs of an unchanged program
(addresses, hash seeds, arrival order, the FD hub).

Each run below gets its own PYTHONHASHSEED, so dict layouts and which freed address the next array takes
differ from run to run; half run with the FD hub, half without.
"""

import shutil
from pathlib import Path

import pytest
import warp as wp

from warpgrad.tools.gradcheck import HUB_ENV, GradcheckArgs, check
from warpgrad.tools.harness.identity import ArrayMap, ArraySet

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"


def _fingerprint(tmp_path: Path, name: str, monkeypatch, hash_seed: int, hub: bool):
    work = tmp_path / f"run{hash_seed}"
    work.mkdir()
    shutil.copy(SHAPES / f"{name}.py", work / "train.py")
    monkeypatch.setenv("PYTHONHASHSEED", str(hash_seed))
    monkeypatch.setenv(HUB_ENV, "1" if hub else "0")
    r = check(GradcheckArgs(script="train.py", record=False), work)
    roles = [(p.name, p.role) for p in r.params]
    numbers = [(c.ad, c.fd) for c in r.directions]
    return (r.passed, r.signature, r.iteration, roles), numbers, r


@pytest.mark.parametrize("name", ["clone_rebuilt_in_function", "staged_param_host_read"])
def test_repeated_runs_give_the_same_verdict_roles_and_numbers_hub_on_and_off(tmp_path, monkeypatch, name):
    runs = [_fingerprint(tmp_path, name, monkeypatch, seed, hub=seed % 2 == 0) for seed in (1, 2, 3, 4)]
    first, numbers, r = runs[0]
    assert first[:2] == (True, "correct"), (r.reason, r.notes)  # both programs' gradients are right
    for fp, nums, other in runs[1:]:
        assert fp == first, (fp, first, other.notes)
        assert len(nums) == len(numbers)
        for (ad, fd), (ad0, fd0) in zip(nums, numbers):
            assert ad == pytest.approx(ad0, rel=1e-9)  # the same gradient file, read the same way
            assert fd == pytest.approx(fd0, rel=1e-6, abs=1e-9)  # FD noise only


def test_an_array_at_a_freed_arrays_address_is_not_taken_for_it():
    """`id()` is an address: the next array allocated where a freed one lived has its id. Capture's memory of
    arrays (outputs, losses, first uses) must not answer for that newcomer."""
    seen, roles = ArraySet(), ArrayMap()
    for _ in range(200):  # until the allocator hands a freed array's address to a new one
        a = wp.zeros(3)
        old_id = id(a)
        seen.add(a)
        roles[a] = "launch:k:0:1"
        assert a in seen and roles.get(a) == "launch:k:0:1"
        del a
        b = wp.zeros(3)
        if id(b) == old_id:
            assert b not in seen
            assert roles.get(b) is None
            roles.setdefault(b, "copy:3:src")
            assert roles.get(b) == "copy:3:src"
            return
    pytest.skip("the allocator never reused an address in 200 tries")
