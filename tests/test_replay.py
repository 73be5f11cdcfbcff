"""Tests for super_sac.replay: sum trees, the replay buffer and the n-step queue."""

from __future__ import annotations

import os

import gin
import gymnasium
import numpy as np
import pytest
import torch

from super_sac.replay import Batch, MinTree, NStepQueue, ReplayBuffer, SumTree

OBS_SPACE = gymnasium.spaces.Dict(
    {
        "state": gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32),
        "pixels": gymnasium.spaces.Box(0, 255, (4, 4, 3), np.uint8),
    }
)
BOX_ACTIONS = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
DISCRETE_ACTIONS = gymnasium.spaces.Discrete(5)


def make_transitions(n: int, start: int = 0, discrete: bool = False) -> dict:
    """``n`` transitions whose contents encode their index ``start + i``.

    :param n: batch size.
    :param start: index of the first transition.
    :param discrete: int64 actions of shape ``(n,)`` instead of float32 ``(n, 2)``.
    """
    ids = np.arange(start, start + n)
    state = np.repeat(ids[:, None], 3, axis=1).astype(np.float32)
    pixels = np.broadcast_to((ids % 256).astype(np.uint8)[:, None, None, None], (n, 4, 4, 3))
    action = (ids % 5).astype(np.int64) if discrete else np.stack([ids, -ids], 1).astype(np.float32)
    return {
        "obs": {"state": state, "pixels": pixels.copy()},
        "action": action,
        "reward": ids.astype(np.float32),
        "next_obs": {"state": state + 1, "pixels": pixels + 1},
        "done": (ids % 2).astype(np.float32),
        "discount": np.full(n, 0.99, np.float32),
    }


def stored_rewards(buf: ReplayBuffer) -> list[float]:
    return buf._reward[: len(buf)].tolist()


def prioritized_with(priorities: list[float], alpha: float, beta: float = 0.4) -> ReplayBuffer:
    """A buffer holding ``len(priorities)`` items with those raw priorities (``eps = 0``)."""
    buf = ReplayBuffer(
        len(priorities), prioritized=True, alpha=alpha, beta=beta, priority_eps=0.0, seed=0
    )
    buf.push(**make_transitions(len(priorities)))
    buf.update_priorities(np.arange(len(priorities)), np.array(priorities))
    return buf


# ------------------------------------------------------------------------------- shapes/dtypes


def test_push_sample_shapes_and_dtypes_box_actions(capsys: pytest.CaptureFixture) -> None:
    buf = ReplayBuffer(10, seed=0)
    buf.allocate(OBS_SPACE, BOX_ACTIONS)
    # state 3*4 + pixels 48*1 = 60 B, twice (obs, next_obs) = 120, action 2*4 = 8,
    # reward/done/discount 3*4 = 12 -> 140 B per transition.
    assert buf.bytes_per_transition == 140
    assert buf.memory_bytes == 1400
    assert "ReplayBuffer: 10 transitions x 140 B" in capsys.readouterr().out
    assert buf._obs["pixels"].dtype == np.uint8
    buf.push(**make_transitions(4))
    batch = buf.sample(6)
    assert isinstance(batch, Batch)
    assert set(batch.obs) == {"state", "pixels"}
    assert batch.obs["pixels"].dtype == torch.uint8 and batch.obs["pixels"].shape == (6, 4, 4, 3)
    assert batch.next_obs["state"].dtype == torch.float32
    assert batch.next_obs["state"].shape == (6, 3)
    assert batch.action.dtype == torch.float32 and batch.action.shape == (6, 2)
    for column in (batch.reward, batch.done, batch.discount, batch.weights):
        assert column.dtype == torch.float32 and column.shape == (6, 1)
    assert torch.all(batch.weights == 1.0)
    assert batch.idxs.dtype == np.int64 and batch.idxs.shape == (6,)
    # Each row must be the transition stored in its slot: state == reward == slot index.
    idxs = torch.from_numpy(batch.idxs).float()
    assert torch.equal(batch.obs["state"][:, 0], idxs)
    assert torch.equal(batch.next_obs["state"][:, 0], idxs + 1)
    assert torch.equal(batch.reward[:, 0], idxs)


