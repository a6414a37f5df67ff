"""The unified-diff reader and hunk application as pure text (the apply_patch tool is tested in test_workspace)."""

from __future__ import annotations

import difflib

import pytest

from warpgrad.tools.patch import PatchError, apply_hunks, parse_unified_diff, unified_diff

OLD = "".join(f"line {i}\n" for i in range(1, 41))


def _diff(old: str, new: str, n: int = 3) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/f.py", "b/f.py", n=n))


def _apply(text: str, diff: str) -> str:
    (fp,) = parse_unified_diff(diff)
    return apply_hunks(text, fp.hunks, "f.py")


def test_a_diff_written_by_unified_diff_reads_back_and_applies_to_the_new_text():
    new = OLD.replace("line 3\n", "line three\n").replace("line 30\n", "")
    diff = unified_diff("f.py", OLD, new)
    (fp,) = parse_unified_diff(diff)
    assert (fp.old_path, fp.new_path, len(fp.hunks)) == ("f.py", "f.py", 2)
    assert apply_hunks(OLD, fp.hunks, "f.py") == new


def test_a_new_file_diff_comes_from_dev_null_and_applies_to_empty_text():
    diff = unified_diff("n.py", "", "x = 1\n", new_file=True)
    (fp,) = parse_unified_diff(diff)
    assert fp.old_path is None and fp.new_path == "n.py"
    assert apply_hunks("", fp.hunks, "n.py") == "x = 1\n"


def test_hunks_find_their_context_when_the_text_drifted_by_a_few_lines():
    new = OLD.replace("line 20\n", "line twenty\n")
    assert _apply("# header\n# header\n" + OLD, _diff(OLD, new)) == "# header\n# header\n" + new


def test_a_hunk_whose_context_is_not_in_the_text_is_refused_with_its_location():
    diff = _diff(OLD, OLD.replace("line 20\n", "line twenty\n"))
    with pytest.raises(PatchError, match=r"f.py: hunk @@ -17,7 @@ does not match"):
        _apply(OLD.replace("line 19\n", "line nineteen\n"), diff)


def test_no_newline_at_end_of_file_is_kept_on_each_side():
    assert _apply("a = 1\nb = 2", "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n"
                  "\\ No newline at end of file\n+b = 3\n") == "a = 1\nb = 3\n"
    assert _apply("a = 1\n", "--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
                  "\\ No newline at end of file\n") == "a = 2"


def test_an_empty_context_line_whose_space_was_stripped_still_counts_as_context():
    old = "a = 1\n\nb = 2\n"
    assert _apply(old, "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a = 1\n\n-b = 2\n+b = 3\n") == "a = 1\n\nb = 3\n"


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        ("just words", "no file patches found"),
        ("--- a/f.py\nno plus header\n", "'---' header not followed by '[+][+][+]'"),
        ("--- a/f.py\n+++ b/f.py\n@@ bad @@\n", "malformed hunk header"),
        ("--- a/f.py\n+++ b/f.py\n", "diff for f.py: no hunks"),
        ("--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n a\n?b\n", "hunk ended early"),
        ("--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "counts in its @@ header do not match"),
    ],
)
def test_malformed_diffs_are_refused_with_a_message_that_says_what_is_wrong(diff: str, message: str):
    with pytest.raises(PatchError, match=message):
        parse_unified_diff(diff)
