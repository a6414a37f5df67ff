"""kernel_access: reads and writes of each kernel argument from the source alone (no Warp import)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from warpgrad.tools.kernel_access import analyze_kernel, analyze_source, summarize

SOURCE = textwrap.dedent("""
    import warp as wp

    @wp.struct
    class State:
        q: wp.array(dtype=float)
        v: wp.array(dtype=float)

    @wp.func
    def bump(a: wp.array(dtype=float), i: int, s: float):
        wp.atomic_add(a, i, s)

    @wp.func
    def load(a: wp.array(dtype=float), i: int):
        return a[i]

    @wp.func
    def reset_q(st: State, i: int):
        st.q[i] = 0.0

    @wp.kernel
    def k(x: wp.array(dtype=float), y: wp.array(dtype=float), b: wp.array(dtype=float), st: State,
          n: int, g: wp.array(dtype=float), m: wp.array(dtype=float), u: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        y[i] = x[i] * 2.0
        b[i] *= y[i]
        st.q[i] = st.v[i] + 1.0
        p = st.v
        p[i] = 0.0
        bump(g, i, load(x, i))
        reset_q(st, i)
        y[i] += wp.sin(x[i])
        u[i].x = float(n)
        mystery(m)
""")


@pytest.fixture(scope="module")
def ka():
    return analyze_source(SOURCE)["k"]


def test_a_read_in_the_left_operand_of_a_binary_op_is_seen_and_marked_tracker_blind(ka):
    first = ka.arg("x").accesses[0]
    assert (first.kind, first.tracker_blind) == ("read", True)
    assert ka.summary("x").read and not ka.summary("x").written


def test_inplace_multiply_is_a_read_and_a_write(ka):
    s = ka.summary("b")
    assert s.inplace and s.read and s.written
    assert ka.arg("b").accesses[0].detail == "*="


def test_plus_equals_and_atomics_are_accumulating_writes(ka):
    assert ka.summary("g").accumulate_only and ka.summary("g").written
    y = ka.arg("y")
    assert [a.kind for a in y.accesses] == ["write", "read", "accumulate"]


def test_struct_fields_are_tracked_per_field_including_aliases_and_helpers(ka):
    st = ka.arg("st")
    assert set(st.fields()) == {"q", "v"}
    q, v = ka.summary("st", "q"), ka.summary("st", "v")
    assert q.written and not q.read
    # `p = st.v; p[i] = 0.0` writes the field read on the line before: an in-kernel overwrite.
    assert v.read and v.written and v.write_after_read
    assert all(a.tracker_blind for a in st.of("v"))
    assert any("reset_q" in a.detail for a in st.of("q"))


def test_calls_into_helpers_are_followed_and_unknown_calls_are_conservative(ka):
    assert any("load" in a.detail for a in ka.arg("x").accesses)
    m = ka.summary("m")
    assert m.read and m.written and m.conservative
    assert ka.unresolved_calls == ["mystery"]


def test_component_writes_of_an_element_are_writes_and_scalars_have_no_accesses(ka):
    assert ka.summary("u").written
    assert ka.arg("n").accesses == [] and ka.arg("n").is_array is False
    assert ka.arg("x").is_array is True and ka.arg("st").is_array is None


def test_lines_are_file_lines_when_given_the_first_line():
    src = "@wp.kernel\ndef k(a: wp.array(dtype=float)):\n    a[0] = a[0] * 3.0\n"
    ka = analyze_kernel(src, first_line=10)
    assert ka.line == 11
    assert [a.line for a in ka.arg("a").accesses] == [12, 12]


def test_summarize_orders_reads_and_writes():
    src = "def k(a: wp.array(dtype=float), b: wp.array(dtype=float)):\n    b[0] = 1.0\n    v = b[0]\n"
    s = summarize(analyze_kernel(src).arg("b").accesses)
    assert s.read and s.written and not s.write_after_read  # a read after a write is fine


def test_the_module_does_not_import_warp():
    assert "warp" not in sys.modules or "warpgrad.tools.kernel_access" in sys.modules
    import subprocess

    code = "import sys, warpgrad.tools.kernel_access as k; print('warp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, encoding="utf-8", timeout=60
    )
    assert out.stdout.strip() == "False"


def test_a_value_read_before_an_overwrite_differs_from_the_exempt_left_operand_update():
    src = textwrap.dedent("""
        @wp.kernel
        def step(s: State, dt: float):
            i = wp.tid()
            v = s.vel[i]
            s.vel[i] = v - dt * wp.length(v) * v
            s.pos[i] = s.pos[i] + dt * v
    """)
    ka = analyze_kernel(src)
    vel, pos = ka.summary("s", "vel"), ka.summary("s", "pos")
    assert vel.write_after_read and vel.value_read  # replayed from the overwritten value
    assert pos.write_after_read and not pos.value_read  # x = x + c: Warp's exemption, linear
    assert not vel.tracker_sees_read and not pos.tracker_sees_read  # struct fields: the tracker is blind
