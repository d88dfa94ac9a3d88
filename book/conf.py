"""Sphinx configuration of the workshop book (``bash scripts/book.sh``; ``workshop/book.py``
copies this file into the staged sources under ``book/_build/src``).

Sphinx + MyST-NB + the book theme: the notebooks are rendered as the replay left them
(``nb_execution_mode = "off"``: the book never executes anything itself).
"""

import os

project = "Distributed deep-learning performance with Horovod"
author = "the workshop's authors"
copyright = "the workshop's authors"
html_title = "Horovod performance workshop"

extensions = ["myst_nb"]
nb_execution_mode = "off"
# Lessons render in the toctree's order; solutions are already left out (workshop/book.py).
exclude_patterns = ["_build", "_downloads", "**/.ipynb_checkpoints", ".workshop-book"]
myst_heading_anchors = 3
nb_merge_streams = True

repository_url = os.environ.get("WORKSHOP_BOOK_REPOSITORY_URL", "https://github.com/OWNER/REPO")
html_theme = "sphinx_book_theme"
html_theme_options = {
    "repository_url": repository_url,
    "repository_branch": os.environ.get("WORKSHOP_BOOK_BRANCH", "HEAD"),
    "path_to_docs": "",
    "use_repository_button": True,
    # The header's rocket: Binder opens the page's notebook in JupyterLab.
    "launch_buttons": {"binderhub_url": "https://mybinder.org", "notebook_interface": "jupyterlab"},
    # The header's download button would offer this page's source: the replay, without its
    # solutions. Each lesson's own "download the notebook" link offers the lesson itself.
    "use_download_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
}
html_last_updated_fmt = None
