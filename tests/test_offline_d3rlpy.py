"""experiments/benchmarks/offline_d3rlpy.py: every algorithm runs a few steps on a tiny Pendulum
dataset and gets its json row; d3rlpy's AWAC critic has its temperature neutralised (its TD
target is then min Q'(s', a') exactly, where the stock one subtracts log pi); --resume skips
the runs already written and refuses other settings."""

import importlib
import importlib.util
import json
import sys

import numpy as np
import pytest
import torch

from super_sac import datasets as ds
from super_sac.cli import dataset_id
from super_sac.wrappers import make_gym_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ENV = "Pendulum-v1"
QUALITIES = ("medium", "medium-replay")
DATASET_SCORES = {"medium": 12.5, "medium-replay": 7.5}


@pytest.fixture(scope="module")
def bench():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(folder))
        yield importlib.import_module("offline_d3rlpy")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two 400-transition random Pendulum datasets under the names build_datasets.py gives the
    medium and medium-replay ones, and a reference_returns.json for them."""
    root = tmp_path_factory.mktemp("offline_data")
    env = make_gym_env(ENV)
    datasets = {}
    for i, quality in enumerate(QUALITIES):
        episodes, obs_space, act_space = ds.record_episodes(
            env, ds.random_policy(env, i), 400, seed=i
        )
        ds.save_minari(dataset_id(ENV, quality), episodes, obs_space, act_space, root / "minari")
        datasets[quality] = {"normalized_score": DATASET_SCORES[quality], "sha256": {"x": str(i)}}
    refs = {ENV: {"random_return": -1200.0, "expert_return": -200.0, "datasets": datasets}}
    (root / "reference_returns.json").write_text(json.dumps(refs))
    return root


def _argv(data, tmp_path, *extra):
    return [
        "--env", ENV, "--data", str(data), "--steps", "4", "--eval_interval", "2",
        "--last_evals", "2", "--eval_episodes", "1", "--seeds", "0", "--d3rlpy_batch", "32",
        "--gin_bindings", "Agent.hidden_size = 16", "--gin_bindings", "ReplayBuffer.size = 1000",
        "--results_dir", str(tmp_path), "--name", "smoke", *extra,
    ]  # fmt: skip


# d3rlpy comes with `make setup-bench` (not the test extra: it pins an older gymnasium and is
# installed without its dependencies); without it the d3rlpy side is skipped, ours still runs
needs_d3rlpy = pytest.mark.skipif(
    importlib.util.find_spec("d3rlpy") is None, reason="d3rlpy is installed by make setup-bench"
)


def test_our_algorithms_run_and_get_their_rows_without_d3rlpy(bench, data, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "d3rlpy", None)  # as on a machine without it
    ours = [a for a in bench.ALGOS if a.startswith("ours_")]
    bench.main(_argv(data, tmp_path, "--algos", ",".join(ours)))
    written = json.loads((tmp_path / "smoke.json").read_text())
    assert written["versions"]["d3rlpy"] is None
    rows = {(r["algo"], r["dataset"]) for r in written["summary"]}
    assert rows == {(a, q) for a in ours for q in QUALITIES}
    for run in written["runs"]:
        assert [step for step, _ in run["curve"]] == [2, 4]
        expected = np.mean([100 * (r + 1200.0) / 1000.0 for r in run["last_returns"]])
        assert run["normalized"] == pytest.approx(expected)


@needs_d3rlpy
def test_every_algorithm_runs_and_gets_its_rows(bench, data, tmp_path):
    payload = bench.main(_argv(data, tmp_path, "--algos", ",".join(bench.ALGOS)))
    written = json.loads((tmp_path / "smoke.json").read_text())
    assert written["summary"] == json.loads(json.dumps(payload["summary"]))
    rows = {(r["algo"], r["dataset"]): r for r in written["summary"]}
    assert set(rows) == {(a, q) for a in bench.ALGOS for q in QUALITIES}
    for (_, quality), row in rows.items():
        assert row["seeds"] == [0] and row["dataset_normalized"] == DATASET_SCORES[quality]
        assert np.isfinite(row["mean"]) and row["std"] == 0.0
    for run in written["runs"]:
        # evaluations after 2 and 4 gradient steps; the score averages both
        assert [step for step, _ in run["curve"]] == [2, 4]
        assert run["last_returns"] == [ret for _, ret in run["curve"]]
        expected = np.mean([100 * (r + 1200.0) / 1000.0 for r in run["last_returns"]])
        assert run["normalized"] == pytest.approx(expected)
    configs = {r["algo"]: r.get("config") for r in written["runs"]}
    assert configs["ours_crr"] == ["crr.gin"] and configs["ours_bc"] == ["bc.gin"]
    assert configs["ours_awac_per"] == ["awac.gin", "super_sac.afbc_per = True"]
    fixed = rows[("d3rlpy_awac", "medium")]
    assert fixed["critic_temperature"][0] == pytest.approx(np.exp(-30.0), rel=1e-5)
    assert fixed["critic_entropy_term"][0] < 1e-10
    stock = rows[("d3rlpy_awac_stock", "medium")]
    assert stock["critic_temperature"] == [1.0] and stock["critic_entropy_term"][0] > 0.01
    table = (tmp_path / "smoke.md").read_text()
    assert "| d3rlpy_awac | medium-replay | 7.5 |" in table
    assert "mean of the last 2 evaluations" in table


@needs_d3rlpy
def test_the_neutralised_awac_target_has_no_entropy_term(bench, data):
    import d3rlpy
    from d3rlpy.models.torch import build_squashed_gaussian_distribution
    from d3rlpy.torch_utility import TorchMiniBatch

    env = make_gym_env(ENV)
    transitions, _ = ds.load_transitions(dataset_id(ENV, "medium"), env, data / "minari")
    dataset = bench.to_mdp_dataset(transitions)
    batch = TorchMiniBatch.from_batch(
        dataset.sample_transition_batch(64), gamma=0.99, compute_returns_to_go=False, device="cpu:0"
    )
    gaps = {}
    for neutral in (False, True):
        d3rlpy.seed(0)
        model = bench.d3rlpy_config("d3rlpy_awac", 10, 32).create(device="cpu:0")
        model.build_with_dataset(dataset)
        if neutral:
            bench.neutralise_critic_temperature(model)
        impl = model.impl
        torch.manual_seed(1)
        target = impl.compute_target(batch)
        torch.manual_seed(1)  # the same a' ~ pi(.|s') as compute_target draws
        dist = build_squashed_gaussian_distribution(impl.modules.policy(batch.next_observations))
        action, log_prob = dist.sample_with_log_prob()
        min_q = impl._targ_q_func_forwarder.compute_target(
            batch.next_observations, action, reduction="min"
        )
        gaps[neutral] = (target - min_q).detach(), log_prob.detach()
    stock_gap, stock_log_prob = gaps[False]
    torch.testing.assert_close(stock_gap, -stock_log_prob)  # temperature exp(0) = 1
    assert float(gaps[True][0].abs().max()) < 1e-10  # exp(-30) log pi


@needs_d3rlpy
def test_resume_skips_finished_runs_and_refuses_other_settings(bench, data, tmp_path, monkeypatch):
    argv = _argv(data, tmp_path, "--algos", "ours_bc,d3rlpy_bc", "--datasets", "medium")
    first = bench.main(argv)
    assert len(first["runs"]) == 2
    calls = []
    monkeypatch.setattr(bench, "run_ours", lambda *a: calls.append(a) or {"curve": [(4, -900.0)]})
    monkeypatch.setattr(bench, "run_d3rlpy", lambda *a: calls.append(a) or {"curve": [(4, -1e3)]})
    again = bench.main(argv + ["--resume"])
    assert calls == [] and again["runs"] == json.loads(json.dumps(first["runs"]))
    more = bench.main(argv + ["--resume", "--seeds", "0,1"])
    assert [c[1:] for c in calls] == [("ours_bc", "medium", 1), ("d3rlpy_bc", "medium", 1)]
    assert more["summary"][0]["seeds"] == [0, 1]
    assert "seeds 0, 1." in (tmp_path / "smoke.md").read_text()
    with pytest.raises(SystemExit, match="steps: saved 4, now 6"):
        bench.main(argv + ["--resume", "--steps", "6"])


def test_bad_options_are_refused_with_the_fix(bench, data, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(_argv(data, tmp_path, "--algos", "ours_sac"))
    assert "unknown --algos ['ours_sac']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(_argv(data, tmp_path, "--last_evals", "3"))
    assert "gives 2 evaluations, fewer than --last_evals 3" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"--datasets \['expert'\] are not in"):
        bench.main(_argv(data, tmp_path, "--datasets", "expert"))
