"""The emulated-cluster recordings (data/cluster/) and their analyses, without root."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from workshop.analysis import cluster as analysis
from workshop.paths import data_path
from workshop.readers.cluster import read_allreduce_sweep
from workshop.rules import ring_allreduce_time_s

ALLREDUCE = data_path("cluster", "allreduce")
SIZES_MIB = [1, 2, 4, 8, 16, 32, 64]


def synthetic_sweep(alpha_s: float, bits_per_s: float = 1e9, repeats: int = 3) -> pd.DataFrame:
    """A sweep whose cross-node times follow the ring model exactly (2 ranks), the intra-node
    ones a quarter of them."""
    bandwidth = bits_per_s / 8 * analysis.TCP_PAYLOAD_SHARE
    rows = []
    for repeat in range(repeats):
        for size in SIZES_MIB:
            cross = ring_allreduce_time_s(2, size * 2**20, alpha_s, bandwidth)
            for config, time_s, link in (("intra", cross / 4, None), ("cross-1gbit", cross, 1e9)):
                rows.append(
                    {"config": config, "np": 2, "repeat": repeat, "size_mib": size,
                     "bytes": size * 2**20, "time_s": time_s,
                     "link_bits_per_s": link if link else float("nan")}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_the_fit_recovers_the_latency_of_a_model_sweep():
    sweep = synthetic_sweep(alpha_s=2e-3)
    fit = analysis.fit_link_alpha(sweep, "cross-1gbit")
    # B is the tbf rate in payload bytes: 1e9 / 8 * 1448 / 1514 = 119.55 MB/s
    assert fit["bandwidth_bytes_per_s"] == pytest.approx(1e9 / 8 * 1448 / 1514)
    assert fit["alpha_s"] == pytest.approx(2e-3)
    table = analysis.model_vs_measured(sweep, "cross-1gbit")
    assert table["error"].abs().max() < 1e-9 and table["within_spread"].all()
    jump = analysis.internode_jump(sweep)
    assert jump["ratio_median"].tolist() == pytest.approx([4.0] * len(SIZES_MIB))


def test_the_fit_refuses_a_configuration_without_a_link():
    with pytest.raises(ValueError, match="inside one node"):
        analysis.fit_link_alpha(synthetic_sweep(1e-3), "intra")
    with pytest.raises(ValueError, match="no configuration 'cross-9gbit'"):
        analysis.fit_link_alpha(synthetic_sweep(1e-3), "cross-9gbit")


def test_the_recording_has_interleaved_repeats_of_every_configuration():
    result = json.loads((ALLREDUCE / "result.json").read_text())
    sweep = read_allreduce_sweep(ALLREDUCE)
    assert set(sweep["config"]) >= {"intra", "cross-1gbit", "cross-10gbit"}
    assert sorted(sweep["size_mib"].unique()) == SIZES_MIB
    per_config = sweep.groupby(["config", "size_mib"])["repeat"].nunique()
    assert per_config.min() >= 5
    # interleaved: the jobs ran repeat by repeat, every configuration once per repeat
    order = [(job["repeat"], job["config"]) for job in result["jobs"]]
    assert order == sorted(order, key=lambda rc: (rc[0], result["settings"]["order"].index(rc[1])))
    # the cross-node jobs really had one rank on each node
    for job in result["jobs"]:
        hosts = set(job["hosts"])
        assert hosts == ({"nodea"} if job["config"] == "intra" else {"nodea", "nodeb"}), job


def test_the_reader_takes_each_jobs_median_call():
    result = json.loads((ALLREDUCE / "result.json").read_text())
    sweep = read_allreduce_sweep(ALLREDUCE)
    job = result["jobs"][1]
    row = sweep[(sweep["repeat"] == job["repeat"]) & (sweep["config"] == job["config"])]
    by_size = row.set_index("size_mib")["time_s"]
    assert by_size[64] == statistics.median(job["times_s"]["64"])
    assert row["link_bits_per_s"].iloc[0] == {"cross-1gbit": 1e9, "cross-10gbit": 1e10}.get(
        job["config"], row["link_bits_per_s"].iloc[0]
    )


def test_the_recorded_fit_is_the_relative_least_squares_alpha():
    sweep = read_allreduce_sweep(ALLREDUCE)
    fit = analysis.fit_link_alpha(sweep, "cross-1gbit")
    bandwidth = 1e9 / 8 * 1448 / 1514
    medians = sweep[sweep["config"] == "cross-1gbit"].groupby("bytes")["time_s"].median()
    # t = 2 alpha + m / B at 2 ranks, relative least squares (weights 1 / t^2):
    # alpha = sum(w (t - m / B)) / (2 sum(w))
    weights = {m: 1 / t**2 for m, t in medians.items()}
    residuals = sum(weights[m] * (t - m / bandwidth) for m, t in medians.items())
    by_hand = residuals / (2 * sum(weights.values()))
    assert fit["alpha_s"] == pytest.approx(max(0.0, by_hand))
    table = analysis.model_vs_measured(sweep, "cross-1gbit")
    assert (table["min_s"] <= table["median_s"]).all() and (
        table["median_s"] <= table["max_s"]
    ).all()
    assert table["error"].tolist() == pytest.approx(
        ((table["predicted_s"] - table["median_s"]) / table["median_s"]).tolist()
    )


def test_the_inter_node_jump_is_a_per_repeat_ratio():
    sweep = read_allreduce_sweep(ALLREDUCE)
    jump = analysis.internode_jump(sweep).set_index("size_mib")
    wide = sweep.pivot_table(index=["size_mib", "repeat"], columns="config", values="time_s")
    ratios = (wide["cross-1gbit"] / wide["intra"]).loc[64]
    assert jump.loc[64, "ratio_median"] == pytest.approx(ratios.median())
    assert jump.loc[64, "ratio_min"] == pytest.approx(ratios.min())


def test_the_placement_runs_ran_where_they_say():
    from workshop.readers.cluster import read_placement_runs

    folder = data_path("cluster", "mnist-placement")
    runs = read_placement_runs(folder)
    # what the benchmark ran: --repeats 5, but --budget-s stops it after a whole repeat when
    # the next would not fit (the quiet recording: 3 repeats of the 4 placements)
    bench = json.loads((folder / "benchmark.json").read_text())
    ran = pd.DataFrame(bench["runs"])
    assert (ran["exit_code"] == 0).all() and set(runs["status"]) == {"ok"}
    per_placement = ran.groupby("placement").size()
    repeats = per_placement.iloc[0]
    assert set(per_placement) == {repeats} and repeats >= 3  # equal counts; a median of 3+
    assert sorted(ran["repeat"].unique()) == list(range(repeats))
    assert len(runs) == len(ran) == 4 * repeats
    assert runs.groupby(["np", "placement"]).size().to_dict() == {
        (2, "1+1"): repeats, (2, "2+0"): repeats, (4, "2+2"): repeats, (4, "4+0"): repeats,
    }  # fmt: skip
    for path in runs["path"]:
        cluster = json.loads((folder / path.split("/")[-1] / "run.json").read_text())["cluster"]
        # the hostname each rank wrote is the node the placement put it on
        assert cluster["rank_hosts_seen"] == cluster["rank_hosts"], path
    table = analysis.placement_table(runs).set_index(["np", "placement"])
    two = runs[(runs["np"] == 2) & (runs["placement"] == "1+1")]["samples_per_s"].median()
    one = runs[(runs["np"] == 2) & (runs["placement"] == "2+0")]["samples_per_s"].median()
    assert table.loc[(2, "1+1"), "vs_one_node"] == pytest.approx(two / one)
    assert table.loc[(2, "2+0"), "vs_one_node"] == 1.0
