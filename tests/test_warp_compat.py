"""The harness's one door to Warp internals: the version it accepts and what it reads off a real tape."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tools" / "harness"

pytestmark = pytest.mark.warp


def test_the_supported_range_is_the_one_pyproject_declares():
    from warpgrad.tools.harness import warp_compat

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    declared = next(d for d in deps if d.startswith("warp-lang"))
    assert declared.replace(" ", "") == warp_compat.SUPPORTED_SPEC
    lo, hi = re.fullmatch(r"warp-lang>=(\d+\.\d+),<(\d+)", warp_compat.SUPPORTED_SPEC).groups()
    assert tuple(int(p) for p in lo.split(".")) == warp_compat.SUPPORTED_MIN
    assert (int(hi), 0) == warp_compat.SUPPORTED_BELOW


@pytest.mark.parametrize("version", ["1.16.0", "1.18.9", "2.0.0", "0.9", "nightly"])
def test_a_version_outside_the_range_is_refused_with_both_versions_named(version):
    from warpgrad.tools.harness import warp_compat

    with pytest.raises(warp_compat.UnsupportedWarpVersion) as e:
        warp_compat.check_version(version)
    assert "warpgrad supports warp-lang 1.19..2.0" in str(e.value)
    assert f"this is {version}" in str(e.value)
    assert e.value.kind == "unsupported_warp"


@pytest.mark.parametrize("version", ["1.19.0", "1.19.0.dev20250101", "1.20.1+cu12", "1.99.0"])
def test_a_version_inside_the_range_is_accepted(version):
    from warpgrad.tools.harness import warp_compat

    warp_compat.check_version(version)


def test_no_harness_module_but_warp_compat_reaches_into_warp_internals():
    """`warp._src`, positional tape-record reads and `kernel.adj` are read in warp_compat.py only."""
    offenders = []
    for path in sorted(HARNESS.glob("*.py")):
        if path.name == "warp_compat.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "warp._src" in node.value:
                offenders.append(f"{path.name}:{node.lineno} names warp._src")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("warp._src"):
                offenders.append(f"{path.name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Attribute) and node.attr in ("_src", "adj", "launches", "runtime", "_cls") \
                    and not (node.attr == "launches" and isinstance(node.value, ast.Name) and node.value.id == "self"):
                offenders.append(f"{path.name}:{node.lineno} reads .{node.attr}")
    assert offenders == []


def test_the_record_view_reads_a_real_tape(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "records.py"
    script.write_text(
        "import warp as wp\n"
        "from warpgrad.tools.harness import warp_compat\n"
        "@wp.kernel\n"
        "def double(a: wp.array(dtype=float), b: wp.array(dtype=float)):\n"
        "    i = wp.tid()\n"
        "    b[i] = 2.0 * a[i]\n"
        "a = wp.ones(3, dtype=float, requires_grad=True)\n"
        "b = wp.zeros(3, dtype=float, requires_grad=True)\n"
        "c = wp.zeros(3, dtype=float, requires_grad=True)\n"
        "assert warp_compat.active_tape() is None\n"
        "tape = wp.Tape()\n"
        "with tape:\n"
        "    assert warp_compat.active_tape() is tape\n"
        "    with warp_compat.no_active_tape():\n"
        "        assert warp_compat.active_tape() is None\n"
        "    wp.launch(double, dim=3, inputs=[a], outputs=[b])\n"
        "    wp.copy(c, b)\n"
        "launch, copy = warp_compat.tape_records(tape)\n"
        "rec = warp_compat.kernel_record(launch)\n"
        "assert warp_compat.kernel_record(copy) is None\n"
        "assert rec.kernel is double and rec.inputs == [a] and rec.outputs == [b] and rec.dim == (3,)\n"
        "assert rec.caller['lineno'] == 16 and rec.caller['file'] == __file__, rec.caller\n"
        "closure = warp_compat.record_closure(copy)\n"
        "assert closure['src'] is b and closure['dest'] is c, closure\n"
        "assert warp_compat.kernel_arg_labels(double) == ['a', 'b']\n"
        "assert warp_compat.kernel_source(double).first_line == 3\n"
        "assert warp_compat.backward_state(double) == (True, None)\n"
        "assert warp_compat.runtime_initialized()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
