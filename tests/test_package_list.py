"""Every package folder of the checkout is named in pyproject.toml's package list.

The list is explicit (the repository root is the `warpgrad` package), so a new folder with an `__init__.py`
that is not added to it is left out of the wheel: its imports work in the checkout and fail once installed,
which only a non-editable install (CI) shows.
"""

import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders that hold Python files but are not part of the package: the tests, and the suites' programs.
NOT_PACKAGES = ("tests", ".git", ".ci-venv", ".ci-venv-warp116", ".venv", "build")


def _package_folders() -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(ROOT):
        rel = Path(folder).relative_to(ROOT)
        # Pruned, not filtered: CI's venvs sit inside the checkout and hold thousands of packages.
        dirs[:] = [d for d in dirs if not (d.startswith(".") or d in NOT_PACKAGES or d == "files" or d == "__pycache__")]
        if "__init__.py" in files:
            found.add(".".join(("warpgrad", *rel.parts)))
    return found


def test_every_package_folder_is_in_the_wheel_list():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    missing = _package_folders() - listed
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