def test_discrete_actions_and_lazy_allocation_from_push() -> None:
    buf = ReplayBuffer(8, seed=0, verbose=False)
    data = make_transitions(3, discrete=True)
    data["obs"]["state"] = data["obs"]["state"].astype(np.float64)  # narrowed to float32
    data["next_obs"]["state"] = data["next_obs"]["state"].astype(np.float64)
    buf.push(**data)
    assert buf.keys == ("state", "pixels")
    batch = buf.sample(5)
    assert batch.action.dtype == torch.int64 and batch.action.shape == (5,)
    assert batch.obs["state"].dtype == torch.float32
    assert batch.obs["pixels"].dtype == torch.uint8
    assert torch.equal(batch.action, torch.from_numpy(batch.idxs % 5))
    # The same layout given as spaces is accepted as a no-op.
    buf.allocate(OBS_SPACE, DISCRETE_ACTIONS)
    assert len(buf) == 3


def test_reward_done_discount_accept_column_and_scalar() -> None:
    buf = ReplayBuffer(4, seed=0, verbose=False)
    data = make_transitions(2)
    data["reward"] = data["reward"][:, None]
    data["discount"] = 0.5
    buf.push(**data)
    assert buf._discount[:2].tolist() == [0.5, 0.5]
    assert buf._reward[:2].tolist() == [0.0, 1.0]


# ------------------------------------------------------------------------------- ring storage


def test_wraparound_single_pushes() -> None:
    buf = ReplayBuffer(5, seed=0, verbose=False)
    for i in range(7):
        buf.push(**make_transitions(1, start=i))
    # Items 5 and 6 overwrite slots 0 and 1.
    assert stored_rewards(buf) == [5, 6, 2, 3, 4]
    assert len(buf) == 5 and buf.size == 5
    assert buf._ptr == 2


def test_batch_crossing_the_end_wraps() -> None:
    buf = ReplayBuffer(5, seed=0, verbose=False)
    buf.push(**make_transitions(3))  # slots 0..2
    buf.push(**make_transitions(4, start=3))  # items 3, 4 -> slots 3, 4; 5, 6 -> slots 0, 1
    assert stored_rewards(buf) == [5, 6, 2, 3, 4]
    assert buf._obs["state"][:, 0].tolist() == [5, 6, 2, 3, 4]
    assert buf._ptr == 2


def test_batch_larger_than_size_keeps_last_items() -> None:
    buf = ReplayBuffer(5, seed=0, verbose=False)
    buf.push(**make_transitions(12))
    # Same slots as 12 single pushes: item i in slot i % 5 for the last five (7..11).
    assert stored_rewards(buf) == [10, 11, 7, 8, 9]
    assert buf._ptr == 12 % 5 and len(buf) == 5


# ------------------------------------------------------------------------------- validation


def test_missing_and_unexpected_keys_are_named() -> None:
    buf = ReplayBuffer(4, verbose=False)
    buf.allocate(OBS_SPACE, BOX_ACTIONS)
    data = make_transitions(2)
    data["obs"]["depth"] = data["obs"].pop("pixels")
    with pytest.raises(ValueError, match=r"missing \['pixels'\], unexpected \['depth'\]"):
        buf.push(**data)


def test_wrong_shape_names_key_expected_and_got() -> None:
    buf = ReplayBuffer(4, verbose=False)
    buf.allocate(OBS_SPACE, BOX_ACTIONS)
    data = make_transitions(2)
    data["next_obs"]["state"] = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"next_obs\['state'\].*\(2, 3\), got \(2, 4\)"):
        buf.push(**data)
    data = make_transitions(2)
    data["reward"] = np.zeros(3, np.float32)  # leading dim differs from the action's
    with pytest.raises(ValueError, match="reward"):
        buf.push(**data)


def test_float_into_uint8_is_rejected() -> None:
    buf = ReplayBuffer(4, verbose=False)
    buf.allocate(OBS_SPACE, BOX_ACTIONS)
    data = make_transitions(2)
    data["obs"]["pixels"] = data["obs"]["pixels"] / 255.0
    with pytest.raises(ValueError, match="pixels"):
        buf.push(**data)


def test_non_dict_space_points_to_wrapper() -> None:
    buf = ReplayBuffer(4, verbose=False)
    with pytest.raises(ValueError, match="SimpleGymWrapper"):
        buf.allocate(gymnasium.spaces.Box(-1, 1, (3,)), BOX_ACTIONS)


