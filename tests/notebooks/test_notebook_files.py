"""The notebooks open in JupyterLab as notebooks, unmodified, with a
configuration of the project's own (``make lab``), and saving one writes back
the text it was read from."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import jupytext
import pytest
from ipykernel.ipkernel import IPythonKernel
from jupyter_client.kernelspec import KernelSpecManager
from traitlets.config.loader import PyFileConfigLoader

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))
JUPYTER_HOME = REPO / ".jupyter"


def lab_contents_manager(root: Path):
    """The contents manager ``make lab``'s server uses, serving ``root``."""
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(JUPYTER_HOME)).load_config()
    return config.ServerApp.contents_manager_class(root_dir=str(root))


def what_jupyterlab_sets(notebook) -> None:
    """The metadata JupyterLab writes into a notebook once its kernel runs:
    the kernel's spec and the language info its kernel reports."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": spec.display_name,
                                       "language": spec.language}
    notebook.metadata["language_info"] = dict(IPythonKernel.language_info)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_jupytext_writes_a_notebook_back_as_the_text_it_read(path: Path):
    text = path.read_text()
    assert jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="py:percent") == text


def test_opening_then_saving_a_notebook_in_jupyterlab_changes_no_byte(tmp_path: Path):
    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path)
    manager = lab_contents_manager(tmp_path)

    async def open_and_save(name: str) -> None:
        notebook = (await manager.get(name))["content"]
        what_jupyterlab_sets(notebook)
        await manager.save({"type": "notebook", "content": notebook}, name)

    for path in NOTEBOOKS:
        asyncio.run(open_and_save(path.name))
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


def test_a_notebook_opens_with_the_metadata_its_kernel_will_set(tmp_path: Path):
    """JupyterLab marks a notebook modified when the kernel it starts reports
    another kernelspec or language info than the notebook has: every notebook
    must open with what its kernel sets already there."""
    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path)
    manager = lab_contents_manager(tmp_path)
    for path in NOTEBOOKS:
        opened = asyncio.run(manager.get(path.name))["content"]
        expected = jupytext.reads(path.read_text(), fmt="py:percent")
        what_jupyterlab_sets(expected)
        for key in ("kernelspec", "language_info"):
            assert opened.metadata[key] == expected.metadata[key], (path.name, key)


def test_jupyterlab_opens_python_files_as_notebooks_by_the_projects_settings():
    overrides = json.loads((JUPYTER_HOME / "labconfig" / "default_setting_overrides.json")
                           .read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    # Only .py: the READMEs stay Markdown documents.
    assert viewers == {"python": "Jupytext Notebook"}


def test_make_lab_starts_jupyterlab_on_the_notebooks_with_jupyter_kept_in_the_checkout():
    recipe = subprocess.run(["make", "-n", "lab"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    command = recipe[recipe.index("JUPYTER_CONFIG_DIR="):]
    for variable in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTERLAB_SETTINGS_DIR",
                     "JUPYTERLAB_WORKSPACES_DIR"):
        assert f'{variable}="{JUPYTER_HOME}' in command, variable
    assert "jupyter lab --ServerApp.root_dir=notebooks" in command


def test_make_lab_passes_flags_on_and_starts_as_root_too():
    recipe = subprocess.run(["make", "-n", "lab", "LAB_ARGS=--no-browser --port=8899"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout
    command = recipe[recipe.index("jupyter lab"):].split("\n")[0]
    assert command.endswith("--no-browser --port=8899")
    # Jupyter refuses root without --allow-root; the recipe says it only as root.
    assert ("--allow-root" in command) == (os.geteuid() == 0)


def test_both_readmes_open_the_notebooks_with_make_lab():
    readme = (REPO / "README.md").read_text()
    notebooks_readme = (REPO / "notebooks" / "README.md").read_text()
    assert "\nmake lab\n" in readme and "\nmake lab\n" in notebooks_readme
    # Nothing sends the reader to the global setting `make lab` does without.
    assert "set-default-viewer" not in readme + notebooks_readme
