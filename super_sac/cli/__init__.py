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
then optional online fine-tuning), :func:`train_minatar`, :func:`train_atari`, :func:`train_dmc`
(DeepMind Control from pixels or states) and
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
    dmc_agent,
    dmc_env_kwargs,
    dmc_envs,
    gym_envs,
    make_atari,
    make_dmc,
    make_env,
    make_envs,
    minatar_agent,
    minatar_envs,
    pixel_agent,
    train_and_test_envs,
    unknown_env_message,
)
from super_sac.cli.options import (
    gin_syntax_message,
    given_options,
    loop_setting,
    parse_gin_args,
    resumed_args,
)
from super_sac.cli.parsers import (
    add_common_args,
    add_dataset_args,
    add_dmc_args,
    atari_parser,
    build_parser,
    dmc_parser,
    minatar_parser,
    offline_parser,
)
from super_sac.cli.recording import (
    dataset_id,
    load_agent,
    normalized_score,
    record,
    record_dataset,
    record_dmc_dataset,
    record_dmc_parser,
    record_minatar_dataset,
    record_minatar_parser,
    record_parser,
)
from super_sac.cli.runner import (
    CLI_ERRORS,
    atari_loop_defaults,
    cli,
    dataset_loader,
    default_pixel_augmenter,
    dmc_loop_defaults,
    fail,
    run,
    train_atari,
    train_dmc,
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
    "add_dmc_args",
    "atari_agent",
    "atari_envs",
    "atari_loop_defaults",
    "atari_parser",
    "build_agent",
    "build_parser",
    "cli",
    "dataset_id",
    "dataset_loader",
    "default_pixel_augmenter",
    "dmc_agent",
    "dmc_env_kwargs",
    "dmc_envs",
    "dmc_loop_defaults",
    "dmc_parser",
    "fail",
    "gin_syntax_message",
    "gym_envs",
    "load_agent",
    "loop_setting",
    "make_atari",
    "make_dmc",
    "make_env",
    "make_envs",
    "minatar_agent",
    "minatar_envs",
    "minatar_parser",
    "normalized_score",
    "offline_parser",
    "parse_gin_args",
    "pixel_agent",
    "record",
    "record_dataset",
    "record_dmc_dataset",
    "record_dmc_parser",
    "record_minatar_dataset",
    "record_minatar_parser",
    "record_parser",
    "given_options",
    "resumed_args",
    "run",
    "train_and_test_envs",
    "train_atari",
    "train_dmc",
    "train_gym",
    "train_minatar",
    "train_offline",
    "unknown_env_message",
]
