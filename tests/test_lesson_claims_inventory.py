"""The claims inventory (issue 59): every quantitative sentence and caption of lessons 01-09,
listed with how it is held (built from data, a source line, or a test), and the tests that
hold the listed claims a page states in words. The sentence-by-sentence checks of the issue's
items are in tests/test_lesson_claims.py (lesson 04's in tests/test_lesson_claims_04.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_lesson_claims import NOTEBOOKS, REPO, caption, cell, flat

import workshop as wk
from workshop import rules
from workshop.lessons.l06_scaling import findings as scaling_lesson

# --- the claims of lessons 01-09, listed and each held -------------------------------------
#
# A markdown sentence with a measured-looking number ("25.7 ms", "61 tensors", "17%") or a
# comparison ("faster", "at most", "grows") is held when it is a question's given (a cell
# tagged exercise), names a source line (it or its cell: `file.cc:NN`, CHANGELOG, a paper),
# or sits in a cell a test reads by id; every other one is listed below with how it is held.
# A new quantitative sentence that is none of these fails the inventory test. The findings
# the lessons show (wk.finding) are built from data, so they are not sentences here.

CLAIM = re.compile(
    r"(?<![\w.\-/`])\d[\d,]*(?:\.\d+)?\s*(?:%|x\b|ms\b|s\b|µs|us\b|MB|MiB|GB|KB|kB|bytes|"
    r"Mbit|Gbit|minutes|times|million|thousand)|\b(?:halves|doubles|grows|shrinks|at most|"
    r"at least|faster|slower|more than|less than|fewer|shorter|longer|later|earlier|heavier|"
    r"lighter|larger|smaller|higher|lower|most|least)\b"
)
#: A figure's caption states a claim with fewer words: "nearly all", "close to ideal".
CAPTION_CLAIM = re.compile(
    CLAIM.pattern + r"|\b(?:all|every|nearly|close to|barely|steadily|the larger)\b"
)
CITES = re.compile(r"`[\w/.-]+\.(?:cc|h|py)(?::\d+)?`|CHANGELOG|et al\. \(\d{4}|:\d+(?:-\d+)?`")
#: How a listed sentence is held: "header" (the lesson's overview, prerequisites, time),
#: "model" (a formula, rule or assumption the lesson states and its code implements, not a
#: measurement), "setup" (how a recording was made: its README and run.json say so),
#: "source-doc" (a number quoted from a document docs/sources.md lists), "pointer" (names a
#: finding the page computes, with no number of its own), "summary" (restates, without
#: numbers, a finding the page computes), "horovod:<words of a docs/sources.md row>",
#: "test:<name of a test in tests/>".
HELD = {
    ("01", "c7af5fd9", "## Prerequisites | Concepts | Importance"): "header",
    ("01", "c7af5fd9", "- **System requirements**: 2 CPU cores, "): "header",
    ("01", "bd48714b", "For real models the question is memory: "): "model",
    ("01", "33722409", "`wk.analysis.parallelism_table` applies "): "model",
    ("01", "a6b14fb1", "FLOPs per communicated byte is a propert"): "model",
    ("02", "e593ced6", "(Optional) Map each Horovod call to PyTo"): "header",
    ("02", "e593ced6", "The core counts writing the script yours"): (
        "test:test_lesson_02_states_the_minutes_writing_the_script_takes"
    ),
    ("02", "d7f3ab20", "Scale the learning rate, with warmup Wit"): "model",
    (
        "02",
        "0321edad",
        "`backward_passes_per_step=k` is for grad",
    ): "horovod:a second `backward()`",
    ("02", "85dfe37e", "## Optional: the run's learning rate, an"): "setup",
    ("03", "59e8c361", "Generate the ThetaGPU / Polaris job scri"): "header",
    ("03", "86d6cc01", "The command has `--warmup-epochs 0`, `wo"): "model",
    ("03", "d9e401b4", "(Lesson 01's data-parallel demo runs fas"): "pointer",
    ("03", "9d1ed61f", 'A claim "MPI is faster here" needs inter'): "model",
    ("03", "85ebdfdc", "Where the repeats' ranges overlap (said "): "pointer",
    ("04", "36f90cab", "Optional: parse the spans yourself; one-"): "header",
    ("04", "3fb96518", "When 8 gradients negotiate during the sa"): "model",
    ("04", "71c38c26", "On a cluster a rank that is last in most"): "model",
    ("05", "7b3538f6", "Compare CPU and GPU runs like with like:"): "header",
    ("05", "75ba3503", "One 8-byte allreduce per cycle, and a cy"): "horovod:sleeps what is left",
    ("05", "af451419", "At 20 ms the sleep dominates and the cou"): (
        "test:test_lesson_05s_counts_against_the_bound"
    ),
    ("05", "af451419", "At the default 1 ms the loop cannot keep"): (
        "test:test_lesson_05s_counts_against_the_bound"
    ),
    ("05", "ec6646cc", "Three reasons why it is not: - the time "): "model",
    ("05", "95a0a339", "The runs also differ in rank count (16 v"): "source-doc",
    ("06", "131a80b1", "# 06 · Scaling experiments Add workers a"): "header",
    ("06", "131a80b1", "Three of the documents this workshop gre"): "source-doc",
    ("06", "b7677942", "Read sweeps recorded in rounds: a comput"): "header",
    ("06", "b7677942", "Optional, at the end: the first epoch fr"): "header",
    ("06", "c7cff896", "Where they do, the remedies are the subj"): "pointer",
    ("06", "ef34a99c", "## What's next [07 · Batch size and lear"): "header",
    ("06", "4732e06c", "## Optional: Amdahl's law If a fraction "): "model",
    ("06", "4732e06c", "The Karp-Flatt metric e(N) = (1/S - 1/N)"): "model",
    ("06", "2480a364", "A CPU run has less of that to do. ### Sy"): "model",
    ("06", "71959237", "The thesis talk's arithmetic: \"on 2 work"): (
        "test:test_lesson_06_reproduces_the_thesis_talks_arithmetic"
    ),
    ("06", "71959237", "Its data set has 1M samples and its base"): (
        "test:test_lesson_06_reproduces_the_thesis_talks_arithmetic"
    ),
    ("06", "684e752d", "The second line is the ceiling the machi"): "summary",
    ("06", "684e752d", "What keeps Horovod below it: each [rank]"): (
        "test:test_lesson_06_states_the_cifar10_networks_parameters_in_millions"
    ),
    ("06", "684e752d", "On a GPU node the compute runs on the GP"): "model",
    ("06", "684e752d", "Its 80,202 parameters are 320,808 bytes "): (
        "test:test_a_ring_of_two_sends_the_mnist_gradient_in_25_7_ms_at_100_mbit"
    ),
    ("06", "6afc64d1", "A ring allreduce of m bytes over N worke"): "model",
    ("06", "6afc64d1", "`wk.analysis.comm_model_vs_measurement` "): "model",
    ("06", "907b4111", "Here it is low: the durations scatter fa"): (
        "test:test_lesson_06s_loopback_fit_explains_little"
    ),
    ("06", "04bafc1f", "What it leaves out: - **the algorithm th"): "model",
    ("06", "1fc66fe3", "On a real network B is fitted; here it i"): (
        "test:test_lesson_06s_known_bandwidth_is_tcps_share_of_the_rate"
    ),
    ("06", "b96a85b9", "### Where the ranks sit: MNIST by placem"): "setup",
    ("06", "2d2424d7", "### The ring model on the 100 Mbit/s swe"): "setup",
    ("07", "78b59100", "# 07 · Batch size and learning rate A la"): "header",
    ("07", "78b59100", "With [data parallelism](../docs/glossary"): "model",
    ("07", "9c93c9da", "**Time to learn**: 65 minutes (optional "): (
        "test:test_07_stated_time_is_honest_and_optional"
    ),
    ("07", "fdd67134", "## Time per epoch versus batch size One "): "setup",
    ("07", "ddc519a9", "The thesis talk (on GPUs) saw time per e"): "source-doc",
    ("07", "ddc519a9", "`wk.analysis.batch_size_plateau` finds t"): "model",
    ("07", "cd0a5100", "The sweeps were recorded on a quiet mach"): "setup",
    ("07", "7fd99bf4", "## Scaling the learning rate With k = gl"): "model",
    ("07", "366d8a9d", "## Summary - A larger batch on one worke"): "summary",
    ("08", "4167aac3", "This lesson measures each of them on rec"): "header",
    ("08", "f02d843e", "Lengthen the cycle time, count Horovod's"): "header",
    ("08", "f02d843e", "Accumulate gradients over several backwa"): "header",
    ("08", "f02d843e", "Tell an effect from the spread of repeat"): "header",
    ("08", "3310c179", "The whole gradient of a step (the bytes "): "model",
    ("08", "a6529521", "## Optional: where the network is the bo"): "model",
    ("08", "a6529521", "`data/cluster/knobs-100mbit` ran the sam"): (
        "test:test_a_ring_of_two_sends_the_mnist_gradient_in_25_7_ms_at_100_mbit"
    ),
    ("08", "a6529521", "Each knob was changed **alone** against "): "setup",
    ("08", "3d7e0c42", "A run listed above, with one epoch sever"): "pointer",
    ("08", "27287a09", "**On a GPU cluster with NCCL** the full "): "model",
    ("08", "7332566b", "Accumulation is the large-batch trade of"): "model",
    ("08", "323f0051", "Whether fewer operations made the steps "): "pointer",
    ("08", "323f0051", "- A cycle lasts at least `HOROVOD_CYCLE_"): "horovod:sleeps what is left",
    ("08", "323f0051", "Whether the steps got slower is what the"): "pointer",
    ("08", "323f0051", "- fp16 compression shrinks the bytes per"): "pointer",
    ("08", "323f0051", "- Where the network limits the step (100"): "summary",
    ("09", "ad7e65c1", "**Time to learn**: 40 minutes (core), +4"): "header",
}
#: Sentences whose comparison is a word of size or time ("later", "shorter", "most"): lesson
#: 04's "starts them later" and "much shorter", which its own numbers refuted, had none of the
#: words above.
HELD |= {
    ("01", "54108e26", "The measured idle shares are larger than"): "model",  # bubble: a floor
    ("01", "62834d46", "- **Which one fits** (optional section):"): "model",
    ("02", "66b105a6", "`lr_scaled` takes the highest LR of the "): "model",
    ("03", "903b93a2-w", "`wk.analysis.scaling_groups` finds such "): "pointer",
    ("04", "d1a3f68a", "What this does and does not show: - It s"): "pointer",
    ("05", "7b3538f6", "Reproduce the ALCF MPI-profiling tutoria"): "header",
    ("05", "3d255759", "Time in MPI includes waiting for the oth"): "model",
    ("06", "2f9844b1", "The package reads such lines from any lo"): "pointer",
    ("06", "c7cff896", "Whether a second worker pays depends on "): "model",
    ("06", "4732e06c", "`wk.analysis.amdahl_fit` finds f by leas"): "source-doc",
    ("06", "ad71b40c", "The rest of this section follows the fir"): "pointer",
    ("06", "6afc64d1", "Every allreduce a Horovod timeline recor"): "model",
    ("07", "78b59100", "The thesis talk found the catch: at the "): "source-doc",
    ("07", "9c93c9da", "Measure the accuracy a larger batch lose"): "header",
    ("07", "cd0a5100", "How much a larger batch gains depends on"): "model",
    ("07", "7fd99bf4", "The recorded `lr-rules-mnist` runs use 2"): "setup",
    ("07", "c2be1bec", "A larger batch runs more epochs per seco"): (
        "test:test_lesson_07s_larger_batches_run_more_epochs_per_second"
    ),
    ("07", "c3f0a7ee", "A run that has not fit its training set "): "model",
    ("07", "74562eaa", "The synchronisation share stated above i"): "pointer",
    ("07", "366d8a9d", "- Scaling the learning rate with the glo"): "summary",
    ("07", "366d8a9d", "- A tiny model whose step is mostly its "): "summary",
    ("08", "7332566b", "**On a GPU cluster with NCCL** it lets a"): "model",
    ("08", "b4cd1fc2", 'Where the line says "within the noise", '): "model",
    ("09", "2709fa20", "- A rank's own compute per step (its low"): "summary",
    ("09", "14b8eb3b", "Where the rounds disagree, or the median"): "model",
    ("09", "14b8eb3b", "And everything here is 2 ranks on one ho"): "setup",
}
HELD |= {
    ("01", "57239575", "caption"): "model",
    ("01", "7fa79e8d", "caption"): "model",  # each wait is one micro-batch's compute
    ("01", "3264e229", "caption"): "model",
    ("04", "eb1c75ef", "caption"): "model",
    ("06", "6e121efc", "caption"): "model",
    ("01", "c00c3130", "caption"): "model",
    ("03", "a99fe06d", "caption"): "pointer",
    ("06", "0efe3595", "caption"): "pointer",
    ("06", "02280917", "caption"): "test:test_lesson_06s_loopback_fit_explains_little",
    ("07", "02fe7f0f", "caption"): "model",
    ("07", "92c71abb", "caption"): "model",
    ("07", "2041647c", "caption"): "pointer",
    ("08", "4372171d", "caption"): "pointer",
    ("08", "32d77e6c", "caption"): "model",
    ("08", "a9c8644f", "caption"): "pointer",
    ("08", "e6e8bec6", "caption"): "pointer",
    ("08", "a7ebf16c", "caption"): "pointer",
}
KINDS = {"header", "model", "setup", "source-doc", "pointer", "summary"}
MY_LESSONS = ("01", "02", "03", "04", "05", "06", "07", "08", "09")


def claims() -> list[tuple[str, str, str, str]]:
    """Every quantitative markdown sentence of lessons 01-09: (lesson, cell id,
    its first 40 characters, how it is held: exercise, source, tested-cell or HELD's)."""
    here = Path(__file__).read_text()
    tests = " ".join(
        p.read_text() for p in (REPO / "tests").glob("test_*.py") if p.name != Path(__file__).name
    ) + " ".join(re.findall(r'(?:cell|caption)\("\d\d", "[\w-]+"\)', here))
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        lesson = path.name[:2]
        if lesson not in MY_LESSONS:
            continue
        for c in json.loads(path.read_text())["cells"]:
            caption = c.get("metadata", {}).get("caption", "")
            if caption and CAPTION_CLAIM.search(caption):
                key = (lesson, c["id"], "caption")
                tested = f'caption("{lesson}", "{c["id"]}")' in tests
                found.append((*key, HELD.get(key) or ("tested-cell" if tested else "")))
            if c["cell_type"] != "markdown":
                continue
            text = re.sub(r"```.*?```", "", "".join(c["source"]), flags=re.S)
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z*(`\-])", flat(text)):
                if not CLAIM.search(sentence):
                    continue
                key = (lesson, c["id"], sentence[:40])
                how = (
                    HELD.get(key)
                    or ("exercise" if "exercise" in c.get("metadata", {}).get("tags", []) else "")
                    or ("source" if CITES.search(text) else "")
                    or ("tested-cell" if f'"{c["id"]}"' in tests else "")
                )
                found.append((*key, how))
    return found


def test_every_quantitative_sentence_of_the_lessons_is_held():
    found = claims()
    unheld = [f"{lesson} {cell}: {start!r}" for lesson, cell, start, how in found if not how]
    assert not unheld, "quantitative sentences neither built nor tested:\n" + "\n".join(unheld)
    per_lesson = {n: sum(1 for f in found if f[0] == n) for n in MY_LESSONS}
    assert all(per_lesson.values()), per_lesson  # the inventory sees every lesson


def test_each_listed_way_of_holding_a_claim_exists():
    tests = " ".join(p.read_text() for p in (REPO / "tests").glob("test_*.py"))
    listed = flat((REPO / "docs" / "sources.md").read_text())
    seen = {(lesson, cell, start) for lesson, cell, start, _ in claims()}
    for key, how in HELD.items():
        assert key in seen, f"HELD lists a sentence the lessons no longer have: {key}"
        kind, _, what = how.partition(":")
        if kind == "test":
            assert f"def {what}(" in tests, f"{key}: no test {what}"
        elif kind == "horovod":
            assert what in listed, f"{key}: docs/sources.md has no row with {what!r}"
        else:
            assert how in KINDS, f"{key}: {how!r}"


def test_an_unlisted_claim_fails_the_inventory():
    # the old caption sentence of lesson 01, as markdown: a number-free "halves" with no source
    sentence = "Data parallel halves each process's compute."
    assert CLAIM.search(sentence) and not CITES.search(sentence)
    assert ("01", "fe11816d", sentence[:40]) not in HELD


def test_lesson_05s_counts_against_the_bound():
    # 130 eight-byte allreduces in 2.943 s at 20 ms: 0.88 of the bound 147 ("comes close");
    # 1,173 in 2.49 s at 1 ms: 0.47 of 2,490 ("cannot keep up")
    from workshop.lessons.l05_mpi import findings as mpi_lesson

    for name, cycle_ms, low, high in (
        ("mpi/torch-mnist-mpi-ops-cycle20ms-np2", 20, 0.8, 1.0),
        ("mpi/torch-mnist-mpi-ops-np2", 1, 0.0, 0.6),
    ):
        run = wk.open_run(wk.data_path(name))
        bound = mpi_lesson.rank0(run, "elapsed_s") / (cycle_ms / 1e3)
        assert low <= mpi_lesson.negotiations(run) / bound <= high, name


def test_lesson_06_reproduces_the_thesis_talks_arithmetic():
    # 750,000 samples / (75 x 2) = 5,000 synchronisations per epoch; at 1 ms each: 5 s
    counts = wk.analysis.syncs_per_epoch(samples=750_000, batch_size=75, nps=[2])
    assert float(counts.syncs_per_epoch.iloc[0]) * 1e-3 == pytest.approx(5.0)
    assert "750,000 training samples" in flat(cell("06", "71959237"))


def test_lesson_06s_loopback_fit_explains_little():
    # "Here it is low": R^2 0.06 over the recorded timelines
    model = scaling_lesson.comm_model(wk.open_run(wk.data_path("sweeps/fusion-tuning-mnist")))
    assert model["fit"]["r2"] < 0.3
    assert "Here it is low" in flat(cell("06", "907b4111"))


def test_lesson_06s_known_bandwidth_is_tcps_share_of_the_rate():
    assert wk.analysis.cluster.TCP_PAYLOAD_SHARE == pytest.approx(1448 / 1514)
    assert "1448 payload bytes per 1514-byte frame" in flat(cell("06", "1fc66fe3"))


# --- captions whose words are comparisons, checked against the data they draw --------------


def test_lesson_06s_speedup_captions_hold_against_the_lab_report():
    table = scaling_lesson.lab_report(wk.open_run(wk.data_path("seeds")))[1]
    # "the throughput line stays close to ideal": efficiency 0.94-0.96 at every GPU count
    assert "stays close to ideal" in caption("06", "0263b3d4")
    assert (table.efficiency_throughput >= 0.9).all()
    # "the wall-time line barely leaves 1": at most 1.89x on up to 32 GPUs
    assert "barely leaves 1" in caption("06", "0263b3d4") and table.speedup_wall.max() < 2
    # "by training time the efficiency sinks steadily": 1, 0.88, 0.87, 0.68, 0.54, 0.36
    assert "sinks steadily" in caption("06", "7d5d58f3")
    assert table.efficiency_train.is_monotonic_decreasing


def test_lesson_05s_captions_hold_against_the_profiles():
    run = wk.open_run(wk.data_path("mpi/torch-mnist-mpi-ops-np2"))
    routines = wk.analysis.routine_table(run).set_index("routine")
    # "one bar, MPI_Allreduce, holds nearly all of it" (1.274 s of 1.274 s)
    assert "holds nearly all of it" in caption("05", "c0ed56cb")
    assert routines.time_share["MPI_Allreduce"] >= 0.9
    cpu = wk.open_run(wk.data_path("mpi/seed001-thetagpu-cpu"))
    bins = wk.analysis.message_size_bins(cpu, routine="MPI_Allreduce")
    # "the tall bar at 8 bytes"; "the few large bins ... carry nearly all the bytes"
    assert bins.loc[bins.calls.idxmax()].avg_bytes == 8
    assert "carry nearly all the bytes" in caption("05", "4a14d13b")
    assert bins.nlargest(2, "bytes").bytes.sum() >= 0.9 * bins.bytes.sum()
    # "every rank spends most of its run in MPI": 0.68 to 0.78 of each rank's elapsed time
    assert "every rank spends most of its run in MPI" in caption("05", "4a79a2ec")
    assert (wk.analysis.comm_fraction(cpu).comm_fraction > 0.5).all()


def test_lesson_07s_larger_batches_run_more_epochs_per_second():
    from workshop.lessons.l07_batch_lr import findings as lr_lesson

    epochs = lr_lesson.lr_epochs(wk.open_run(wk.data_path("sweeps/lr-rules-mnist")))
    per_run = epochs.groupby(["global_batch_size", "run"]).epoch_time_s.median()
    # median epoch: 0.81 s at a global batch of 32, 0.25 to 0.31 s for each run at 512
    assert per_run.loc[512].max() < per_run.loc[32].min()


def test_lesson_07s_accuracy_caption_holds_against_the_batch_sweep():
    from workshop.lessons.l07_batch_lr import findings as lr_lesson

    batch = wk.open_run(wk.data_path("sweeps/batch-size-mnist"))
    at_fixed_lr = wk.analysis.accuracy_vs_batch(lr_lesson.one_worker(batch))
    # "the larger the batch, ... the less it learned": 0.958, 0.947, ... 0.100 for 16 ... 512
    assert "the larger the batch" in caption("07", "815f408e")
    ordered = at_fixed_lr.sort_values("global_batch_size").final_test_accuracy
    assert ordered.is_monotonic_decreasing


# --- lesson 09: the rules it states from optional lessons, and its predictions -------------


def test_lesson_09_states_horovods_defaults_from_the_rules():
    # the defaults' source lines: operations.cc:527 and :519 (docs/sources.md)
    text = flat(cell("09", "c1439554"))
    cycle = f"a background cycle every {rules.CYCLE_TIME_DEFAULT_MS:g} ms (`HOROVOD_CYCLE_TIME`)"
    fusion = f"tensor fusion up to {rules.FUSION_THRESHOLD_DEFAULT_BYTES // 2**20} MiB"
    assert cycle in text and fusion in text
    assert "base LR x global batch / base batch" in text  # the rule lesson 07 checks


def test_lesson_09s_finding_threshold_is_the_verdicts():
    from workshop.analysis.diagnose import verdict

    # "a finding is a saving of at least a tenth of the step"
    assert verdict.MIN_SHARE == pytest.approx(0.1)
    assert "a saving of at least a tenth of the step" in flat(cell("09", "dccd5eb0"))


def test_lesson_09s_straggler_gained_more_than_predicted():
    from workshop.lessons.l09_diagnose import findings as capstone_lesson
    from workshop.lessons.l09_diagnose.exercises import RECORDINGS

    cases = [wk.open_run(RECORDINGS[f"case-{n}"]) for n in range(1, 5)]
    table = capstone_lesson.prediction_table(*cases).set_index("problem")
    straggler = table.loc["straggler"]
    # case-1: predicted 9.3 +- 1.0 ms of a 20.5 ms step, measured 16.3 ms; gains 1.83x, 3.85x
    assert straggler.measured_ms > straggler.predicted_ms + straggler.uncertainty_ms
    assert straggler.measured_gain > straggler.predicted_gain
    assert "there the fixed run gained more than predicted" in flat(cell("09", "618b63fa"))


def test_lesson_09s_menu_claims_hold_against_the_cases():
    from workshop.lessons.l09_diagnose import capstone

    text = flat(cell("09", "95f9e285"))
    cases = [capstone.load(f"case-{n}") for n in range(1, 5)]
    keys = [capstone.answer_key(case) for case in cases]
    # "Two of the problems are in none of the cases": c, e, b, d in the cases; a and f not
    assert "Two of the problems are in none of the cases." in text
    assert len(set(capstone.PROBLEMS) - {k.problem for k in keys}) == 2
    # "a problem's number lies well outside it": 2.79 against at most 1.27 (straggler), 0.125
    # against 1.00 (learning rate), 8.0 against at most 3.38 (fusion), 50.1 against at most
    # 1.11 (cycle): each beyond twice the healthy maximum, or under half the healthy minimum
    assert "a problem's number lies well outside it" in text
    for case, key in zip(cases, keys, strict=True):
        row = capstone.evidence_table(case).set_index("problem").loc[key.problem]
        assert row.broken > 2 * row["healthy max"] or row.broken < row["healthy min"] / 2


@pytest.mark.filterwarnings("ignore::workshop.readers.TimelineWarning")
def test_lesson_09s_recordings_as_its_page_describes_them():
    from workshop.lessons.l09_diagnose import capstone
    from workshop.lessons.l09_diagnose.findings import SCRIPT_RECORDING

    runs = [
        wk.open_run(getattr(capstone.load(f"case-{n}"), part))
        for n in range(1, 5)
        for part in ("broken", "fixed")
    ]
    # "one or two of them [spans never closed]": 0 to 2 per diagnosis run
    unclosed = [run.timeline.metadata["unclosed"] for run in runs]
    assert max(unclosed) == 2 and "one or two of them" in flat(cell("09", "539ec696"))
    # "The diagnosis runs recorded a timeline with the background cycles marked"
    assert all(len(run.timeline.cycles) > 100 for run in runs)
    assert "with the background cycles marked (`--mark-cycles`)" in flat(cell("09", "e80ddf43"))
    # the learner's script run was recorded without --mark-cycles: the page says so (it showed
    # the command with --mark-cycles only, issue 59)
    own = wk.open_run(SCRIPT_RECORDING)
    command = json.loads((own.path / "run.json").read_text())["command"]
    assert len(own.timeline.cycles) == 0 and "--mark-cycles" not in command
    assert "recorded without `--mark-cycles`" in flat(cell("09", "48e78dda"))
