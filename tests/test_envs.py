"""Env families: which family claims an id, Atari preprocessing settings, one frame per step,
explicit episode starts."""

import numpy as np
import pytest

from seedfleet.envs import family_for, family_named, make_envs, make_envs_from


def atari_settings(env_id):
    return family_named("ale").settings(env_id)


def test_atari_ids_keep_their_semantics():
    v5 = atari_settings("ALE/Pong-v5")
    assert v5.game == "pong" and v5.repeat_action_probability == 0.25
    assert v5.frame_skip == 4 and v5.image_size == 84 and not v5.full_action_space
    assert atari_settings("PongNoFrameskip-v4").repeat_action_probability == 0.0


def test_each_id_goes_to_its_family():
    ids = ("ALE/Pong-v5", "PongNoFrameskip-v4", "MinAtar/Breakout-v1", "CartPole-v1", "seedfleet/MovingDot-v0")
    assert [family_for(i).name for i in ids] == ["ale", "ale", "minatar", "gymnasium", "gymnasium"]
    with pytest.raises(ValueError, match="NoSuchEnv"):
        make_envs("NoSuchEnv-v0", 1)


def test_atari_batch_sends_single_unclipped_frames():
    envs = make_envs("ALE/Breakout-v5", 2, threads=1)
    try:
        batch = envs.reset(seeds=[0, 1])
        assert batch.observations.shape == (2, 84, 84) and batch.observations.dtype == np.uint8
        assert batch.first.all()
        assert envs.actions.num_actions == 4 and envs.frame_skip == 4
        rewards = []
        for _ in range(300):  # FIRE and move: Breakout scores bricks worth more than 1 later on
            batch = envs.step(np.array([1, 3]))
            rewards.append(batch.rewards)
            assert not batch.first.any() or not (batch.terminated | batch.truncated)[batch.first].any()
        assert np.concatenate(rewards).max() >= 1.0
    finally:
        envs.close()


def random_play(env_id: str, steps: int):
    """Two envs of `env_id` under uniformly random actions: yields each step's batch."""
    envs = make_envs(env_id, 2, threads=1)
    try:
        envs.reset(seeds=[0, 1])
        rng = np.random.default_rng(0)
        for _ in range(steps):
            yield envs.step(envs.actions.random(rng, 2))
    finally:
        envs.close()


def test_atari_flags_lost_lives_and_the_game_goes_on():
    lost = games_over = 0
    for batch in random_play("ALE/Breakout-v5", 1500):
        assert not (batch.life_lost & batch.first).any()
        lost += int((batch.life_lost & ~batch.terminated).sum())  # a life, not the game
        games_over += int(batch.terminated.sum())
    assert lost >= 4 * games_over and lost >= 4  # Breakout has five lives per game


def test_pong_has_no_lives_to_lose_so_life_loss_terminal_changes_nothing_there():
    points = games_over = 0
    for batch in random_play("PongNoFrameskip-v4", 1200):  # a random agent loses 21-0 in about 800 steps
        assert not batch.life_lost.any()
        points += int((batch.rewards != 0).sum())
        games_over += int(batch.terminated.sum())
    assert games_over >= 1 and points >= 21  # points were lost, and no life with them


def test_autoreset_is_flagged_as_first_and_carries_no_reward():
    envs = make_envs("CartPole-v1", 4)
    try:
        batch = envs.reset(seeds=[0, 1, 2, 3])
        rng = np.random.default_rng(0)
        done_before = np.zeros(4, bool)
        seen_reset = 0
        for _ in range(200):
            batch = envs.step(rng.integers(0, 2, 4))
            np.testing.assert_array_equal(batch.first, done_before)
            assert (batch.rewards[batch.first] == 0).all()
            assert not (batch.terminated | batch.truncated)[batch.first].any()
            seen_reset += batch.first.sum()
            done_before = batch.terminated | batch.truncated
        assert seen_reset > 4
    finally:
        envs.close()


def test_atari_groups_alternate_and_each_env_opens_with_first():
    """With 2 groups every env's first observation is marked first, and an env's later
    `first` flags follow its own previous step's end, whichever group order ALE returns."""
    envs = make_envs("ALE/Pong-v5", 8, threads=1, groups=2)
    try:
        batch = envs.reset(seeds=list(range(8)))
        assert len(envs.ready) == 4 and batch.observations.shape == (4, 84, 84) and batch.first.all()
        seen = set(envs.ready.tolist())
        done = np.zeros(8, bool)
        rng = np.random.default_rng(0)
        for _ in range(400):
            batch = envs.step(envs.actions.random(rng, 4))
            ids = envs.ready
            assert len(ids) == 4 and len(set(ids.tolist())) == 4
            fresh = np.array([i not in seen for i in ids])
            np.testing.assert_array_equal(batch.first, fresh | done[ids])
            seen.update(ids.tolist())
            done[ids] = batch.terminated | batch.truncated
        assert seen == set(range(8))
    finally:
        envs.close()


def test_groups_need_equal_sizes_and_a_family_that_steps_them():
    with pytest.raises(ValueError, match="equal groups"):
        make_envs("ALE/Pong-v5", 6, threads=1, groups=4)
    with pytest.raises(ValueError, match="groups need a family"):
        family_named("gymnasium").make("CartPole-v1", None, 4, groups=2)
    envs = make_envs("CartPole-v1", 4, groups=2)  # as an actor asks: families that do not step groups step together
    try:
        assert envs.group_size == 4
    finally:
        envs.close()


def test_env_options_set_the_family_s_settings_over_the_id_s():
    """--env-options: ALE's full action set (18 actions, as the Machado-settings references play),
    sticky actions off; each option typed as its field; mistakes are one clear error."""
    from seedfleet.envs import check_env, describe
    from seedfleet.errors import UsageError

    minimal, _ = describe("ALE/Pong-v5", 0)
    full, _ = describe("ALE/Pong-v5", 0, "full_action_space=true, repeat_action_probability=0")
    assert (minimal.num_actions, full.num_actions) == (6, 18)
    assert full.atari.full_action_space and full.atari.repeat_action_probability == 0.0
    assert minimal.atari.repeat_action_probability == 0.25
    actor_side = make_envs_from(full, 2, threads=1)  # the actor builds what the options made
    try:
        assert actor_side.actions.num_actions == 18
    finally:
        actor_side.close()
    for options, message in (("full_action_space=maybe", "a bool is expected"),
                             ("sticky=0", "sticky is no setting of the ale family"),
                             ("full_action_space", "is not NAME=VALUE")):
        with pytest.raises(UsageError, match=message):
            check_env("ALE/Pong-v5", options)
    with pytest.raises(UsageError, match="the gymnasium family takes no options"):
        check_env("CartPole-v1", "full_action_space=true")
