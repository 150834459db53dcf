"""Colab, simulated: the package installed from its build (not editable) into a fresh environment that already
has PyTorch and Colab's usual libraries, and nothing else from requirements.txt; an exercise version runs there.

The set-up cell must find attnbook and not try to install it, and every check must say "not attempted yet".
This is the only test that catches a packaging mistake (a subpackage missing from the wheel, a dependency that
only the development environment has).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from conftest import ROOT

# What a Colab runtime already has (pinned to the versions in requirements.txt, so CI stays reproducible);
# jupyter-book, nbval, transformers and the rest of requirements.txt are deliberately absent.
COLAB_PACKAGES = ("torch", "numpy", "matplotlib", "tqdm", "ipykernel", "nbclient", "nbformat")
# One chapter in English, one in Chinese (below): test_student runs every exercise section in the development
# environment; what only this environment can show is a packaging mistake, which the test of every module and
# file below finds at a fraction of the cost of a third notebook
NOTEBOOKS = ("01_qkv.ipynb",)

RUNNER = r'''
import json, sys
import nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
import attnbook
report = {"attnbook_file": attnbook.__file__, "cells": []}
for cell in nb.cells:
    if cell.cell_type == "code":
        report["cells"].append({"source": cell.source, "outputs": [dict(o) for o in cell.outputs]})
print(json.dumps(report))
'''


def _closure(names) -> list:
    """The installed distributions of `names` and of everything they require (extras left out), as the development
    environment has them: the versions requirements.txt pins."""
    from importlib import metadata
    from packaging.requirements import Requirement

    found, todo = {}, list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(found.values())


@pytest.fixture(scope="module")
def colab_python(tmp_path_factory) -> Path:
    """A fresh virtual environment with Colab's usual libraries and attnbook installed from its build.

    The libraries are the development environment's own installed files (each distribution of COLAB_PACKAGES and
    of what they require, linked into the new environment's site-packages, its metadata with it): the same versions
    as a pip install of the pins would give, without unpacking PyTorch again (46 s of CI here)."""
    env_dir = tmp_path_factory.mktemp("colab") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    for dist in _closure(COLAB_PACKAGES):
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops - {"__pycache__"}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(_clean_copy(env_dir.parent / "source"))], check=True)  # built, not editable
    return python


def _clean_copy(to: Path) -> Path:
    """The files a build reads, as git sees them (committed or not, never ignored ones), copied to `to`: building
    in the repository would reuse its build/ folder, whose stale copies hide a file missing from the package."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "src", "pyproject.toml",
                             "README.md"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for name in listed:
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def test_the_install_is_a_build_with_nothing_from_requirements(colab_python):
    listed = subprocess.run([str(colab_python), "-m", "pip", "list", "--format=json"], check=True,
                            capture_output=True, text=True).stdout
    names = {p["name"].lower() for p in json.loads(listed)}
    assert "attnbook" in names
    assert not names & {"jupyter-book", "nbval", "myst-nb", "transformers", "sphinx", "pytest"}
    where = subprocess.run([str(colab_python), "-c", "import attnbook, sys; print(attnbook.__file__)"],
                           check=True, capture_output=True, text=True, cwd="/").stdout.strip()
    assert str(ROOT / "src") not in where and "site-packages" in where


IMPORT_ALL = r'''
import importlib, json, pkgutil, sys
from pathlib import Path
import attnbook
failed = {}
for module in pkgutil.walk_packages(attnbook.__path__, "attnbook."):
    if module.name.endswith(".__main__"):  # a command, which runs when imported
        continue
    try:
        importlib.import_module(module.name)
    except Exception as e:  # a module that needs what Colab lacks must say so only when used
        failed[module.name] = f"{type(e).__name__}: {e}"
root = Path(attnbook.__file__).parent
files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
print(json.dumps({"failed": failed, "files": files}))
'''


def test_every_module_imports_and_every_file_is_installed(colab_python):
    """Every module of the package imports without the development environment's extras, and every file the
    repository has under src/attnbook (the Chinese catalog included) is in the installed package."""
    result = subprocess.run([str(colab_python), "-c", IMPORT_ALL], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failed"] == {}, report["failed"]
    tracked = subprocess.run(["git", "ls-files", "src/attnbook"], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.split()
    missing = sorted({str(Path(t).relative_to("src/attnbook")) for t in tracked} - set(report["files"]))
    assert not missing, f"in the repository but not in the installed package: {missing}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_an_exercise_version_runs_like_in_colab(colab_python, name, tmp_path):
    runner = tmp_path / "run.py"
    runner.write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{colab_python.parent}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run([str(colab_python), str(runner), str(ROOT / "book" / "exercises" / name), str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "site-packages" in report["attnbook_file"] and str(ROOT / "src") not in report["attnbook_file"]
    setup = report["cells"][0]
    assert "import attnbook" in setup["source"] and setup["outputs"] == [], "the set-up cell tried to install"
    checks = [o for cell in report["cells"] for o in cell["outputs"]
              if "check" in o.get("metadata", {}).get("attnbook", {})]
    assert checks, "no check ran"
    statuses = {o["metadata"]["attnbook"]["check"]["status"] for o in checks}
    assert statuses == {"not attempted"}, statuses
    errors = [o for cell in report["cells"] for o in cell["outputs"] if o.get("output_type") == "error"]
    assert not errors, errors[:1]


def test_the_build_ships_the_chinese_feedback(colab_python):
    """The gettext catalog is package data: in Colab, set_language("zh") gives Chinese feedback."""
    code = ("import attnbook; attnbook.set_language('zh'); from attnbook.exercises import check; "
            "print(check('2.2', None).message)")
    out = subprocess.run([str(colab_python), "-c", code], check=True, capture_output=True, text=True, cwd="/").stdout
    assert re.search(r"[\u4e00-\u9fff]", out), out


def test_a_chinese_exercise_version_runs_like_in_colab(colab_python, tmp_path):
    runner = tmp_path / "run.py"
    runner.write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ATTNBOOK_LANG")}
    env["PATH"] = f"{colab_python.parent}{os.pathsep}{env.get('PATH', '')}"
    path = ROOT / "book" / "zh" / "exercises" / "02_scaled_attention.ipynb"
    result = subprocess.run([str(colab_python), str(runner), str(path), str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    checks = [o for cell in report["cells"] for o in cell["outputs"]
              if "check" in o.get("metadata", {}).get("attnbook", {})]
    assert checks and all(re.search(r"[\u4e00-\u9fff]", o["data"]["text/plain"]) for o in checks), checks[:1]
