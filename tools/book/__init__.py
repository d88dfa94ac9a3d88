"""The workshop book: the reader's edition of the lessons, as a static website.

``bash scripts/book.sh`` (``workshop book``) does four things:

1. **Replay** every lesson with papermill as CI runs it (``replay.py``): ``LIVE = False``,
   ``SOLUTIONS = True`` (the worked solutions run, so every finding a lesson reveals after its
   exercises is there), no learner answer given, from the notebooks folder, with explorers
   drawing their static picture (``WORKSHOP_STATIC_WIDGETS=1``). ``--replays DIR`` takes
   already executed notebooks instead (the tests pass theirs).
2. **Prepare** each executed notebook for reading (``prepare.py``). What a learner sees only
   after answering goes into a collapsed block under its exercise: a worked solution ("Worked
   solution of exercise 05.1"), a cell that prints through ``exercises.reveal`` and a note
   collapsed in the notebook ("Show after you have answered"). What exists for the tests is
   left out: papermill's injected parameters, cells tagged ``test-only`` or holding nothing but
   a ``results.save(...)`` call, and the ``SOLUTIONS`` and ``RESULTS_PATH`` lines of the
   parameters cell; so are a widget's state (its static picture stays) and libraries' log
   noise (TensorFlow's and absl's start-up lines). Paths inside the clone are shown
   relative to it, a warning without the kernel's file name; each exercise's prompt goes in a
   box (class ``exercise``); each figure gets a caption and an alt text (the cell's
   ``caption`` metadata, else the sentence that introduces it); a line with "launch on
   Binder" and "download the notebook" goes under the title. An error output, a warning that
   names a package path, a ``None`` shown as a result, or a line "answer exercise ... above to
   see this line" (a replay without the solutions) stops the build and names the lesson and
   the cell. A check's "no answer yet" line (the replay gives no answer) is left out: the book
   never prints it.
3. **Stage** a Sphinx source folder (``stage.py``): the landing page for learners
   (``book/index.md``, with the table of lessons and their times read from the lessons' own
   headers), the ten lessons in order, the README as "Install and develop", then docs/
   (glossary, sources, instructor guide, clusters, run-directory contract); the committed
   notebooks (no outputs) are the download links' targets.
4. **Build** it with Sphinx + MyST-NB and the book theme into ``book/_build/html``
   (``build.py``, whose ``build_book`` runs the four steps).

The repository the Binder links and the GitHub button point to (``repository.py``) is
``--repository OWNER/NAME``, else ``$WORKSHOP_BOOK_REPOSITORY``, else ``$GITHUB_REPOSITORY``
(set in GitHub Actions), else the ``origin`` remote when it is on GitHub. When none is known
the book has no Binder link and no GitHub button, and says how to set it: it never links to a
placeholder.

This is tooling of the repository's checkout, not part of the installed ``workshop`` package:
``workshop book`` (workshop/commands/book.py) imports it from the checkout.
"""
