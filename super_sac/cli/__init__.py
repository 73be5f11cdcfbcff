"""The command line of the training scripts in ``experiments/``: their options, env and agent
builders, the run itself, and the one-line error report.

Each script is a thin file that calls one entry point here with the folder its gin files live in
(a bare ``--config`` name resolves there)::

    from super_sac import cli

    HERE = Path(__file__).resolve().parent

    def main(argv=None):
        return cli.train_gym(argv, search_dirs=[HERE], description=__doc__)

    if __name__ == "__main__":
        cli.cli(main)

Entry points: :func:`train_gym` (gymnasium envs), :func:`train_offline` (a recorded dataset,
then optional online fine-tuning), :func:`train_minatar`, :func:`train_atari` and
:func:`record_dataset` (run a policy and save what it does as a dataset). Each takes ``argv``
as a list of strings (``None``: ``sys.argv[1:]``), so tests and benchmarks call them in-process;
the training ones return the summary dict of :func:`super_sac.super_sac`. To build a script of
your own, combine :func:`add_common_args`, :func:`train_and_test_envs` and :func:`run`.
"""

from super_sac.cli.factories import (
    MINATAR_GAMES,
    UnknownEnvError,
    action_spec,
    atari_agent,
    atari_envs,
    build_agent,
    gym_envs,
    make_atari,
    make_env,
    make_envs,
    minatar_agent,
    minatar_envs,
    train_and_test_envs,
    unknown_env_message,
)
from super_sac.cli.parsers import (
    add_common_args,
    add_dataset_args,
    atari_parser,
    build_parser,
    minatar_parser,
    offline_parser,
)
from super_sac.cli.recording import (
    dataset_id,
    load_agent,
    normalized_score,
    record,
    record_dataset,
    record_parser,
)
from super_sac.cli.runner import (
    CLI_ERRORS,
    cli,
    dataset_loader,
    fail,
    gin_syntax_message,
    loop_setting,
    parse_gin_args,
    resumed_args,
    run,
    train_atari,
    train_gym,
    train_minatar,
    train_offline,
)

__all__ = [
    "CLI_ERRORS",
    "MINATAR_GAMES",
    "UnknownEnvError",
    "action_spec",
    "add_common_args",
    "add_dataset_args",
    "atari_agent",
    "atari_envs",
    "atari_parser",
    "build_agent",
    "build_parser",
    "cli",
    "dataset_id",
    "dataset_loader",
    "fail",
    "gin_syntax_message",
    "gym_envs",
    "load_agent",
    "loop_setting",
    "make_atari",
    "make_env",
    "make_envs",
    "minatar_agent",
    "minatar_envs",
    "minatar_parser",
    "normalized_score",
    "offline_parser",
    "parse_gin_args",
    "record",
    "record_dataset",
    "record_parser",
    "resumed_args",
    "run",
    "train_and_test_envs",
    "train_atari",
    "train_gym",
    "train_minatar",
    "train_offline",
    "unknown_env_message",
]
