"""Running observation normalisation and reward scaling, as PPO's MuJoCo setups use them
(CleanRL's ppo_continuous_action.py through gymnasium's NormalizeObservation and
NormalizeReward, Sample Factory's normalize_input and normalize_returns).

Both run on the learner's inference thread, before the agent acts (server/inference.py):

  * observations: o' = clip((o - mean) / sqrt(var + eps), -clip, clip), mean and var running
    over every observation a training env sent; the unroll keeps o' as it was acted on, so
    training sees what acting saw, whatever the statistics do next;
  * rewards: r' = clip(r / sqrt(Var[G] + eps), -clip, clip), G the discounted return each
    training env has run up so far in its episode (G_t = gamma G_{t-1} + r_t, 0 where an
    episode opens). Dividing by the spread of G keeps value targets near unit scale on any
    task; episode returns in the metrics stay the env's own.

Evaluation envs are normalised with the statistics but never update them, and no stream's
float observation beyond --max-abs-observation reaches them (server/actor_port.py closes it).
The statistics are kept in checkpoints (`state`, `restore`) and applied the same way by
`seedfleet eval` and in exported SavedModels (`ObservationNormalizer.apply`).
"""

from __future__ import annotations

import numpy as np

from seedfleet.errors import UsageError
from seedfleet.running_moments import merge_moments

EPSILON = 1e-8  # under the square root, as gymnasium's wrappers have it
CLIP = 10.0  # normalised observations and scaled rewards are clipped to [-CLIP, CLIP]


class RunningMeanStd:
    """Mean and (population) variance of every sample seen, merged a batch at a time
    (seedfleet/running_moments.py). Kept in float64. Before any sample: mean 0, variance 1
    (normalising is the identity).
    """

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 0

    def update(self, samples: np.ndarray) -> None:
        """Adds samples [n, *shape]."""
        n = len(samples)
        if not n:
            return
        samples = np.asarray(samples, np.float64)
        self.mean, self.var, self.count = merge_moments(self.mean, self.var, self.count, samples.mean(axis=0),
                                                        samples.var(axis=0), n)

    def state(self) -> dict:
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "count": self.count}

    def restore(self, state: dict) -> None:
        mean, var = np.asarray(state["mean"], np.float64), np.asarray(state["var"], np.float64)
        if mean.shape != self.mean.shape or var.shape != self.var.shape:
            raise ValueError(f"statistics of shape {mean.shape}, this learner's are {self.mean.shape}")
        self.mean, self.var, self.count = mean, var, int(state["count"])


class ObservationNormalizer:
    """o' = clip((o - mean) / sqrt(var + eps), -CLIP, CLIP) in float32, statistics over training envs."""

    def __init__(self, shape: tuple[int, ...]):
        self.stats = RunningMeanStd(tuple(shape))

    def __call__(self, observations: np.ndarray, update: np.ndarray) -> np.ndarray:
        """Adds the rows where `update` is set to the statistics, then normalises every row."""
        self.stats.update(observations[update])
        return self.apply(observations)

    def apply(self, observations: np.ndarray) -> np.ndarray:
        """Normalises with the statistics as they are (eval, export, evaluation envs)."""
        mean, scale = self.constants()
        return np.clip((np.asarray(observations, np.float32) - mean) * scale, -CLIP, CLIP)

    def constants(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, 1 / sqrt(var + eps)) in float32: what `apply` and a SavedModel compute with."""
        return self.stats.mean.astype(np.float32), (1.0 / np.sqrt(self.stats.var + EPSILON)).astype(np.float32)


class RewardScaler:
    """r' = clip(r / sqrt(Var[G] + eps), -CLIP, CLIP), G each env's discounted return so far."""

    def __init__(self, capacity: int, discount: float):
        self.discount = discount
        self.returns = np.zeros(capacity, np.float64)  # G of each env id's episode so far
        self.stats = RunningMeanStd()

    def __call__(self, env_ids: np.ndarray, rewards: np.ndarray, first: np.ndarray, update: np.ndarray) -> np.ndarray:
        returns = np.where(first, 0.0, self.returns[env_ids] * self.discount + rewards)
        self.returns[env_ids] = returns
        self.stats.update(returns[update])
        return np.clip(rewards / np.sqrt(self.stats.var + EPSILON), -CLIP, CLIP).astype(np.float32)

    def reset(self, lo: int, hi: int) -> None:
        self.returns[lo:hi] = 0.0


class Normalization:
    """The learner's optional observation normalisation and reward scaling, one object for
    inference, checkpoints and eval."""

    def __init__(self, observations: ObservationNormalizer | None = None, rewards: RewardScaler | None = None):
        self.observations = observations
        self.rewards = rewards

    def __bool__(self) -> bool:
        return self.observations is not None or self.rewards is not None

    def state(self) -> dict:
        """What a checkpoint keeps (JSON): the statistics, not the envs' running returns."""
        return {name: part.stats.state() for name, part in (("observations", self.observations),
                                                            ("rewards", self.rewards)) if part is not None}

    def restore(self, state: dict) -> None:
        """Takes a checkpoint's statistics; ValueError if they do not fit (another shape, or missing)."""
        for name, part in (("observations", self.observations), ("rewards", self.rewards)):
            if part is None:
                continue
            if name not in state:
                raise ValueError(f"the checkpoint has no {name} statistics")
            part.stats.restore(state[name])


def make_normalization(observations: bool, rewards: bool, env_id: str, obs_shape: tuple[int, ...],
                       obs_dtype: np.dtype, capacity: int, discount: float) -> Normalization:
    """The learner's normalisation as its flags ask (--normalize-observations, --scale-rewards);
    UsageError for observations that are not floats (frames and boards are scaled by the torso)."""
    if observations and not np.issubdtype(obs_dtype, np.floating):
        raise UsageError(f"--normalize-observations is for float observations; {env_id} sends {np.dtype(obs_dtype)} "
                         f"{list(obs_shape)}: pass --normalize-observations false")
    return Normalization(ObservationNormalizer(obs_shape) if observations else None,
                         RewardScaler(capacity, discount) if rewards else None)


def saved_observation_normalizer(obs_shape: tuple[int, ...], state: dict) -> ObservationNormalizer:
    """The observation statistics a checkpoint kept (its state.json's normalisation entry)."""
    normalizer = ObservationNormalizer(obs_shape)
    if "observations" not in state:
        raise ValueError("the checkpoint was written with --normalize-observations but has no statistics")
    normalizer.stats.restore(state["observations"])
    return normalizer
