"""Offline benchmark: our behavioral cloning and advantage-filtered BC (AWAC- and CRR-style, with
and without ``afbc_per``) against d3rlpy's BC, IQL, TD3+BC and AWAC on the same locally built
D4RL-style datasets (experiments/offline/build_datasets.py).

Algorithms (``--algos``):

* ``ours_bc``: experiments/offline/bc.gin (tanh-Gaussian maximum likelihood, lr 1e-3).
* ``ours_awac``: experiments/offline/awac.gin, AFBC with the exp filter
  ``min(exp(A / 1), 20)`` and the "mean" advantage over 4 policy samples (Nair et al. 2020,
  arXiv:2006.09359).
* ``ours_crr``: experiments/offline/crr.gin, AFBC with CRR's binary filter ``1[A >= 0]`` and the
  "max" advantage (Wang et al. 2020, arXiv:2006.15134).
* ``ours_awac_per``, ``ours_crr_per``: the same with ``super_sac.afbc_per = True`` (the actor's
  batches drawn by advantage priority; Grigsby & Qi 2021, arXiv:2110.04698).
* ``d3rlpy_bc``: ``BCConfig`` (d3rlpy has no BC reproduction script): lr 1e-3, batch 256.
* ``d3rlpy_iql``: d3rlpy's reproductions/offline/iql.py: lr 3e-4, batch 256, expectile 0.7,
  weight temperature 3, max weight 100, rewards scaled by 1000 / (max - min episode return)
  (``ReturnBasedRewardScaler``), the actor's lr cosine-annealed over the run (``T_max`` is
  ``--steps`` here, the run length, as the script's 500,000 is its own).
* ``d3rlpy_td3bc``: reproductions/offline/td3_plus_bc.py: lr 3e-4, batch 256, alpha 2.5, target
  smoothing sigma 0.2 clipped at 0.5, actor every 2 updates, observations standardised with the
  dataset's mean and std (``StandardObservationScaler``).
* ``d3rlpy_awac``: reproductions/offline/awac.py (4 x 256 hidden layers, weight decay 1e-4,
  batch 1024, lambda 1) with the critic's temperature neutralised. d3rlpy 2.8.1's AWAC reuses
  the SAC critic loss with a dummy ``log_temp`` parameter of 0, so its TD target is
  ``r + gamma (min Q'(s', a') - 1.0 * log pi(a'|s'))``: a soft critic at temperature 1, which
  AWAC does not have (d3rlpy 1.x passed a temperature of 1e-20). After ``build_with_dataset``
  the parameter (``impl.modules.log_temp``, in no optimizer) is filled with -30, so the entropy
  term is ``exp(-30) log pi ~ 1e-13 log pi``; each run records the temperature and the mean
  ``|exp(log_temp) log pi(a'|s')|`` on dataset states at its end.
* ``d3rlpy_awac_stock``: the same without the fix, shown once to explain the gap: on
  HalfCheetah ``log pi`` is about 10 nats a step against a mean reward of about 1.4, so the
  critic learns ``Q ~ -150`` where the data's discounted return is about +170, and the
  advantage weights rank transitions by entropy instead of return. Not in the default list.

Every algorithm is trained on each dataset of ``--datasets`` (default ``medium,medium-replay``)
for ``--steps`` gradient steps and evaluated every ``--eval_interval`` steps with
``--eval_episodes`` episodes of its deterministic policy; its score is the mean of its last
``--last_evals`` evaluations, as a D4RL normalized score ``100 (return - random) / (expert -
random)`` with the build's reference returns, and every row shows the dataset's own normalized
score. d3rlpy gets our dataset as an ``MDPDataset`` (same observations, actions in [-1, 1],
terminations and truncations as terminals and timeouts).

    python experiments/benchmarks/offline_d3rlpy.py --env HalfCheetah-v5 --steps 100000 \\
        --seeds 0,1,2,3,4 --resume
    python experiments/benchmarks/offline_d3rlpy.py --env HalfCheetah-v5 --steps 100000 \\
        --seeds 0 --algos d3rlpy_awac_stock --resume        # the stock AWAC row, once
    python experiments/benchmarks/offline_d3rlpy.py --env Pendulum-v1 --steps 500 \\
        --eval_interval 250 --last_evals 2 --seeds 0 --eval_episodes 2 \\
        --name offline_smoke                              # quick check

``--online_steps N`` fine-tunes our AFBC runs online afterwards (reported beside the offline
score). Runs are sequential with ``--threads`` torch threads; the result files
(``results/<name>.{md,json}``) are rewritten after every run, and ``--resume`` skips the
(algorithm, dataset, seed) runs the json holds already (its settings and datasets must match).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import bench_utils
import numpy as np
import torch

from super_sac import cli
from super_sac.cli import dataset_id, normalized_score
from super_sac.datasets import load_transitions
from super_sac.wrappers import make_gym_env

# our algorithms: name -> (gin file in experiments/offline, extra bindings)
OURS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ours_bc": ("bc.gin", ()),
    "ours_awac": ("awac.gin", ()),
    "ours_awac_per": ("awac.gin", ("super_sac.afbc_per = True",)),
    "ours_crr": ("crr.gin", ()),
    "ours_crr_per": ("crr.gin", ("super_sac.afbc_per = True",)),
}
D3RLPY = ("d3rlpy_bc", "d3rlpy_iql", "d3rlpy_td3bc", "d3rlpy_awac", "d3rlpy_awac_stock")
ALGOS = (*OURS, *D3RLPY)
DEFAULT_ALGOS = tuple(a for a in ALGOS if a != "d3rlpy_awac_stock")
BATCH = 256
NEUTRAL_LOG_TEMP = -30.0
# settings a resumed benchmark must share with the runs in its json
RESUME_KEYS = (
    "env",
    "steps",
    "eval_interval",
    "eval_episodes",
    "last_evals",
    "online_steps",
    "d3rlpy_batch",
    "gin_bindings",
)


# ------------------------------------------------------------------------------ options
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument(
        "--data",
        default=str(bench_utils.REPO_ROOT / "offline_data"),
        help="folder made by build_datasets.py",
    )
    p.add_argument(
        "--datasets",
        default="medium,medium-replay",
        help="comma-separated qualities of the build (random, medium, medium-replay, expert)",
    )
    p.add_argument("--steps", type=int, default=100_000, help="gradient steps per run")
    p.add_argument(
        "--online_steps",
        type=int,
        default=0,
        help="env steps of online fine-tuning after our AFBC runs (0: none)",
    )
    p.add_argument("--eval_interval", type=int, default=5_000)
    p.add_argument("--eval_episodes", type=int, default=5)
    p.add_argument(
        "--last_evals",
        type=int,
        default=3,
        help="a run's score is the mean of its last this many evaluations",
    )
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--algos", default=",".join(DEFAULT_ALGOS), help=f"from {', '.join(ALGOS)}")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu | cuda (both libraries)")
    p.add_argument(
        "--d3rlpy_batch",
        type=int,
        default=None,
        help="one batch size for every d3rlpy algorithm (default: each one's reproduction "
        "setting: 256, AWAC 1024)",
    )
    p.add_argument(
        "--gin_bindings",
        action="append",
        default=[],
        help="extra gin bindings for our runs (repeatable)",
    )
    p.add_argument("--name", default="offline_d3rlpy", help="basename of the result files")
    p.add_argument("--results_dir", default=None, help="default: experiments/benchmarks/results")
    p.add_argument(
        "--resume", action="store_true", help="skip the runs the result json holds already"
    )
    args = p.parse_args(argv)
    unknown = [a for a in args.algos.split(",") if a not in ALGOS]
    if unknown:
        p.error(f"unknown --algos {unknown}; choose from {', '.join(ALGOS)}")
    if args.steps // args.eval_interval < args.last_evals:
        p.error(
            f"--steps {args.steps} with --eval_interval {args.eval_interval} gives "
            f"{args.steps // args.eval_interval} evaluations, fewer than --last_evals "
            f"{args.last_evals}; lower the interval or --last_evals"
        )
    return args


# ------------------------------------------------------------------------------ ours
def run_ours(args: argparse.Namespace, algo: str, quality: str, seed: int) -> dict[str, Any]:
    """One of :data:`OURS` through the command line of experiments/offline/train_offline.py.

    :return: ``curve``: ``[(gradient step, evaluation return)]`` of the BC/offline phase,
        ``config``: the gin file and the algorithm's own bindings, and ``online_curve``
        (env step, return) when ``--online_steps`` fine-tunes an AFBC run.
    """
    import gin

    gin.clear_config()
    config, extra = OURS[algo]
    argv = [
        "--env", args.env, "--seed", str(seed), "--threads", str(args.threads),
        "--logging", "none", "--device", args.device, "--config", config,
        "--dataset", dataset_id(args.env, quality),
        "--datasets_path", str(Path(args.data) / "minari"),
    ]  # fmt: skip
    if config == "bc.gin":
        argv += ["--bc_steps", str(args.steps), "--steps", "0"]
    else:
        argv += ["--offline_steps", str(args.steps), "--steps", str(args.online_steps)]
    bindings = [
        *bench_utils.QUIET_BINDINGS,
        f"super_sac.batch_size = {BATCH}",
        f"super_sac.eval_interval = {args.eval_interval}",
        f"super_sac.eval_episodes = {args.eval_episodes}",
        *extra,
        *args.gin_bindings,
    ]
    for binding in bindings:
        argv += ["--gin_bindings", binding]
    experiments = bench_utils.REPO_ROOT / "experiments"
    summary = cli.train_offline(argv, search_dirs=[experiments / "offline", experiments / "gym"])
    gin.clear_config()
    history = summary["eval_history"]
    out: dict[str, Any] = {
        "curve": [(e["phase_step"], e["return_mean"]) for e in history if e["phase"] != "online"],
        "config": [config, *extra],
    }
    online = [(e["phase_step"], e["return_mean"]) for e in history if e["phase"] == "online"]
    if online:
        out["online_curve"] = online
    return out


# ------------------------------------------------------------------------------ d3rlpy
def to_mdp_dataset(data: Any) -> Any:
    """Our transitions as a d3rlpy MDPDataset (episodes are consecutive in our datasets)."""
    import d3rlpy

    (key,) = data.obs
    return d3rlpy.dataset.MDPDataset(
        observations=data.obs[key].astype(np.float32),
        actions=data.action.astype(np.float32),
        rewards=data.reward.astype(np.float32),
        terminals=data.terminated.astype(np.float32),
        timeouts=data.truncated.astype(np.float32),
    )


class VectorisedTransitionSampler:
    """d3rlpy's uniform transition sampling, drawn as one index vector.

    d3rlpy 2.8.1's ``ReplayBuffer.sample_transition_batch`` draws ``np.random.randint(n)`` once
    per transition and builds each with its transition picker in Python: about 12 ms per batch
    of 1024 on one CPU core, several times a GPU update. This sampler runs the dataset's own
    picker once per transition up front, stacks the results, and then draws
    ``np.random.randint(n, size=batch)``, which consumes numpy's global generator exactly as
    ``batch`` scalar draws do. So the batches are identical, element for element, to d3rlpy's
    (tests/test_d3rlpy_peers.py checks this), only faster. Returns-to-go are not kept, so it
    refuses algorithms that need them (d3rlpy's Cal-QL).

    :param dataset: a d3rlpy ``ReplayBuffer`` (an ``MDPDataset``).
    """

    def __init__(self, dataset: Any) -> None:
        picker, buffer = dataset.transition_picker, dataset.buffer
        transitions = [picker(*buffer[i]) for i in range(dataset.transition_count)]
        self.fields = {
            name: np.stack([getattr(t, name) for t in transitions]).astype(np.float32)
            for name in ("observation", "action", "reward", "next_observation", "next_action")
        }
        self.terminals = np.array([[t.terminal] for t in transitions], dtype=np.float32)
        self.intervals = np.array([[t.interval] for t in transitions], dtype=np.float32)

    def __len__(self) -> int:
        return len(self.terminals)

    def sample_transition_batch(self, batch_size: int) -> Any:
        """A ``TransitionMiniBatch`` of ``batch_size`` transitions drawn uniformly."""
        from d3rlpy.dataset import TransitionMiniBatch

        rows = np.random.randint(len(self), size=batch_size)
        f = {name: array[rows] for name, array in self.fields.items()}
        return TransitionMiniBatch(
            observations=f["observation"],
            actions=f["action"],
            rewards=f["reward"],
            next_observations=f["next_observation"],
            next_actions=f["next_action"],
            terminals=self.terminals[rows],
            intervals=self.intervals[rows],
            transitions=(),
        )


def with_vectorised_sampling(dataset: Any) -> Any:
    """``dataset`` (a d3rlpy ``MDPDataset``) with its ``sample_transition_batch`` replaced by
    :class:`VectorisedTransitionSampler`'s, which ``fit`` then uses; returns ``dataset``."""
    dataset.sample_transition_batch = VectorisedTransitionSampler(dataset).sample_transition_batch
    return dataset


def d3rlpy_config(algo: str, steps: int, batch: int | None, standardize: bool = False) -> Any:
    """The d3rlpy config of ``algo`` with its reproduction settings (see the module docstring).

    :param algo: one of :data:`D3RLPY`.
    :param steps: the run's gradient steps (IQL's cosine schedule spans them).
    :param batch: a batch size for every algorithm instead of its own (None: its own).
    :param standardize: standardise observations with the dataset's mean and std
        (``StandardObservationScaler``) whatever the reproduction does: a probe of how much an
        algorithm's result hangs on input scale (TD3+BC's reproduction already does it).
    """
    import dataclasses

    import d3rlpy

    config = _reproduction_config(algo, steps, batch)
    if standardize:
        scaler = d3rlpy.preprocessing.StandardObservationScaler()
        config = dataclasses.replace(config, observation_scaler=scaler)
    return config


def _reproduction_config(algo: str, steps: int, batch: int | None) -> Any:
    import d3rlpy

    def size(own: int) -> int:
        return own if batch is None else batch

    if algo == "d3rlpy_bc":
        return d3rlpy.algos.BCConfig(batch_size=size(BATCH), learning_rate=1e-3)
    if algo == "d3rlpy_iql":
        return d3rlpy.algos.IQLConfig(
            actor_learning_rate=3e-4,
            critic_learning_rate=3e-4,
            actor_optim_factory=d3rlpy.optimizers.AdamFactory(
                lr_scheduler_factory=d3rlpy.optimizers.CosineAnnealingLRFactory(T_max=steps)
            ),
            batch_size=size(256),
            weight_temp=3.0,
            max_weight=100.0,
            expectile=0.7,
            reward_scaler=d3rlpy.preprocessing.ReturnBasedRewardScaler(multiplier=1000.0),
        )
    if algo == "d3rlpy_td3bc":
        return d3rlpy.algos.TD3PlusBCConfig(
            actor_learning_rate=3e-4,
            critic_learning_rate=3e-4,
            batch_size=size(256),
            target_smoothing_sigma=0.2,
            target_smoothing_clip=0.5,
            alpha=2.5,
            update_actor_interval=2,
            observation_scaler=d3rlpy.preprocessing.StandardObservationScaler(),
        )
    if algo in ("d3rlpy_awac", "d3rlpy_awac_stock"):
        encoder = d3rlpy.models.encoders.VectorEncoderFactory([256, 256, 256, 256])
        return d3rlpy.algos.AWACConfig(
            actor_learning_rate=3e-4,
            actor_encoder_factory=encoder,
            actor_optim_factory=d3rlpy.optimizers.AdamFactory(weight_decay=1e-4),
            critic_learning_rate=3e-4,
            critic_encoder_factory=encoder,
            batch_size=size(1024),
            lam=1.0,
        )
    raise ValueError(f"unknown d3rlpy algorithm {algo!r}; choose from {D3RLPY}")


def neutralise_critic_temperature(model: Any, log_temp: float = NEUTRAL_LOG_TEMP) -> None:
    """Fill the dummy ``log_temp`` of d3rlpy's AWAC (built, not yet trained) with ``log_temp``,
    so the SAC critic target it reuses subtracts ``exp(log_temp) log pi(a'|s') ~ 0``.

    :param model: a d3rlpy AWAC after ``build_with_dataset``.
    :param log_temp: the value; -30 gives a temperature of ``9.4e-14``.
    """
    from d3rlpy.models.torch import get_parameter

    if model.impl is None:
        raise ValueError("build the model first (model.build_with_dataset(dataset))")
    with torch.no_grad():
        get_parameter(model.impl.modules.log_temp).fill_(log_temp)


def critic_entropy_term(model: Any, observations: np.ndarray) -> dict[str, float]:
    """The entropy term of d3rlpy's SAC critic target (``sac_impl.SACImpl.compute_target``),
    ``exp(log_temp) log pi(a'|s')`` with ``a'`` sampled from the squashed policy, on
    ``observations``.

    :return: ``{"temperature": exp(log_temp), "entropy_term": mean |exp(log_temp) log pi|,
        "log_prob": mean log pi}``.
    """
    from d3rlpy.models.torch import build_squashed_gaussian_distribution, get_parameter

    modules = model.impl.modules
    with torch.no_grad():
        obs = torch.as_tensor(observations, dtype=torch.float32, device=model.impl.device)
        _, log_prob = build_squashed_gaussian_distribution(
            modules.policy(obs)
        ).sample_with_log_prob()
        temperature = get_parameter(modules.log_temp).exp()
        return {
            "temperature": float(temperature.reshape(())),
            "entropy_term": float((temperature * log_prob).abs().mean()),
            "log_prob": float(log_prob.mean()),
        }


def fit_steps(model: Any, dataset: Any, n_steps: int) -> None:
    """``n_steps`` gradient steps of d3rlpy's ``fit`` as one epoch, without a progress bar,
    log files or saved models."""
    import d3rlpy

    sampler = getattr(dataset.sample_transition_batch, "__self__", None)
    if isinstance(sampler, VectorisedTransitionSampler) and model.need_returns_to_go:
        raise ValueError(
            f"{type(model).__name__} needs returns-to-go, which the vectorised sampler does not "
            "keep. Fix: pass the dataset without with_vectorised_sampling"
        )
    model.fit(
        dataset,
        n_steps=n_steps,
        n_steps_per_epoch=n_steps,
        show_progress=False,
        with_timestamp=False,
        save_interval=10**9,
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
    )


def critic_entropy_on_dataset(model: Any, data: Any, seed: int, n: int = 1024) -> dict[str, float]:
    """:func:`critic_entropy_term` on ``n`` next-states of the dataset ``data`` (drawn with
    ``seed``), the figure each AWAC run records at its end."""
    (key,) = data.next_obs
    rows = np.random.default_rng(seed).choice(len(data), min(n, len(data)), replace=False)
    return critic_entropy_term(model, data.next_obs[key][rows])


def evaluate_policy(predict: Any, env_id: str, episodes: int, seed: int) -> float:
    """Mean return of ``predict`` (observation batch -> actions in [-1, 1]) over ``episodes``."""
    env = make_gym_env(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=10_000 * seed + i)
        total, done = 0.0, False
        while not done:
            action = predict(obs["obs"][None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def run_d3rlpy(args: argparse.Namespace, algo: str, quality: str, seed: int) -> dict[str, Any]:
    """One of :data:`D3RLPY` on our dataset: ``--steps`` gradient steps, an evaluation every
    ``--eval_interval``.

    :return: ``curve``: ``[(gradient step, evaluation return)]``; for AWAC also ``critic``:
        :func:`critic_entropy_term` on 1024 dataset next-states at the end.
    """
    import d3rlpy

    d3rlpy.seed(seed)
    env = make_gym_env(args.env)
    data, _ = load_transitions(dataset_id(args.env, quality), env, Path(args.data) / "minari")
    env.close()
    if algo == "d3rlpy_iql" and np.ptp(data.episode_returns) == 0:
        raise ValueError(
            f"{dataset_id(args.env, quality)}: every episode has the same return "
            f"({len(data.episode_returns)} episodes), so IQL's reward scale 1000 / (max - min "
            "return) is infinite. Fix: build the dataset with more episodes"
        )
    dataset = with_vectorised_sampling(to_mdp_dataset(data))
    device = "cuda:0" if args.device.startswith("cuda") else "cpu:0"
    model = d3rlpy_config(algo, args.steps, args.d3rlpy_batch).create(device=device)
    if algo == "d3rlpy_awac":
        model.build_with_dataset(dataset)
        neutralise_critic_temperature(model)
    curve = []
    done = 0
    while done < args.steps:
        chunk = min(args.eval_interval, args.steps - done)
        fit_steps(model, dataset, chunk)
        done += chunk
        curve.append((done, evaluate_policy(model.predict, args.env, args.eval_episodes, seed)))
    out: dict[str, Any] = {"curve": curve}
    if algo.startswith("d3rlpy_awac"):
        out["critic"] = critic_entropy_on_dataset(model, data, seed)
    return out


# ------------------------------------------------------------------------------ scores
def score_run(run: dict[str, Any], refs: dict[str, Any], last_evals: int) -> dict[str, Any]:
    """Add the run's score: the mean return and normalized score of its last ``last_evals``
    evaluations (and the first and last online ones when it fine-tuned)."""

    def norm(ret: float) -> float:
        return normalized_score(ret, refs["random_return"], refs["expert_return"])

    last = [ret for _, ret in run["curve"][-last_evals:]]
    run["last_returns"] = last
    run["return_mean_last"] = float(np.mean(last))
    run["normalized"] = float(np.mean([norm(r) for r in last]))
    if "online_curve" in run:
        run["online_first_normalized"] = norm(run["online_curve"][0][1])
        run["online_final_normalized"] = norm(run["online_curve"][-1][1])
    return run


def summarise(runs: list[dict[str, Any]], refs: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (algorithm, dataset): the seeds' scores, their mean and population std, and
    the dataset's own normalized score."""
    rows = []
    for algo, quality in dict.fromkeys((r["algo"], r["dataset"]) for r in runs):
        mine = [r for r in runs if r["algo"] == algo and r["dataset"] == quality]
        scores = [r["normalized"] for r in mine]
        row = {
            "algo": algo,
            "dataset": quality,
            "dataset_normalized": refs["datasets"][quality]["normalized_score"],
            "seeds": [r["seed"] for r in mine],
            "normalized": scores,
            "mean": float(np.mean(scores)),
            "std": float(np.std(scores)),
            "wall_s": [r["wall_s"] for r in mine],
        }
        if all("online_final_normalized" in r for r in mine):
            row["online_first_normalized"] = [r["online_first_normalized"] for r in mine]
            row["online_final_normalized"] = [r["online_final_normalized"] for r in mine]
        if all("critic" in r for r in mine):
            row["critic_temperature"] = [r["critic"]["temperature"] for r in mine]
            row["critic_entropy_term"] = [r["critic"]["entropy_term"] for r in mine]
        rows.append(row)
    return rows


def markdown(args: argparse.Namespace, rows: list[dict[str, Any]], refs: dict[str, Any]) -> str:
    """The result table with the settings that produced it."""
    online = any("online_final_normalized" in r for r in rows)
    body = []
    for r in rows:
        cells = [
            r["algo"],
            r["dataset"],
            f"{r['dataset_normalized']:.1f}",
            f"{r['mean']:.1f} +- {r['std']:.1f}",
            ", ".join(f"{s:.1f}" for s in r["normalized"]),
        ]
        if online:
            cells.append(
                f"first {np.mean(r['online_first_normalized']):.1f}, final "
                f"{np.mean(r['online_final_normalized']):.1f}"
                if "online_final_normalized" in r
                else ""
            )
        body.append(cells)
    headers = [
        "algorithm",
        "dataset",
        "dataset score",
        f"normalized score (mean +- std over seeds; each the mean of the last {args.last_evals} "
        "evaluations)",
        "per seed",
    ] + (["online fine-tuning (normalized)"] if online else [])
    d3rlpy_batch = "each algorithm's own" if args.d3rlpy_batch is None else args.d3rlpy_batch
    seeds = sorted({s for r in rows for s in r["seeds"]})  # of every run (--resume adds some)
    lines = [
        f"# Offline RL on locally built {args.env} datasets: super_sac vs d3rlpy",
        "",
        f"{args.steps} gradient steps per run (ours: batch {BATCH}; d3rlpy: {d3rlpy_batch}), an "
        f"evaluation of {args.eval_episodes} episodes every {args.eval_interval} steps, "
        f"seeds {', '.join(str(s) for s in seeds)}. D4RL normalized scores with random return "
        f"{refs['random_return']:.1f} and expert return {refs['expert_return']:.1f}; "
        "'dataset score' is the dataset's own mean episode return, normalized. d3rlpy_awac "
        f"has its critic temperature set to exp({NEUTRAL_LOG_TEMP:g}) (see the script's "
        "docstring); d3rlpy_awac_stock is d3rlpy 2.8.1's AWAC as shipped (temperature 1).",
    ]
    if online:
        lines[-1] += f" Our AFBC runs then fine-tune online for {args.online_steps} env steps."
    lines += ["", bench_utils.markdown_table(headers, body)]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ resume
def previous_runs(
    args: argparse.Namespace, path: Path, refs: dict[str, Any]
) -> list[dict[str, Any]]:
    """The runs of the result json at ``path`` when ``--resume`` is given (none without it).

    :raises SystemExit: when the json was written with other settings or other datasets.
    """
    if not args.resume or not path.exists():
        return []
    payload = json.loads(path.read_text())
    saved = payload["settings"]
    diffs = [
        f"{k}: saved {saved.get(k)!r}, now {getattr(args, k)!r}"
        for k in RESUME_KEYS
        if saved.get(k) != getattr(args, k)
    ]
    if payload.get("reference_returns") != refs:
        diffs.append("the datasets (reference_returns.json: returns or checksums) differ")
    if diffs:
        raise SystemExit(
            f"error: --resume: {path} was written with other settings:\n  "
            + "\n  ".join(diffs)
            + "\nFix: run with the same settings, or choose another --name"
        )
    return payload["runs"]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    refs = json.loads((Path(args.data) / "reference_returns.json").read_text())[args.env]
    qualities = args.datasets.split(",")
    missing = [q for q in qualities if q not in refs["datasets"]]
    if missing:
        raise SystemExit(
            f"error: --datasets {missing} are not in {args.data}/reference_returns.json (it has "
            f"{sorted(refs['datasets'])}); build them with experiments/offline/build_datasets.py"
        )
    results_dir = Path(args.results_dir) if args.results_dir else bench_utils.RESULTS_DIR
    runs = previous_runs(args, results_dir / f"{args.name}.json", refs)
    done = {(r["algo"], r["dataset"], r["seed"]) for r in runs}
    payload: dict[str, Any] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for quality in qualities:
            for algo in args.algos.split(","):
                if (algo, quality, seed) in done:
                    continue
                start = time.perf_counter()
                result = (run_ours if algo in OURS else run_d3rlpy)(args, algo, quality, seed)
                result.update(
                    algo=algo, dataset=quality, seed=seed, wall_s=time.perf_counter() - start
                )
                runs.append(score_run(result, refs, args.last_evals))
                shown = {k: v for k, v in result.items() if "curve" not in k}
                print(json.dumps(shown), flush=True)
                payload = write(args, runs, refs, results_dir)
    if not payload:  # nothing left to run: rewrite the tables from the json
        payload = write(args, runs, refs, results_dir)
    print(markdown(args, payload["summary"], refs))
    return payload


def write(
    args: argparse.Namespace, runs: list[dict[str, Any]], refs: dict[str, Any], folder: Path
) -> dict[str, Any]:
    """Rewrite ``<folder>/<name>.{md,json}`` from ``runs``; :return: the json payload."""
    rows = summarise(runs, refs)
    payload = {
        "settings": vars(args),
        "reference_returns": refs,
        "summary": rows,
        "runs": runs,
        "versions": {**bench_utils.versions(), "d3rlpy": _d3rlpy_version()},
    }
    bench_utils.write_results(args.name, markdown(args, rows, refs), payload, folder)
    return payload


def _d3rlpy_version() -> str | None:
    """d3rlpy's version, or None where it is not installed (runs of ours only)."""
    try:
        import d3rlpy
    except ImportError:
        return None
    return d3rlpy.__version__


if __name__ == "__main__":
    main()
