"""Sphinx configuration of the workshop book (``bash scripts/book.sh``; ``tools/book/``
copies this file, ``index.md``'s filled-in copy and ``_static/`` into the staged sources under
``book/_build/src``).

Sphinx + MyST-NB + the book theme: the notebooks are rendered as the replay left them
(``nb_execution_mode = "off"``: the book never executes anything itself).
"""

import os

from docutils import nodes

project = "Distributed deep-learning performance with Horovod"
author = "the workshop's authors"
copyright = "the workshop's authors"
html_title = "Horovod performance workshop"

extensions = ["myst_nb"]
nb_execution_mode = "off"
# Lessons render in the toctree's order; test-only cells are already left out
# (tools/book/prepare.py).
exclude_patterns = ["_build", "_downloads", "**/.ipynb_checkpoints", ".workshop-book"]
myst_heading_anchors = 3
# $...$ and $$...$$ as math, \begin{align} too; a lone "$" (a shell variable) stays text.
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True
nb_merge_streams = True
# Markdown outputs (the lessons' findings, wk.finding) are parsed as MyST, as the lessons'
# markdown cells are: MyST-NB's default, CommonMark, has no tables.
nb_render_markdown_format = "myst"
html_static_path = ["_static"]
# Long output lines wrap instead of being cut by the column (reader.css).
html_css_files = ["reader.css"]

# Where the repository is published (tools/book/repository.py, --repository): "" when not
# known, and then the theme shows no repository or launch button at all (never a link to a
# placeholder).
repository_url = os.environ.get("WORKSHOP_BOOK_REPOSITORY_URL", "")
html_theme = "sphinx_book_theme"
html_theme_options = {
    "path_to_docs": "",
    # The header's download button would offer this page's source: the replay. Each lesson's
    # own "download the notebook" link offers the lesson itself.
    "use_download_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
}
if repository_url:
    html_theme_options.update(
        {
            "repository_url": repository_url,
            "repository_branch": os.environ.get("WORKSHOP_BOOK_BRANCH", "HEAD"),
            "use_repository_button": True,
            # The header's rocket: Binder opens the page's notebook in JupyterLab.
            "launch_buttons": {
                "binderhub_url": "https://mybinder.org",
                "notebook_interface": "jupyterlab",
            },
        }
    )
html_last_updated_fmt = None


def _glossary_anchors(app, doctree) -> None:
    """A lesson links a word's first use to ``../docs/glossary.md#term-<word>``, a link that also
    works in Jupyter. MyST resolves such a fragment only against a page's labels, and a glossary
    term's anchor is not one: register each term's anchor as a label of the glossary page."""
    std = app.env.get_domain("std")
    for term in doctree.findall(nodes.term):
        for node_id in term["ids"]:
            if node_id.startswith("term-"):
                std.anonlabels[node_id] = (app.env.docname, node_id)


def setup(app) -> None:
    app.connect("doctree-read", _glossary_anchors)
