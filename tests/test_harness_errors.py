"""A failure inside warpgrad's own hooks is ours: it never surfaces at the user's line, and the result says so."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.warp


def test_a_listener_that_raises_leaves_the_users_launch_running_and_is_recorded(tmp_path):
    script = tmp_path / "probe_hooks.py"
    script.write_text(textwrap.dedent('''
        import warp as wp
        from warpgrad.tools.harness import hooks

        class Broken(hooks.Listener):
            def before_launch(self, call):
                raise RuntimeError("bug in a warpgrad listener")

        @wp.kernel
        def double(a: wp.array(dtype=float)):
            i = wp.tid()
            a[i] = a[i] * 2.0

        hooks.install()
        b = Broken()
        hooks.add_listener(b)
        a = wp.ones(3, dtype=float)
        wp.launch(double, dim=3, inputs=[a])   # the user's line: must not raise
        wp.launch(double, dim=3, inputs=[a])
        print("values", a.numpy().tolist())
        print("broken", b.broken.splitlines()[0])
    '''))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "values [4.0, 4.0, 4.0]" in out.stdout
    assert "broken before_launch: RuntimeError: bug in a warpgrad listener" in out.stdout
