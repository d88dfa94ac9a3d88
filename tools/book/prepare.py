"""Step 2 of the book: an executed lesson prepared for reading (what a learner sees only after
answering collapsed under its exercise, what exists for the tests left out; see
:mod:`tools.book`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tools.book.repository import BookError, Links
from workshop.lessons.engine import UNANSWERED_LINE
from workshop.paths import REPO_DIR

# The parameters only the tests and CI set: not on a reader's page.
TEST_PARAMETERS = ("SOLUTIONS", "RESULTS_PATH")
# A cell that exists for the tests only (the results file they read).
TEST_ONLY = "test-only"
# What exercises.reveal prints when the exercise was not answered: a reader's edition built
# without the solutions.
PLACEHOLDER_LINE = re.compile(r"answer exercises? [\d. and]+ above to see this line")
REVEAL_CALL = re.compile(r"exercises\.reveal\(\s*(\[[^\]]*\]|\"[^\"]*\")")
SOLUTION_CALL = re.compile(r"exercises\.(?:check_solution|solution_hidden)\(\s*\"([\d.]+)\"")
EXERCISE_ID = re.compile(r"\d\d\.\d+")
# Libraries' start-up lines that say nothing to a reader of a lesson (TensorFlow's and absl's),
# on stderr or in a run's log that a lesson prints (there behind a rank prefix "[1]<stderr>:").
LOG_NOISE = re.compile(
    r"^.*(?:Could not find cuda drivers|WARNING:tensorflow:|oneDNN custom operations"
    r"|TF_ENABLE_ONEDNN_OPTS|This TensorFlow binary is optimized"
    r"|rebuild TensorFlow with the appropriate compiler flags"
    r"|All log messages before absl::InitializeLog).*\n?"
    r"|^(?:\[\d+\]<std\w+>:)?[IWE]\d{4} [\d:.]+ +\d+ \w+\.cc:\d+\].*\n?",
    re.M,
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A warning printed with the file that raised it: a path into an installed package, which a
# reader cannot act on (lessons explain their warnings in words, once).
PACKAGE_PATH = re.compile(r"(site-packages|dist-packages|/workshop/)[^\s:]*\.py:\d+")


# Python's warning format in a kernel: "<cell file>:<line>: Category: message" then the cell's
# source line; the book keeps "Category: message" (the cell is on the page right above).
KERNEL_WARNING = re.compile(r"^\S*ipykernel_\d+/\d+\.py:\d+: (\w+: [^\n]*)\n(?:  [^\n]*\n)?", re.M)


def _tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def left_out(cell) -> bool:
    """Whether the book leaves ``cell`` out: papermill's injected parameters, a cell tagged
    ``test-only``, and a code cell that only saves the results file the tests read."""
    tags = _tags(cell)
    return "injected-parameters" in tags or TEST_ONLY in tags or _only_saves_results(cell)


def _only_saves_results(cell) -> bool:
    """A code cell whose one statement is ``results.save(...)`` (or ``x = results.save(...)``)."""
    if cell.cell_type != "code":
        return False
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    if len(body) != 1 or not isinstance(body[0], (ast.Assign, ast.Expr)):
        return False
    call = body[0].value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "save"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "results"
    )


def _collapsed(cell) -> bool:
    return cell.metadata.get("jupyter", {}).get("source_hidden") is True


def _without_test_parameters(source: str) -> str:
    """The parameters cell without the lines that set what only the tests and CI set."""
    names = "|".join(TEST_PARAMETERS)
    return re.sub(rf"^(?:{names}) *=[^\n]*\n?", "", source, flags=re.M).rstrip("\n")


def _solution_body(source: str) -> str:
    """A worked solution as a reader reads it: the body of ``if SOLUTIONS:``, without the
    ``else:`` branch that says how to see it."""
    lines = source.splitlines()
    if not lines or lines[0].strip() != "if SOLUTIONS:":
        return source
    body = []
    for line in lines[1:]:
        if line.startswith("else:"):
            break
        body.append(line[4:] if line.startswith("    ") else line)
    return "\n".join(body).strip("\n")


def _hide(cell, mode: str, label: str) -> None:
    """Collapse ``cell`` (MyST-NB's ``hide-cell``/``hide-output``) behind ``label``."""
    cell.metadata["tags"] = [*_tags(cell), mode]
    options = cell.metadata.setdefault("mystnb", {})
    options["code_prompt_show"] = label
    options["code_prompt_hide"] = "Hide"


def _exercises_of(match: str) -> str:
    found = EXERCISE_ID.findall(match)
    return ", ".join(found[:-1]) + f" and {found[-1]}" if len(found) > 1 else found[0]


def _details(markdown: str, label: str) -> str:
    """Markdown behind an HTML ``details`` block (MyST passes the tags through and renders
    the markdown between them)."""
    return f'<details class="reveal">\n<summary>{label}</summary>\n\n{markdown}\n\n</details>'


# What a figure-drawing cell calls (a committed lesson has no outputs to look at).
DRAWS = re.compile(r"\bplot\.plot_\w+\(|\.plot\(|\bplt\.subplots\(|\bwidgets\.\w+_explorer\(")
# A figure number a caption gives itself ("Figure 1. ..."), which the book's numbering replaces.
OWN_NUMBER = re.compile(r"^Figure \d+(?:\.\d+)?[.:]\s*")
# A caption is copied when at least this share of its words is one sentence of the markdown
# around its cell, in order (the book once cut the paragraph before a figure at 200 characters).
COPIED_SHARE = 0.6
# The markdown cells on each side of a figure that a caption must not repeat.
AROUND = 3


def _words(text: str) -> list[str]:
    text = re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", text)  # a link reads as its text
    return re.findall(r"[a-z0-9_']+", text.lower())


def copied_from(caption: str, markdown: str) -> str | None:
    """The sentence of ``markdown`` that ``caption`` mostly repeats (None: written fresh): at
    least :data:`COPIED_SHARE` of the caption's words, in the sentence's order."""
    from difflib import SequenceMatcher

    words = _words(caption)
    if len(words) < 3:
        return None
    prose = re.sub(r"^#.*$", "", markdown, flags=re.M)
    for sentence in re.split(r"(?<=[.!?:])\s+|\n\s*\n", prose):
        matcher = SequenceMatcher(None, words, _words(sentence), autojunk=False)
        same = sum(block.size for block in matcher.get_matching_blocks())
        if same >= COPIED_SHARE * len(words):
            return " ".join(sentence.split())
    return None


def _draws(cell) -> bool:
    """Whether a code cell draws a figure: an image among its outputs, or a drawing call."""
    outputs = cell.get("outputs", [])
    images = any(k.startswith("image/") for o in outputs for k in o.get("data", {}))
    return images or bool(DRAWS.search(cell.source))


def figure_problems(notebook, name: str = "") -> list[str]:
    """Each figure cell of ``notebook`` without a ``caption`` in its metadata, or whose caption
    is copied from the markdown around it (:func:`copied_from`): "<name> cell <i>: ..."."""
    problems = []
    cells = notebook.cells
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or left_out(cell) or not _draws(cell):
            continue
        caption = cell.metadata.get("caption", "").strip()
        if not caption:
            problems.append(f"{name} cell {index}: a figure without 'caption' metadata")
            continue
        around = [
            c.source
            for c in cells[max(0, index - AROUND) : index + AROUND + 1]
            if c.cell_type == "markdown"
        ]
        sentence = copied_from(caption, "\n\n".join(around))
        if sentence:
            problems.append(f"{name} cell {index}: caption copied from the text: {sentence!r}")
    return problems


def _figure_text(cell, lesson: str, number: int) -> tuple[str, str]:
    """A figure's caption and alt text: "Figure NN.k: <the cell's caption metadata>" (no text
    is copied from the markdown around it; a figure without a caption gets its number only)."""
    label = f"Figure {lesson}.{number}"
    # the book numbers the figures: a number the caption gives itself would be a second one
    given = OWN_NUMBER.sub("", " ".join(cell.metadata.get("caption", "").split()))
    if given:
        return f"{label}: {given}", given
    return label, f"{label} of lesson {lesson}"


def _output_problem(output) -> str | None:
    kind = output.get("output_type")
    if kind == "error":
        return f"an error: {output.get('ename')}: {output.get('evalue')}"
    if kind == "stream" and output.get("name") == "stderr":
        found = PACKAGE_PATH.search(output.get("text", ""))
        if found:
            return f"a message on stderr naming {found[0]!r}"
    if kind == "execute_result" and output.get("data", {}).get("text/plain") == "None":
        return "None shown as a result"
    if kind == "stream":
        placeholder = PLACEHOLDER_LINE.search(output.get("text", ""))
        if placeholder or "worked solution not run" in output.get("text", ""):
            return (
                f"{(placeholder[0] if placeholder else 'worked solution not run')!r}: "
                "replay the lesson with SOLUTIONS = True"
            )
    return None


def _for_reader(text: str, repo: Path) -> str:
    """Text as a reader of the website needs it: paths inside the clone relative to it
    (``data/runs``, not the build machine's ``/home/.../data/runs``), a warning without the
    kernel's temporary file name."""
    return KERNEL_WARNING.sub(r"\1\n", text.replace(f"{repo}/", ""))


def _readable(output, repo: Path):
    if "text" in output:
        # The book is built with no answer given: a check's "no answer yet" line is for a
        # learner at the notebook, never for a reader (the check cell shows no output).
        text = UNANSWERED_LINE.sub("", output["text"])
        output["text"] = LOG_NOISE.sub("", _for_reader(text, repo))
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") and isinstance(value, str):
            output["data"][kind] = _for_reader(value, repo)
    return output


def _without_widget_state(output):
    """A display output without its widget view (the explorer's static picture is its own
    output): None when nothing else is left but the widget's text stand-in."""
    data = output.get("data")
    if output.get("output_type") not in ("display_data", "execute_result") or WIDGET_VIEW not in (
        data or {}
    ):
        return output
    rest = {k: v for k, v in data.items() if k not in (WIDGET_VIEW, "text/plain")}
    if not rest:
        return None
    output["data"] = rest
    return output


def prepare(executed, name: str, links: Links, download: str, repo: Path = REPO_DIR):
    """The executed notebook ``name`` as the book shows it (see the module's docstring).

    Args:
        executed: the nbformat notebook, executed with ``SOLUTIONS = True``.
        name: the lesson's file name, for error messages and the Binder link.
        links: where the Binder link points.
        download: the download link's target, relative to the lesson's page.
        repo: the clone the replay ran in (paths under it are shown relative to it).

    Raises:
        BookError: an output a reader must not see, naming the lesson and the cell.
    """
    import nbformat

    cells, problems = [], []
    figures = 0
    for index, cell in enumerate(executed.cells):
        tags = _tags(cell)
        if left_out(cell):
            continue
        if cell.cell_type == "markdown":
            if "exercise" in tags:
                # The prompt in a box of its own (four backticks: a prompt may hold a fence).
                cell.source = (
                    f"````{{admonition}} Your turn\n:class: tip exercise\n\n{cell.source}\n````"
                )
            elif _collapsed(cell):
                cell.source = _details(cell.source, "Show after you have answered")
        if cell.cell_type == "code":
            if "parameters" in tags:
                cell.source = _without_test_parameters(cell.source)
            outputs = []
            for output in cell.get("outputs", []):
                problem = _output_problem(output)
                if problem:
                    problems.append(f"{name} cell {index}: {problem}")
                kept = _without_widget_state(_readable(output, repo))
                if kept is not None and not (
                    kept.get("output_type") == "stream" and not kept.text
                ):
                    outputs.append(kept)
            cell.outputs = outputs
            solution = SOLUTION_CALL.search(cell.source)
            revealed = REVEAL_CALL.search(cell.source)
            if "solution" in tags:
                cell.source = _solution_body(cell.source)
                which = _exercises_of(solution[0]) if solution else ""
                _hide(cell, "hide-cell", f"Worked solution of exercise {which}".strip())
            elif revealed and outputs:
                label = f"Show after you have answered {_exercises_of(revealed[1])}"
                _hide(cell, "hide-output", label)
            elif _collapsed(cell):
                _hide(cell, "hide-cell", "Show after you have answered")
            if any(k.startswith("image/") for o in outputs for k in o.get("data", {})):
                figures += 1
                caption, alt = _figure_text(cell, name[:2], figures)
                options = cell.metadata.setdefault("mystnb", {})
                options["image"] = {"alt": alt}
                options["figure"] = {"caption": caption}
        cells.append(cell)
    if problems:
        raise BookError("\n".join(problems))
    headings = [c.cell_type == "markdown" and c.source.startswith("# ") for c in cells]
    title = headings.index(True) if True in headings else None
    if title is None:
        raise BookError(f"{name}: no title (a markdown cell starting with '# ')")
    binder = links.binder(name)
    launch = (
        f"[Launch this lesson on Binder]({binder}) (live, nothing to install) · " if binder else ""
    )
    line = (
        f"{launch}{{download}}`Download the notebook <{download}>` (to run it yourself). "
        "Answer each exercise first: the worked solutions, and the results that would give an "
        "answer away, sit in collapsed blocks under it."
    )
    cells.insert(title + 1, nbformat.v4.new_markdown_cell(line))
    executed.cells = cells
    for cell in executed.cells:  # collapsing is the blocks' job now
        cell.metadata.pop("jupyter", None)
    executed.metadata.pop("widgets", None)
    executed.metadata.pop("papermill", None)
    return executed
