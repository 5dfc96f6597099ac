"""Learning from frames: a task that needs the learner's frame stack, and acting and
training that see the same inputs.

MovingDot (seedfleet/envs/moving_dot.py) pays for naming the direction a dot moves in: one
frame cannot tell it, two can. The learner's own path (EnvSlots, InferenceEngine, the
Nature torso, frame stacking, V-trace) must solve it, and must fail it without the stack.
"""

import numpy as np
import pytest
import tensorflow as tf
from in_process import train

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.envs.moving_dot import MovingDot

DOT = "seedfleet/MovingDot-v0"
OPTIMAL = MovingDot().optimal_return  # 15.5: every step right but the first guess
ONE_FRAME_BEST = 8.0  # half the 16 steps, in expectation


def dot_agent(frame_stack: int, lstm_size: int = 0, **config) -> ImpalaAgent:
    tf.random.set_seed(0)
    settings = dict(unroll_length=8, batch_size=8, learning_rate=3e-3)
    settings.update(config)
    return ImpalaAgent(ImpalaConfig(**settings), NetworkConfig(frame_stack=frame_stack, lstm_size=lstm_size),
                       AgentContext((36, 36), np.dtype(np.uint8), ActionSpec.discrete(2), seed=0))


STACKED_SOLVES_BY = 40_000  # env steps the stacked agent took to the stop (seeds 0 and 1, 16 or 32 envs)


def test_stacked_frames_solve_moving_dot():
    returns, steps = train(dot_agent(frame_stack=4), DOT, 32, 4 * STACKED_SOLVES_BY, stop_return=OPTIMAL - 1.0)
    assert np.mean(returns[-200:]) >= OPTIMAL - 1.0, f"mean return {np.mean(returns[-200:]):.2f} after {steps} steps"


def test_one_frame_cannot_solve_moving_dot():
    # as many steps as the stacked agent needed to solve it
    returns, _ = train(dot_agent(frame_stack=1), DOT, 32, STACKED_SOLVES_BY)
    assert np.mean(returns[-200:]) < ONE_FRAME_BEST + 1.0


@pytest.mark.parametrize("lstm_size", [0, 16])
def test_trainer_recomputes_the_behaviour_logits(lstm_size):
    """At equal parameters the logits the loss recomputes from an unroll (its stored state,
    its observations, its `first` flags) equal those the actors acted with: log rho = 0.

    The policy head is scaled up so the logits differ strongly from step to step: a frame
    stacked one step off, or a state from the wrong row, would show."""
    agent = dot_agent(frame_stack=4, lstm_size=lstm_size, unroll_length=20)
    w = agent.net.policy.w
    w.assign(tf.random.stateless_normal(w.shape, [1, 2]) * 30.0)
    batches = []
    train(agent, DOT, 8, 8 * 60, on_batch=batches.append)
    assert batches
    for batch in batches:
        obs = tf.transpose(batch.observation, [1, 0, 2, 3])
        first = tf.transpose(batch.first, [1, 0])
        logits, _, _ = agent.net(obs, first, batch.state)
        behaviour = np.transpose(batch.extras["policy"], [1, 0, 2])
        assert np.ptp(behaviour) > 1.0  # the test can see a mismatch
        log_softmax = tf.nn.log_softmax
        np.testing.assert_allclose(log_softmax(logits).numpy(), log_softmax(behaviour).numpy(), atol=1e-4)
        # the same unroll read one row late is far off: the check above is not vacuous
        late, _, _ = agent.net(tf.roll(obs, 1, axis=0), first, batch.state)
        assert np.abs(log_softmax(late).numpy() - log_softmax(behaviour).numpy()).max() > 0.1
