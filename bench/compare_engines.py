"""Compare two warpgrad engines on the same programs: does a refactor change what `gradcheck` says?

Run: `python bench/compare_engines.py --a /work/pp/base --b /work/pp/mine PROGRAM.py [PROGRAM.py ...]
[--tool gradcheck|diagnose] [--reps-a 1] [--timeout 900] [--rel 0] [--out results.json]`

Each PROGRAM is a script inside its program folder. For every engine (a PYTHONPATH under which `import warpgrad`
is that engine) the folder is copied to a fresh temporary directory (nothing is written into the repository) and
`python -m warpgrad TOOL SCRIPT --json` runs there (TOOL: `gradcheck`, the default, or `diagnose`, which also
runs the tape inspector and the localizer), with the engine's PYTHONPATH and a kernel cache per
program shared by both engines (so the second engine runs warm, as the first did after its first run).

The JSON of each run is normalized before the comparison: keys that are wall-clock (`*time*`, `*_s`, `elapsed`,
`seconds`, ...) or memory addresses (`ptr`, `grad_ptr`) are dropped, the temporary folder and the engines' own paths are replaced by placeholders, and what
is left (verdict, signature, roles, AD/FD numbers, notes, hypotheses) is compared field by field. Floats compare
exactly by default (`--rel` gives a relative slack). With `--reps-a 2` engine A runs twice, so a difference that
A shows against itself is run-to-run noise, not the change under test (B counts as the same when it equals one
of A's runs: the first run of a program compiles its kernels, the later ones find them cached).

Output: a markdown table (program, exit codes, same/different, the first differing fields) and, with `--out`,
the normalized runs and differences as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_determinism import first_json  # run as `python bench/...`: bench/ is on sys.path
from pydantic import BaseModel, Field

# Keys whose values are wall-clock or machine load, never part of what the check found.
_CLOCK = re.compile(r"(^|_)(time|times|timing|timings|elapsed|seconds|wall|duration|started|finished|at_utc|date)"
                    r"($|_)|_s$|_ms$")
# Keys that hold memory addresses (`ptr`, `grad_ptr` in tape descriptions): a new process, a new address.
_ADDRESS = re.compile(r"(^|_)ptr$")


class Run(BaseModel):
    engine: str
    program: str
    rep: int
    exit_code: int | None
    wall_s: float
    out: Any = None
    error: str | None = None


class Row(BaseModel):
    program: str
    exit_codes: dict[str, list[int | None]]
    same: bool
    noise_in_a: bool = Field(description="Engine A differs from itself between its runs.")
    differences: list[str]


def normalize(doc: Any, paths: dict[str, str]) -> Any:
    """`doc` without wall-clock fields, with each path in `paths` (real -> placeholder) replaced."""
    if isinstance(doc, dict):
        return {k: normalize(v, paths) for k, v in doc.items()
                if not (_CLOCK.search(str(k).lower()) or _ADDRESS.search(str(k).lower()))}
    if isinstance(doc, list):
        return [normalize(v, paths) for v in doc]
    if isinstance(doc, str):
        # Longest first: a temporary folder may sit inside another replaced path.
        for real in sorted(paths, key=len, reverse=True):
            doc = doc.replace(real, paths[real])
        return doc
    return doc


def diff(a: Any, b: Any, rel: float, where: str = "") -> list[str]:
    """Paths at which `a` and `b` differ (floats within `rel` relative count as equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'b' if k not in a else 'a'}")
            else:
                out.extend(diff(a[k], b[k], rel, f"{where}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, rel, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and a != b:
        if abs(a - b) <= rel * max(abs(a), abs(b)):
            return []
        return [f"{where}: {a!r} vs {b!r}"]
    if a != b or type(a) is not type(b):
        return [f"{where}: {str(a)[:80]!r} vs {str(b)[:80]!r}"]
    return []


def run_once(engine: str, pythonpath: str, program: Path, rep: int, cache: Path, timeout: float,
             tool: str = "gradcheck") -> Run:
    stage = Path(tempfile.mkdtemp(prefix="wg-cmp-"))
    try:
        shutil.copytree(program.parent, stage, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".warpgrad"))
        env = dict(os.environ, PYTHONPATH=pythonpath, WARP_CACHE_PATH=str(cache))
        env.pop("WARPGRAD_WORKER", None)  # each engine runs its own defaults, never a worker another one started
        argv = [sys.executable, "-m", "warpgrad", tool, program.name, "--json"]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(argv, cwd=stage, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return Run(engine=engine, program=str(program), rep=rep, exit_code=None,
                       wall_s=time.perf_counter() - t0, error=f"timed out after {timeout:.0f} s")
        wall = time.perf_counter() - t0
        doc = first_json(p.stdout)
        paths = {str(stage): "<STAGE>", str(stage.resolve()): "<STAGE>", pythonpath: "<ENGINE>",
                 str(Path(pythonpath).resolve()): "<ENGINE>", str(cache): "<CACHE>"}
        warpgrad = Path(pythonpath) / "warpgrad"
        paths[str(warpgrad.resolve())] = "<ENGINE>/warpgrad"
        return Run(engine=engine, program=str(program), rep=rep, exit_code=p.returncode, wall_s=wall,
                   out=normalize(doc, paths) if doc is not None else None,
                   error=None if doc is not None else (p.stderr or p.stdout)[-400:])
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def compare(runs_a: list[Run], runs_b: list[Run], rel: float) -> tuple[bool, bool, list[str]]:
    """(B equals one of A's runs, A differs from itself, the differences of B against its closest A run).

    Matching any of A's runs, not the first: the first run of a program compiles its kernels and the later
    ones (B included) find them in the cache, which notes can say; A against itself shows what such noise is."""
    def body(r: Run) -> Any:
        return r.out if r.out is not None else {"error": r.error}

    def against(a: Run, b: Run) -> list[str]:
        codes = [f"exit code {a.exit_code} vs {b.exit_code}"] if a.exit_code != b.exit_code else []
        return codes + diff(body(a), body(b), rel)

    noise = any(against(runs_a[0], r) for r in runs_a[1:])
    found: list[str] = []
    for r in runs_b:
        found.extend(min((against(a, r) for a in runs_a), key=len))
    return not found, noise, found


def rediff(saved: Path, rel: float) -> int:
    """The table of an earlier `--out` file, its runs normalized again (a field found to be noise after the run)."""
    runs = [Run.model_validate(r) for r in json.loads(saved.read_text())["runs"]]
    same_all = True
    print("| program | same | A vs A | first differences |\n|---|---|---|---|")
    for prog in dict.fromkeys(r.program for r in runs):
        mine = [r.model_copy(update={"out": normalize(r.out, {})}) for r in runs if r.program == prog]
        same, noise, found = compare([r for r in mine if r.engine == "a"], [r for r in mine if r.engine == "b"], rel)
        same_all &= same
        print(f"| {Path(prog).parent.name}/{Path(prog).name} | {'same' if same else 'DIFFERENT'} | "
              f"{'noisy' if noise else 'stable'} | {'; '.join(found[:3])[:200]} |")
    return 0 if same_all else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="PYTHONPATH of engine A (the baseline)")
    ap.add_argument("--b", required=True, help="PYTHONPATH of engine B (the change)")
    ap.add_argument("programs", nargs="+", type=Path)
    ap.add_argument("--tool", choices=["gradcheck", "diagnose"], default="gradcheck")
    ap.add_argument("--reps-a", type=int, default=1, help="runs of engine A (2: its own run-to-run noise)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--rel", type=float, default=0.0, help="relative slack on floats (default: exact)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rediff", type=Path, help="compare the runs saved by an earlier --out again (no new runs), "
                    "with this version's normalization")
    args = ap.parse_args(argv)
    if args.rediff:
        return rediff(args.rediff, args.rel)

    cache_root = Path(tempfile.mkdtemp(prefix="wg-cmp-cache-"))
    rows: list[Row] = []
    runs: list[Run] = []
    print("| program | exit A | exit B | same | A vs A | first differences |\n|---|---|---|---|---|---|", flush=True)
    for k, given in enumerate(args.programs):
        prog = given.resolve()
        cache = cache_root / str(k)
        runs_a = [run_once("a", args.a, prog, i, cache, args.timeout, args.tool) for i in range(args.reps_a)]
        runs_b = [run_once("b", args.b, prog, 0, cache, args.timeout, args.tool)]
        same, noise, found = compare(runs_a, runs_b, args.rel)
        row = Row(program=str(prog), exit_codes={"a": [r.exit_code for r in runs_a], "b": [r.exit_code for r in runs_b]},
                  same=same, noise_in_a=noise, differences=found)
        rows.append(row)
        runs.extend(runs_a + runs_b)
        label = f"{prog.parent.name}/{prog.name}"
        print(f"| {label} | {row.exit_codes['a']} | {row.exit_codes['b']} | {'same' if same else 'DIFFERENT'} | "
              f"{'noisy' if noise else 'stable'} | {'; '.join(found[:3])[:200]} |", flush=True)
        if args.out:
            args.out.write_text(json.dumps({"rows": [r.model_dump() for r in rows],
                                            "runs": [r.model_dump() for r in runs]}, indent=1))
    shutil.rmtree(cache_root, ignore_errors=True)
    return 0 if all(r.same for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
