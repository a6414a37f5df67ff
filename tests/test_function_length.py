"""No function in tools/ runs past ~80 lines without saying why (issue 13)."""

import pathlib
import textwrap

from long_functions import LIMIT, long_functions

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_no_function_in_tools_is_long_without_a_reason():
    unexplained = [f"{f.path.relative_to(ROOT)}:{f.line} {f.name} ({f.length} lines)"
                   for f in long_functions(ROOT / "tools") if not f.reason]
    assert not unexplained, "split these, or give the docstring a 'Long because ...' paragraph:\n" + "\n".join(unexplained)


def test_a_planted_long_function_is_found_and_a_reason_excuses_it(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "a.py").write_text(f"def plain():\n{body}\n")
    (tmp_path / "b.py").write_text(textwrap.dedent('''\
        def explained():
            """Does one thing.

            Long because the steps share twenty locals.
            """
        ''') + body + "\n")
    found = {f.name: f for f in long_functions(tmp_path)}
    assert set(found) == {"plain", "explained"}
    assert not found["plain"].reason and found["explained"].reason
