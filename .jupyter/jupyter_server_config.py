"""The Jupyter server that ``make lab`` starts, configured for the lab's
text notebooks (``JUPYTER_CONFIG_DIR`` points here, so nothing in the
user's own Jupyter configuration changes; ``labconfig/`` beside this file
makes JupyterLab open a ``.py`` as a notebook).

A notebook must open unmodified. JupyterLab marks it modified as soon as its
kernel starts when the kernel's ``language_info`` differs from the
notebook's, and jupytext leaves ``language_info`` out of a text notebook
(it names the machine's Python version). The contents manager below hands
JupyterLab the ``language_info`` the kernel will report: the server and the
``python3`` kernel run the same interpreter (the lab's virtualenv). Saving
drops it again, as jupytext does for every text notebook.
"""

from typing import Any

from ipykernel.ipkernel import IPythonKernel
from jupytext import AsyncTextFileContentsManager


class LabNotebooksContentsManager(AsyncTextFileContentsManager):
    """Jupytext's contents manager, giving each notebook the kernel's ``language_info``."""

    async def get(self, path: str, content: bool = True, type: str | None = None,
                  format: str | None = None, **kwargs: Any) -> dict[str, Any]:
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model["type"] == "notebook":
            model["content"].metadata.setdefault("language_info",
                                                  dict(IPythonKernel.language_info))
        return model


c = get_config()  # type: ignore[name-defined]  # noqa: F821 -- provided by traitlets when loading
c.ServerApp.contents_manager_class = LabNotebooksContentsManager
