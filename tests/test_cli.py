"""The scripts' command line (super_sac.cli): the scripts import it without touching sys.path,
and unknown envs, malformed gin bindings and other mistakes end in one line with status 2."""

import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from super_sac import cli
from super_sac.config import GinConfigError
from super_sac.loggers import MissingExtraError
from super_sac.utils import machine_info
from super_sac.validation import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [
    "experiments/gym/train_gym.py",
    "experiments/offline/train_offline.py",
    "experiments/offline/record_replay.py",
    "experiments/offline/build_datasets.py",
    "experiments/minatar/train_minatar.py",
    "experiments/minatar/record_replay.py",
    "experiments/atari/train_atari.py",
]


def test_no_script_or_test_patches_sys_path():
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("experiments", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "sys.path.insert" in path.read_text() and path.name != "test_cli.py"
    ]
    assert offenders == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_load_and_show_their_help(script, capsys):
    namespace = runpy.run_path(str(ROOT / script), run_name="script_under_test")
    with pytest.raises(SystemExit) as exit_info:
        namespace["main"](["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and script.split("/")[-1] in out  # the docstring's examples


def test_benchmark_script_imports_the_package_and_runs():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments/benchmarks/offline_d3rlpy.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--online_steps" in proc.stdout


def test_unknown_env_id_is_one_line_with_close_matches_and_the_fix():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments/gym/train_gym.py"), "--env", "Pendulm-v1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: unknown gymnasium env id 'Pendulm-v1'")
    assert "Did you mean Pendulum-v1" in lines[0] and "pip install 'gymnasium[mujoco]'" in lines[0]


@pytest.mark.parametrize("env_id", ["Pendulum-v9", "pendulum-v1", "Pendulm-v1"])
def test_make_env_suggests_the_registered_id(env_id):
    with pytest.raises(cli.UnknownEnvError, match=r"Did you mean Pendulum-v1\b"):
        cli.make_env(env_id)


def test_unknown_env_without_a_close_id_still_names_the_fix():
    message = cli.unknown_env_message("Zzyzx-v0")  # far from every id, ALE ones too
    assert "Did you mean" not in message
    assert "'Zzyzx-v0'" in message and "gymnasium[box2d]" in message


@pytest.mark.filterwarnings("ignore:.*out of date")
def test_deprecated_env_version_names_the_current_one():
    with pytest.raises(cli.UnknownEnvError, match="Pendulum-v1"):
        cli.make_env("Pendulum-v0")


def test_unknown_atari_game_suggests_ale_games():
    pytest.importorskip("ale_py")
    with pytest.raises(cli.UnknownEnvError, match="unknown Atari game 'Breakot'.*Breakout"):
        cli.make_atari("Breakot")


def test_unknown_minatar_game_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.minatar_parser().parse_args(["--game", "breakot"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'breakot'" in capsys.readouterr().err


def test_game_scripts_take_env_as_an_alias_so_sweeps_can_drive_them():
    # the sweep runner passes --env <name> to every script
    assert cli.minatar_parser().parse_args(["--env", "freeway"]).game == "freeway"
    assert cli.atari_parser().parse_args(["--env", "Pong"]).game == "Pong"
    assert cli.minatar_parser().parse_args([]).game == "breakout"


@pytest.mark.parametrize(
    "bad",
    [
        "super_sac.batch_size = [1",  # gin reports the next binding's line; we name this one
        "super_sac.batch_size =",
        "batch_size 5",
    ],
)
def test_malformed_binding_is_named(bad):
    bindings = ["super_sac.gamma = 0.9", bad, "super_sac.num_steps_online = 10"]
    with pytest.raises(GinConfigError, match=re.escape(f"cannot parse gin binding {bad!r}")):
        cli.parse_gin_args([], bindings, [])


def test_malformed_config_line_names_file_and_line(tmp_path):
    config = tmp_path / "bad.gin"
    config.write_text("super_sac.gamma = 0.9\nsuper_sac.batch_size =\n")
    with pytest.raises(GinConfigError, match=r"bad.gin, line 2 \('super_sac.batch_size ='\)"):
        cli.parse_gin_args([config], [], [])


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("super_sac.batch_size: too small. Fix: raise it"),
        GinConfigError("no configurable"),
        cli.UnknownEnvError("unknown env"),
        FileNotFoundError("gin config x.gin not found"),
        MissingExtraError("logging to wandb needs the wandb package: pip install ..."),
    ],
)
def test_cli_prints_user_errors_as_one_line_with_status_2(error, capsys):
    def main():
        raise error

    with pytest.raises(SystemExit) as exit_info:
        cli.cli(main)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"error: {error}\n"


def test_a_gpu_device_on_a_machine_without_one_is_a_one_line_error(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = ["--config", "sac.gin", "--steps", "5", "--device", "cuda", "--dry_run"]
    with pytest.raises(SystemExit) as stop:
        cli.cli(lambda: cli.train_gym(argv, search_dirs=[ROOT / "experiments" / "gym"]))
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --device cuda: device 'cuda' was asked for but torch sees no")
    assert "Fix: use the device 'cpu'" in err


def test_cli_lets_programming_errors_through():
    def main():
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        cli.cli(main)


def test_resume_needs_a_run_directory(tmp_path):
    args = cli.build_parser().parse_args(["--resume", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="no hparams.json"):
        cli.resumed_args(args)


def test_resume_keeps_the_runs_options_and_refuses_changed_ones(tmp_path):
    """--resume continues the run it names: its task, seed, config (hence its name) and logging
    are kept; this command line may repeat them but not change them."""
    gym_dir = ROOT / "experiments" / "gym"
    small = ["Agent.hidden_size = 16", "super_sac.batch_size = 8", "ReplayBuffer.size = 500",
             "super_sac.random_warmup_steps = 10", "super_sac.checkpoint_interval = 20",
             "super_sac.eval_interval = 1000", "super_sac.verbosity = 0"]  # fmt: skip
    bindings = [x for b in small for x in ("--gin_bindings", b)]
    run = tmp_path / "run"
    env = ["--env", "MountainCarContinuous-v0"]
    first = ["--config", "td3.gin", *env, "--seed", "1", "--logging", "none"]
    cli.train_gym(
        [*first, "--steps", "20", "--run_dir", str(run), *bindings], search_dirs=[gym_dir]
    )
    # a changed option is refused even when it is the parser's default (Pendulum-v1)
    changed = ["--env", "Pendulum-v1", "--seed", "7", "--run_dir", "/elsewhere"]
    with pytest.raises(
        ConfigError,
        match="--env 'Pendulum-v1' here, 'MountainCarContinuous-v0' in the run; --seed 7 here, 1 "
        "in the run; --run_dir '/elsewhere' here, but --resume continues .* Fix: leave these",
    ):
        cli.train_gym(["--resume", str(run), *changed], search_dirs=[gym_dir])
    # the run's own command line again (its config spelled as a path), more steps: accepted
    again = [*first, "--config", str(gym_dir / "td3.gin"), "--resume", str(run)]
    summary = cli.train_gym([*again, "--steps", "40", *bindings], search_dirs=[gym_dir])
    assert summary["env_steps"] == 40
    # only --resume: the config (and so the name) and the logging choice are the run's; a gin
    # seed binding does not reseed it
    seed_5 = ["--gin_bindings", "super_sac.seed = 5"]
    cli.train_gym(
        ["--resume", str(run), "--steps", "60", *bindings, *seed_5], search_dirs=[gym_dir]
    )
    hparams = json.loads((run / "hparams.json").read_text())
    assert hparams["name"] == "td3_MountainCarContinuous-v0" and hparams["logging_method"] == "none"
    assert hparams["seed"] == 1 and hparams["run_info"]["args"]["config"] == "td3.gin"
    assert not list(run.rglob("events.out.tfevents*"))
    # the first session's command line stays the run's record; each resume's is listed
    assert hparams["run_info"]["args"]["steps"] == 20
    assert hparams["run_info"]["args"]["run_dir"] == str(run)
    assert [r["args"]["steps"] for r in hparams["resumes"]] == [40, 60]
    # and where each session ran: all three on this machine
    here = {k: v for k, v in machine_info("cpu").items() if k != "torch_threads"}
    sessions = [hparams["machine"], *hparams["resume_machines"]]
    assert len(sessions) == 3
    assert all({k: v for k, v in m.items() if k != "torch_threads"} == here for m in sessions)


def test_machine_records_read_the_processor_and_list_each_resumed_session(tmp_path, monkeypatch):
    import platform

    import torch

    from super_sac import utils
    from super_sac.loggers import with_first_run_info
    from super_sac.utils import cpuinfo_fields

    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n"
            "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse\n\n"
            "processor\t: 1\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: other\n")  # fmt: skip
    assert cpuinfo_fields(text) == {
        "processor": "0", "vendor_id": "GenuineIntel", "cpu family": "6", "model": "167",
        "model name": "Intel(R) Xeon(R) Processor", "flags": "fpu sse",
    }  # fmt: skip
    assert cpuinfo_fields("") == {}
    info = machine_info("cpu")
    assert info["gpu"] is None and info["cpu"] and info["torch_threads"] == torch.get_num_threads()
    assert info["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert json.loads(json.dumps(info)) == info
    # ARM Linux names no model: the implementer and part codes stand for family and model
    arm = {"processor": "0", "CPU implementer": "0x41", "CPU part": "0xd0c"}
    monkeypatch.setattr(utils, "cpuinfo_fields", lambda text: arm)
    info = machine_info()
    assert (info["cpu_family"], info["cpu_model"]) == ("0x41", "0xd0c")
    assert info["cpu"] == (platform.processor() or platform.machine())
    monkeypatch.undo()
    # a run from before machines were recorded, resumed once then: its sessions so far get None
    path = tmp_path / "hparams.json"
    path.write_text(json.dumps({"run_info": {"args": 1}, "resumes": [{"args": 2}]}))
    first = with_first_run_info(path, {"run_info": {"args": 3}, "machine": {"cpu": "A"}})
    assert first["machine"] is None and first["resumes"] == [{"args": 2}, {"args": 3}]
    assert first["resume_machines"] == [None, {"cpu": "A"}]
    path.write_text(json.dumps(first))
    second = with_first_run_info(path, {"run_info": {"args": 4}, "machine": {"cpu": "B"}})
    assert second["resume_machines"] == [None, {"cpu": "A"}, {"cpu": "B"}]
    assert second["run_info"] == {"args": 1} and len(second["resumes"]) == 3


def test_gin_seed_and_name_bindings_are_the_runs_without_the_flags(tmp_path):
    gym_dir = ROOT / "experiments" / "gym"
    small = ["super_sac.random_warmup_steps = 5", "super_sac.verbosity = 0", "SEED = 5",
             "super_sac.seed = %SEED", "super_sac.name = 'named_in_gin'"]  # fmt: skip
    argv = ["--config", "sac.gin", "--steps", "5", "--logging", "none", "--run_dir",
            str(tmp_path / "run"), *[x for b in small for x in ("--gin_bindings", b)]]  # fmt: skip
    cli.train_gym(argv, search_dirs=[gym_dir])
    hparams = json.loads((tmp_path / "run" / "hparams.json").read_text())
    assert hparams["seed"] == 5 and hparams["name"] == "named_in_gin"


def test_dataset_options_without_a_dataset_are_refused():
    with pytest.raises(ConfigError, match="--no_protect, --datasets_path apply to the dataset"):
        cli.train_minatar(["--no_protect", "--datasets_path", "/tmp/minari", "--steps", "1"])


def test_bare_config_names_resolve_in_the_given_folders():
    with pytest.raises(FileNotFoundError, match="sac.gin not found"):
        cli.train_gym(["--config", "sac.gin"], search_dirs=[])
    args = cli.offline_parser().parse_args(["--dataset", "x.npz"])
    assert args.config == "awac.gin" and not args.no_protect


def test_dataset_names_and_normalized_score():
    assert cli.dataset_id("HalfCheetah-v5", "medium") == "super_sac/halfcheetah-medium-v0"
    assert cli.normalized_score(5.0, random_return=0.0, expert_return=10.0) == 50.0


def test_minatar_datasets_are_recorded_from_a_random_policy_or_a_saved_agent(tmp_path):
    import gin
    import numpy as np
    import torch

    from super_sac import datasets as ds
    from super_sac.config import parse_gin
    from super_sac.wrappers import make_minatar_env

    minatar = Path(__file__).resolve().parents[1] / "experiments" / "minatar"
    random_npz = tmp_path / "random.npz"
    summary = cli.record_minatar_dataset(
        ["--env", "breakout", "--transitions", "150", "--npz", str(random_npz)]
    )
    assert summary["transitions"] == 150 and summary["env"] == "breakout"
    transitions, space = ds.load_npz(random_npz)
    assert len(transitions.reward) == 150 and space.n == 3  # breakout's minimal action set
    # a saved agent of basic_online.gin (its untrained weights), its policy sampled
    parse_gin([minatar / "basic_online.gin"], [], [minatar])
    env = make_minatar_env("breakout", max_episode_steps=50)
    saved = cli.minatar_agent(env, torch.device("cpu")).save(tmp_path / "agent.pt")
    gin.clear_config()
    agent_npz = tmp_path / "agent.npz"
    summary = cli.record_minatar_dataset(
        ["--game", "breakout", "--policy", str(saved), "--config", "basic_online.gin",
         "--transitions", "120", "--npz", str(agent_npz), "--max_episode_steps", "50"],
        search_dirs=[minatar],
    )  # fmt: skip
    transitions, _ = ds.load_npz(agent_npz)
    assert summary["policy"] == str(saved) and len(transitions.reward) == 120
    assert set(np.unique(transitions.action).tolist()) <= {0, 1, 2}
    with pytest.raises(SystemExit, match="discrete"):
        cli.record_minatar_dataset(["--noise_std", "0.1", "--npz", str(tmp_path / "x.npz")])
    with pytest.raises(SystemExit, match="--noise_std .* discrete. Fix: .* --epsilon"):
        cli.record_minatar_dataset(
            ["--policy", str(saved), "--noise_std", "0.1", "--npz", str(tmp_path / "x.npz")]
        )
    with pytest.raises(SystemExit, match="--epsilon, --deterministic shape .* random already"):
        cli.record_minatar_dataset(
            ["--epsilon", "0.5", "--deterministic", "--npz", str(tmp_path / "x.npz")]
        )
    with pytest.raises(SystemExit, match="error: --noise_std shape"):  # continuous: still unused
        cli.record_dataset(["--noise_std", "0.2", "--npz", str(tmp_path / "x.npz")])
    # --epsilon 1 with a saved agent: every action uniform, recorded in the summary; the file
    # of the recording above is replaced only with --overwrite
    again = ["--game", "breakout", "--policy", str(saved), "--config", "basic_online.gin",
             "--transitions", "300", "--npz", str(agent_npz), "--max_episode_steps", "50",
             "--epsilon", "1.0"]  # fmt: skip
    before = agent_npz.read_bytes()
    with pytest.raises(SystemExit, match="agent.npz exists.*only with --overwrite"):
        cli.record_minatar_dataset(again, search_dirs=[minatar])
    assert agent_npz.read_bytes() == before
    summary = cli.record_minatar_dataset([*again, "--overwrite"], search_dirs=[minatar])
    transitions, _ = ds.load_npz(agent_npz)
    assert summary["epsilon"] == 1.0 and set(np.unique(transitions.action).tolist()) == {0, 1, 2}


def test_minatar_replay_of_a_training_run_is_written_as_its_episodes(tmp_path):
    """--replay writes what an online run collected, in order, checked against its counters."""
    import json

    import numpy as np
    import torch

    from super_sac import datasets as ds
    from super_sac.utils import sha256_file

    minatar = ROOT / "experiments" / "minatar"
    bindings = ["Agent.hidden_size = 16", "MinAtarEncoder.emb_dim = 8", "ReplayBuffer.size = 1000",
                "super_sac.batch_size = 8", "super_sac.random_warmup_steps = 50",
                "super_sac.eval_interval = 300", "super_sac.eval_episodes = 1",
                "super_sac.checkpoint_interval = 150", "super_sac.verbosity = 0"]  # fmt: skip
    run = tmp_path / "run"
    argv = ["--game", "breakout", "--config", "basic_online.gin", "--steps", "300", "--seed", "0",
            "--max_episode_steps", "40", "--logging", "none", "--run_dir", str(run)]  # fmt: skip
    n_step_1 = [*bindings, "super_sac.n_step = 1"]
    cli.train_minatar(
        argv + [x for b in n_step_1 for x in ("--gin_bindings", b)], search_dirs=[minatar]
    )
    ckpt = run / "checkpoints" / "ckpt_300"
    out = tmp_path / "replay.npz"
    argv_40 = ["--game", "breakout", "--max_episode_steps", "40"]
    summary = cli.record_minatar_dataset([*argv_40, "--replay", str(ckpt), "--npz", str(out)])
    refused = tmp_path / "refused.npz"  # the refusals below write nothing
    data, space = ds.load_npz(out)
    finished = torch.load(ckpt / "state.pt", weights_only=True)["counters"]["episodes"]
    with np.load(ckpt / "buffer.npz") as buf:
        action = buf["action"][:300].reshape(-1)
        reward, done = buf["reward"][:300].reshape(-1), buf["done"][:300].reshape(-1) > 0.5
    assert summary["transitions"] == 300 and space.n == 3
    # episodes of at most 40 steps: at least 8, and all but the last one the run finished
    assert summary["episodes"] - 1 <= finished <= summary["episodes"] and finished >= 7
    np.testing.assert_array_equal(data.action, action)
    np.testing.assert_allclose(data.reward, reward)
    np.testing.assert_array_equal(data.terminated, done)
    # each episode's end is a termination or a truncation; inside one, next_obs is the next obs
    ends = data.terminated | data.truncated
    assert ends[-1] and ends.sum() == summary["episodes"]
    inner = ~ends[:-1]
    np.testing.assert_array_equal(data.next_obs["obs"][:-1][inner], data.obs["obs"][1:][inner])
    assert summary["policy"] == f"replay of {ckpt}"
    assert summary["noise_std"] is None and summary["epsilon"] is None
    with pytest.raises(SystemExit, match="--policy, --transitions would shape a new recording"):
        cli.record_minatar_dataset(
            [
                "--replay",
                str(ckpt),
                "--policy",
                str(run),
                "--transitions",
                "10",
                "--npz",
                str(refused),
            ]
        )
    # another game or recorder: refused by the run's record (hparams.json) or, for a checkpoint
    # moved out of its run (a warning says the options go unchecked), by the buffer's layout
    game = ["--game", "space_invaders", "--max_episode_steps", "40"]
    with pytest.raises(SystemExit, match="--game breakout in the run, --game space_invaders here"):
        cli.record_minatar_dataset([*game, "--replay", str(ckpt), "--npz", str(refused)])
    with pytest.raises(SystemExit, match="trained by train_minatar.py.*experiments/minatar/rec"):
        cli.record_dataset(["--env", "CartPole-v1", "--replay", str(ckpt), "--npz", str(refused)])
    moved = tmp_path / "moved"
    shutil.copytree(ckpt, moved)
    with (
        pytest.warns(UserWarning, match="no run record"),
        pytest.raises(ds.DatasetError, match=r"obs\['obs'\]: shape \(4, 10, 10\) != \(6, 10"),
    ):
        cli.record_minatar_dataset([*game, "--replay", str(moved), "--npz", str(refused)])
    with pytest.raises(ds.DatasetError, match="not a checkpoint folder.*newest of this run's is"):
        cli.record_minatar_dataset(["--replay", str(run), "--npz", str(refused)])
    # a buffer that disagrees with the run's counters (here: one step more counted) is refused,
    # first as a file that no longer matches the manifest, then (manifest rewritten) by the counters
    edited = run / "checkpoints" / "ckpt_301"
    shutil.copytree(ckpt, edited)
    state = torch.load(ckpt / "state.pt", weights_only=True)
    state["counters"]["env_steps"] = 301
    torch.save(state, edited / "state.pt")
    with pytest.raises(ds.DatasetError, match="state.pt (has .* bytes|does not match).*Fix"):
        cli.record_minatar_dataset([*argv_40, "--replay", str(edited), "--npz", str(refused)])
    manifest = json.loads((edited / "MANIFEST.json").read_text())
    manifest["files"]["state.pt"] = {
        "sha256": sha256_file(edited / "state.pt"),
        "bytes": (edited / "state.pt").stat().st_size,
    }
    (edited / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(ds.DatasetError, match="took 301 env steps.*n_step = 1"):
        cli.record_minatar_dataset([*argv_40, "--replay", str(edited), "--npz", str(refused)])
    assert not refused.exists()


def test_replay_of_a_run_with_parallel_envs_is_read_env_by_env(tmp_path):
    """The collector records each transition's env, so the interleaved rows of two envs come
    back as whole episodes (each continuous), all of them, in the order they started."""
    import numpy as np
    import torch

    from super_sac import datasets as ds

    minatar = ROOT / "experiments" / "minatar"
    bindings = ["Agent.hidden_size = 16", "MinAtarEncoder.emb_dim = 8", "ReplayBuffer.size = 1000",
                "super_sac.batch_size = 8", "super_sac.random_warmup_steps = 50",
                "super_sac.eval_interval = 300", "super_sac.eval_episodes = 1",
                "super_sac.checkpoint_interval = 150", "super_sac.verbosity = 0",
                "super_sac.n_step = 1"]  # fmt: skip
    run = tmp_path / "run"
    argv = ["--game", "breakout", "--config", "basic_online.gin", "--steps", "300", "--seed", "0",
            "--max_episode_steps", "40", "--parallel_envs", "2", "--logging", "none",
            "--run_dir", str(run)]  # fmt: skip
    cli.train_minatar(argv + [x for b in bindings for x in ("--gin_bindings", b)],
                      search_dirs=[minatar])  # fmt: skip
    ckpt = run / "checkpoints" / "ckpt_300"
    with np.load(ckpt / "buffer.npz") as buf:
        assert buf["env_index"][:6].tolist() == [0, 1, 0, 1, 0, 1]  # interleaved pushes
        actions = buf["action"][:300].reshape(-1)
    out = tmp_path / "replay.npz"
    summary = cli.record_minatar_dataset(
        [
            "--game",
            "breakout",
            "--max_episode_steps",
            "40",
            "--replay",
            str(ckpt),
            "--npz",
            str(out),
        ]  # fmt: skip
    )
    data, _ = ds.load_npz(out)  # load_npz's own checks: every flagless step continues
    finished = torch.load(ckpt / "state.pt", weights_only=True)["counters"]["episodes"]
    assert summary["transitions"] == 300 and finished >= 6
    assert summary["episodes"] - 2 <= finished <= summary["episodes"]  # one open episode per env
    ends = data.terminated | data.truncated
    inner = ~ends[:-1]
    np.testing.assert_array_equal(data.next_obs["obs"][:-1][inner], data.obs["obs"][1:][inner])
    # the same transitions, regrouped: env 0's first episode first, then env 1's
    assert sorted(data.action.tolist()) == sorted(actions.tolist())
    np.testing.assert_array_equal(data.action[:2], actions[[0, 2]])


def test_dry_run_checks_the_options_and_writes_nothing(tmp_path, capsys):
    gym_dir = ROOT / "experiments" / "gym"
    run_dir = tmp_path / "run"
    argv = ["--env", "Pendulum-v1", "--config", "td3.gin", "--run_dir", str(run_dir), "--dry_run"]
    assert cli.train_gym(argv, search_dirs=[gym_dir]) == {"dry_run": True}
    assert "nothing was trained" in capsys.readouterr().out and not run_dir.exists()
    with pytest.raises(GinConfigError, match="batchsize"):  # gin errors are found too
        cli.train_gym([*argv, "--gin_bindings", "super_sac.batchsize = 3"], search_dirs=[gym_dir])
    from super_sac.validation import ConfigError  # and the loop's own checks of the values

    with pytest.raises(ConfigError, match=r"mlp_tau = 5.0: must lie in"):
        cli.train_gym([*argv, "--gin_bindings", "super_sac.mlp_tau = 5.0"], search_dirs=[gym_dir])
    assert not run_dir.exists()
    # an offline run's dataset is read and checked (a missing file is named)
    from super_sac.datasets import DatasetError

    offline = ["--env", "Pendulum-v1", "--config", "bc.gin", "--run_dir", str(run_dir),
               "--dataset", str(tmp_path / "missing.npz"), "--dry_run"]  # fmt: skip
    with pytest.raises(DatasetError, match="no dataset file .*missing.npz"):
        cli.train_offline(offline, search_dirs=[ROOT / "experiments" / "offline", gym_dir])
    assert not run_dir.exists()