def test_reallocation_with_other_layout_lists_differences() -> None:
    buf = ReplayBuffer(4, verbose=False)
    buf.allocate(OBS_SPACE, BOX_ACTIONS)
    buf.allocate(OBS_SPACE, BOX_ACTIONS)  # same layout: no-op
    other = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-1, 1, (5,), np.float32)})
    with pytest.raises(ValueError) as info:
        buf.allocate(other, DISCRETE_ACTIONS)
    message = str(info.value)
    assert "missing obs key 'pixels'" in message
    assert "obs['state']: shape (3,) != (5,)" in message
    assert "action: shape (2,) != ()" in message and "dtype float32 != int64" in message


def test_sampling_empty_buffer_raises() -> None:
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(4, verbose=False).sample(2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"size": 0}, "size"), ({"alpha": -0.1}, "alpha"), ({"beta": 1.5}, "beta")],
)
def test_constructor_validation(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ReplayBuffer(**kwargs)


def test_bad_priorities_are_rejected() -> None:
    buf = prioritized_with([1.0, 1.0], alpha=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        buf.update_priorities(np.array([0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="finite"):
        buf.update_priorities(np.array([1]), np.array([np.nan]))
    with pytest.raises(ValueError, match="idxs"):
        buf.update_priorities(np.array([2]), np.array([1.0]))
    with pytest.raises(RuntimeError, match="prioritized=False"):
        uniform = ReplayBuffer(2, verbose=False)
        uniform.push(**make_transitions(2))
        uniform.update_priorities(np.array([0]), np.array([1.0]))


# ------------------------------------------------------------------------------- trees


def test_sum_tree_totals_and_prefix_lookup() -> None:
    tree = SumTree(5)  # not a power of two: three padding leaves
    tree.update(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 0.0]))
    assert tree.total == 10.0
    # Cumulative sums 1, 3, 6, 10: leaf i covers [cum[i-1], cum[i]).
    prefixes = np.array([0.0, 0.999, 1.0, 2.9, 3.0, 5.99, 6.0, 9.999, 10.0])
    expected = [0, 0, 1, 1, 2, 2, 3, 3, 3]  # 10.0 == total must not land on empty leaf 4
    assert tree.find_prefix_sum(prefixes).tolist() == expected
    assert tree.values(np.array([3, 4])).tolist() == [4.0, 0.0]


def test_sum_tree_duplicate_indices_last_value_wins() -> None:
    tree = SumTree(4)
    tree.update(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    tree.update(np.array([1, 1, 2, 1]), np.array([5.0, 7.0, 0.0, 9.0]))
    # Leaves [1, 9, 0, 4]: total 14; internal nodes 1 + 9 = 10 and 0 + 4 = 4.
    assert tree.values(np.arange(4)).tolist() == [1.0, 9.0, 0.0, 4.0]
    assert tree.total == 14.0
    assert tree._tree[2:4].tolist() == [10.0, 4.0]
    assert tree.find_prefix_sum(np.array([0.5, 1.0, 9.99, 10.0])).tolist() == [0, 1, 1, 3]


def test_sum_tree_stays_exact_under_random_updates() -> None:
    rng = np.random.default_rng(0)
    tree, mins = SumTree(37), MinTree(37)
    leaves = np.zeros(37)
    for _ in range(50):
        idxs = rng.integers(0, 37, size=8)
        values = rng.integers(1, 100, size=8).astype(np.float64)  # integers: sums are exact
        tree.update(idxs, values)
        mins.update(idxs, values)
        leaves[idxs] = values  # numpy assignment also keeps the last duplicate
        assert tree.total == leaves.sum()
        assert mins.min == leaves[leaves > 0].min()


# ------------------------------------------------------------------------------- prioritized


def sample_frequencies(buf: ReplayBuffer, draws: int = 20, batch_size: int = 500) -> np.ndarray:
    counts = np.zeros(len(buf))
    for _ in range(draws):
        counts += np.bincount(buf.sample(batch_size).idxs, minlength=len(buf))
    return counts / counts.sum()


def test_per_frequencies_alpha_one() -> None:
    # P(i) = p_i / sum p = [1, 2, 3, 4] / 10.
    freqs = sample_frequencies(prioritized_with([1.0, 2.0, 3.0, 4.0], alpha=1.0))
    np.testing.assert_allclose(freqs, [0.1, 0.2, 0.3, 0.4], atol=0.01)


def test_per_frequencies_alpha_half() -> None:
    # p^0.5 = [1, 1.41421, 1.73205, 2], sum 6.14626 -> P = [0.16270, 0.23009, 0.28181, 0.32540].
    freqs = sample_frequencies(prioritized_with([1.0, 2.0, 3.0, 4.0], alpha=0.5))
    np.testing.assert_allclose(freqs, [0.16270, 0.23009, 0.28181, 0.32540], atol=0.01)


def test_per_sampling_is_stratified() -> None:
    buf = prioritized_with([1.0, 2.0, 3.0, 4.0], alpha=1.0)
    # total 10, batch 10 -> ten segments of width 1, one draw each. Item i covers
    # [0, 1), [1, 3), [3, 6), [6, 10), so every batch holds exactly 1, 2, 3, 4 copies.
    for _ in range(5):
        assert np.bincount(buf.sample(10).idxs, minlength=4).tolist() == [1, 2, 3, 4]


def test_importance_weights_by_hand() -> None:
    buf = prioritized_with([1.0, 2.0, 3.0, 4.0], alpha=1.0, beta=0.5)
    # N = 4, P = [0.1, 0.2, 0.3, 0.4] -> N P = [0.4, 0.8, 1.2, 1.6];
    # (N P)^-0.5 = [1.5811, 1.1180, 0.9129, 0.7906]; dividing by the max (item 0) gives
    # [1, 1/sqrt(2), 1/sqrt(3), 1/2].
    expected = np.array([1.0, 2**-0.5, 3**-0.5, 0.5])
    batch = buf.sample(64)
    np.testing.assert_allclose(batch.weights[:, 0].numpy(), expected[batch.idxs], rtol=1e-6)
    assert set(batch.idxs.tolist()) == {0, 1, 2, 3}
    buf.beta = 0.0  # an annealing schedule may set beta; 0 -> no correction
    assert torch.all(buf.sample(8).weights == 1.0)
    with pytest.raises(ValueError, match="beta"):
        buf.beta = 2.0


def test_new_items_get_max_priority() -> None:
    buf = ReplayBuffer(3, prioritized=True, alpha=1.0, beta=1.0, priority_eps=0.0, seed=0)
    buf.push(**make_transitions(2))
    buf.update_priorities(np.array([0, 1]), torch.tensor([3.0, 0.5]))
    buf.push(**make_transitions(1, start=2))
    # Leaves [3, 0.5, 3]: the new item gets the max raw priority 3, not the initial 1.
    assert buf._sum_tree.values(np.arange(3)).tolist() == [3.0, 0.5, 3.0]
    # beta = 1: weight = (p_i / p_min)^-1 -> [1/6, 1, 1/6].
    batch = buf.sample(32)
    np.testing.assert_allclose(
        batch.weights[:, 0].numpy(), np.array([1 / 6, 1.0, 1 / 6])[batch.idxs], rtol=1e-6
    )


def test_priority_eps_and_alpha_are_applied() -> None:
    buf = ReplayBuffer(2, prioritized=True, alpha=0.5, priority_eps=0.25, seed=0, verbose=False)
    buf.push(**make_transitions(2))
    buf.update_priorities(np.array([0, 1]), np.array([0.0, 2.0]))
    # (0 + 0.25)^0.5 = 0.5 and (2 + 0.25)^0.5 = 1.5.
    np.testing.assert_allclose(buf._sum_tree.values(np.arange(2)), [0.5, 1.5])
    assert buf._max_priority == 2.25


# ------------------------------------------------------------------------------- save / load


def filled_prioritized_buffer(size: int = 5, seed: int = 1) -> ReplayBuffer:
    buf = ReplayBuffer(size, prioritized=True, alpha=0.7, seed=seed, verbose=False)
    buf.push(**make_transitions(7))  # wraps: ptr 2
    buf.update_priorities(np.array([0, 3]), np.array([5.0, 0.1]))
    return buf


def assert_same_contents(a: ReplayBuffer, b: ReplayBuffer) -> None:
    assert (len(a), a._ptr, a.keys) == (len(b), b._ptr, b.keys)
    for key in a.keys:
        np.testing.assert_array_equal(a._obs[key], b._obs[key])
        np.testing.assert_array_equal(a._next_obs[key], b._next_obs[key])
    for name in ("_action", "_reward", "_done", "_discount"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    slots = np.arange(a.size)
    np.testing.assert_array_equal(a._sum_tree.values(slots), b._sum_tree.values(slots))
    assert a._sum_tree.total == b._sum_tree.total and a._min_tree.min == b._min_tree.min
    assert a._max_priority == b._max_priority


def test_save_load_round_trip(tmp_path: os.PathLike) -> None:
    original = filled_prioritized_buffer()
    written = original.save(tmp_path / "buffer")  # ".npz" is appended
    assert written.endswith("buffer.npz")
    assert sorted(os.listdir(tmp_path)) == ["buffer.npz"]  # no ".tmp" left behind
    with np.load(written, allow_pickle=False) as data:  # no pickled objects inside
        assert data["layout"].shape == () and data["layout"].dtype.kind == "U"
        assert int(data["ptr"]) == 2 and data["reward"].shape == (5,)

    loaded = ReplayBuffer(5, prioritized=True, alpha=0.7, verbose=False).load(written)
    assert_same_contents(original, loaded)
    assert_same_contents(original, ReplayBuffer.from_file(written, prioritized=True, alpha=0.7))

    # Both continue the ring identically.
    for buf in (original, loaded):
        buf.push(**make_transitions(3, start=7))  # items 7, 8, 9 -> slots 2, 3, 4
    assert_same_contents(original, loaded)
    assert stored_rewards(loaded) == [5, 6, 7, 8, 9]


def test_failed_save_keeps_previous_file(tmp_path: os.PathLike, monkeypatch) -> None:
    buf = filled_prioritized_buffer()
    path = buf.save(tmp_path / "b.npz")
    before = open(path, "rb").read()

    def broken_savez(file, **arrays) -> None:
        file.write(b"partial garbage")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        buf.save(path)
    assert open(path, "rb").read() == before  # the old file was never touched
    assert sorted(os.listdir(tmp_path)) == ["b.npz"]


def test_load_partial_buffer_into_larger_one_keeps_order(tmp_path: os.PathLike) -> None:
    path = filled_prioritized_buffer().save(tmp_path / "small.npz")
    bigger = ReplayBuffer(8, prioritized=True, alpha=0.7, verbose=False).load(path)
    # Ring [5, 6, 2, 3, 4] with ptr 2 -> oldest first: 2, 3, 4, 5, 6; next push goes to slot 5.
    assert stored_rewards(bigger) == [2, 3, 4, 5, 6]
    assert bigger._ptr == 5
    # Priorities follow their items: item 5 (was slot 0) had 5.0, item 3 (slot 3) had 0.1;
    # stored as (p + 1e-6) ** 0.7.
    leaves = bigger._sum_tree.values(np.arange(5))
    np.testing.assert_allclose(leaves[[3, 1]], (np.array([5.0, 0.1]) + 1e-6) ** 0.7)


def test_load_rejects_too_small_and_mismatched_buffers(tmp_path: os.PathLike) -> None:
    path = filled_prioritized_buffer().save(tmp_path / "b.npz")
    with pytest.raises(ValueError, match="5 transitions"):
        ReplayBuffer(4, verbose=False).load(path)
    other = ReplayBuffer(5, verbose=False)
    other.allocate(OBS_SPACE, DISCRETE_ACTIONS)
    with pytest.raises(ValueError, match="action: shape"):
        other.load(path)


# ------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("prioritized", [False, True])
def test_same_seed_same_samples(prioritized: bool) -> None:
    a, b = (
        ReplayBuffer(16, prioritized=prioritized, seed=3, verbose=False),
        ReplayBuffer(16, prioritized=prioritized, seed=3, verbose=False),
    )
    for buf in (a, b):
        buf.push(**make_transitions(10))
    np.testing.assert_array_equal(a.sample(32).idxs, b.sample(32).idxs)
    np.testing.assert_array_equal(a.sample(32).idxs, b.sample(32).idxs)


def test_global_numpy_seed_makes_unseeded_buffers_deterministic() -> None:
    idxs = []
    for _ in range(2):
        np.random.seed(123)
        buf = ReplayBuffer(16, verbose=False)
        buf.push(**make_transitions(10))
        idxs.append(buf.sample(32).idxs)
    np.testing.assert_array_equal(*idxs)


def test_gin_can_configure_the_buffer() -> None:
    with gin.unlock_config():
        gin.bind_parameter("ReplayBuffer.size", 7)
    try:
        assert ReplayBuffer(verbose=False).size == 7
    finally:
        gin.clear_config()


# ------------------------------------------------------------------------------- n-step queue


def step(t: float, env_offsets: tuple[float, ...] = (0.0,)) -> dict:
    """One vector-env step where obs = offset + t, next_obs = offset + t + 1, action = obs."""
    obs = np.array([[o + t] for o in env_offsets], np.float32)
    return {"obs": {"x": obs}, "action": obs.copy(), "next_obs": {"x": obs + 1}}


def run_single_env(terminated_at_end: bool) -> list[dict]:
    queue = NStepQueue(num_envs=1, n_step=3, gamma=0.5)
    outs = []
    for t in range(5):  # rewards 1..5, the episode ends at t = 4
        ends = t == 4
        out = queue.push(
            **step(t),
            reward=np.array([t + 1.0]),
            terminated=np.array([ends and terminated_at_end]),
            truncated=np.array([ends and not terminated_at_end]),
        )
        outs.append(out)
    return outs


@pytest.mark.parametrize("terminated", [True, False])
def test_nstep_single_env(terminated: bool) -> None:
    outs = run_single_env(terminated)
    assert outs[0] is None and outs[1] is None
    # t=2: window 0..2 -> 1 + 0.5*2 + 0.25*3 = 2.75, bootstrap from s3 with 0.5^3 = 0.125.
    # t=3: window 1..3 -> 2 + 0.5*3 + 0.25*4 = 4.5, bootstrap from s4.
    for out, start, ret in ((outs[2], 0, 2.75), (outs[3], 1, 4.5)):
        assert out["obs"]["x"].tolist() == [[start]]
        assert out["action"].tolist() == [[start]]
        assert out["reward"].tolist() == [ret]
        assert out["next_obs"]["x"].tolist() == [[start + 3]]
        assert out["done"].tolist() == [0.0] and out["discount"].tolist() == [0.125]
    # t=4 ends the episode: flush starts 2, 3, 4 to the final observation s5.
    # 3 + 0.5*4 + 0.25*5 = 6.25 (0.125); 4 + 0.5*5 = 6.5 (0.25); 5 (0.5).
    last = outs[4]
    assert last["obs"]["x"][:, 0].tolist() == [2, 3, 4]
    assert last["reward"].tolist() == [6.25, 6.5, 5.0]
    assert last["discount"].tolist() == [0.125, 0.25, 0.5]
    assert last["next_obs"]["x"][:, 0].tolist() == [5, 5, 5]
    # Termination stops bootstrapping; truncation keeps it.
    assert last["done"].tolist() == [float(terminated)] * 3
    for out in outs[2:]:
        assert out["reward"].dtype == out["done"].dtype == out["discount"].dtype == np.float32


def test_nstep_two_envs_ending_at_different_steps() -> None:
    queue = NStepQueue(num_envs=2, n_step=3, gamma=0.5)
    rewards = np.array([1.0, 2.0])
    offsets = (0.0, 100.0)
    end = {1: ([True, False], [False, False]), 3: ([False, False], [False, True])}
    outs = []
    for t in range(4):
        terminated, truncated = end.get(t, ([False, False], [False, False]))
        out = queue.push(
            **step(t, offsets), reward=rewards, terminated=terminated, truncated=truncated
        )
        outs.append(out)
    assert outs[0] is None
    # t=1: env 0 terminates -> starts 0, 1: 1 + 0.5 = 1.5 (0.25), 1 (0.5), done = 1.
    assert outs[1]["obs"]["x"][:, 0].tolist() == [0, 1]
    assert outs[1]["reward"].tolist() == [1.5, 1.0]
    assert outs[1]["discount"].tolist() == [0.25, 0.5]
    assert outs[1]["done"].tolist() == [1.0, 1.0]
    assert outs[1]["next_obs"]["x"][:, 0].tolist() == [2, 2]
    # t=2: env 1 fills its window 0..2: 2 + 1 + 0.5 = 3.5 (0.125); env 0 restarted, pending 1.
    assert outs[2]["obs"]["x"][:, 0].tolist() == [100]
    assert outs[2]["reward"].tolist() == [3.5] and outs[2]["discount"].tolist() == [0.125]
    # t=3: env 1 truncates -> starts 1, 2, 3: 3.5 (0.125), 2 + 1 = 3 (0.25), 2 (0.5), done 0.
    assert outs[3]["obs"]["x"][:, 0].tolist() == [101, 102, 103]
    assert outs[3]["reward"].tolist() == [3.5, 3.0, 2.0]
    assert outs[3]["discount"].tolist() == [0.125, 0.25, 0.5]
    assert outs[3]["done"].tolist() == [0.0, 0.0, 0.0]
    assert outs[3]["next_obs"]["x"][:, 0].tolist() == [104, 104, 104]
    # The output feeds the replay buffer directly.
    buf = ReplayBuffer(8, seed=0, verbose=False)
    for out in outs[1:]:
        buf.push(**out)
    assert stored_rewards(buf) == [1.5, 1.0, 3.5, 3.5, 3.0, 2.0]


def test_nstep_flush_emits_pending_windows_as_truncated() -> None:
    queue = NStepQueue(num_envs=2, n_step=3, gamma=0.5)
    assert queue.flush(step(0, (0.0, 100.0))["obs"]) is None  # nothing pending
    for t in range(2):  # env 0: rewards 1, 2 pending; env 1 ends at t = 0, then 1 pending
        queue.push(
            **step(t, (0.0, 100.0)), reward=np.array([t + 1.0, 10.0]),
            terminated=np.array([False, t == 0]), truncated=np.array([False, False]),
        )  # fmt: skip
    out = queue.flush(step(2, (0.0, 100.0))["obs"])  # the envs' current observations: 2, 102
    # env 0: 1 + 0.5*2 = 2 (0.25), 2 (0.5); env 1: 10 (0.5); none terminal, all to now
    assert out["obs"]["x"][:, 0].tolist() == [0, 1, 101]
    assert out["reward"].tolist() == [2.0, 2.0, 10.0]
    assert out["discount"].tolist() == [0.25, 0.5, 0.5]
    assert out["done"].tolist() == [0.0, 0.0, 0.0]
    assert out["next_obs"]["x"][:, 0].tolist() == [2, 2, 102]
    assert queue.flush(step(3, (0.0, 100.0))["obs"]) is None  # the queues are empty


def test_nstep_copies_observations_of_pending_steps() -> None:
    queue = NStepQueue(num_envs=1, n_step=2, gamma=1.0)
    data = step(0)
    queue.push(**data, reward=[1.0], terminated=[False], truncated=[False])
    data["obs"]["x"][:] = 42.0  # vector envs may reuse their observation buffers
    out = queue.push(**step(1), reward=[1.0], terminated=[False], truncated=[False])
    assert out["obs"]["x"].tolist() == [[0.0]] and out["reward"].tolist() == [2.0]


def test_nstep_one_is_a_pass_through() -> None:
    queue = NStepQueue(num_envs=2, n_step=1, gamma=0.9)
    data = step(0, (0.0, 10.0))
    out = queue.push(**data, reward=[1.0, 2.0], terminated=[True, False], truncated=[False, True])
    assert out["obs"] is data["obs"] and out["next_obs"] is data["next_obs"]
    assert out["reward"].tolist() == [1.0, 2.0]
    assert out["done"].dtype == np.float32 and out["done"].tolist() == [1.0, 0.0]
    np.testing.assert_allclose(out["discount"], [0.9, 0.9])


def test_nstep_reset_and_validation() -> None:
    queue = NStepQueue(num_envs=1, n_step=3, gamma=0.5)
    queue.push(**step(0), reward=[1.0], terminated=[False], truncated=[False])
    queue.reset()
    out = queue.push(**step(1), reward=[4.0], terminated=[True], truncated=[False])
    assert out["reward"].tolist() == [4.0]  # the pre-reset step is gone
    with pytest.raises(ValueError, match="n_step"):
        NStepQueue(num_envs=1, n_step=0, gamma=0.9)
