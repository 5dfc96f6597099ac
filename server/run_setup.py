"""What a checkpoint says of the run that wrote it, read without TensorFlow.

Each checkpoint directory `<logdir>/checkpoints/ckpt-<unix ms>-f<frames>/` ends with
`state.json` (server/checkpoint.py writes it last): its format, the size of every other file,
the counters, and the run setup (`RunSetup`: env, algo, network, the agent's and the learner's
settings). The learner refuses a log dir whose newest readable checkpoint was written for
another env, algo or network, or with other settings that change what the network's inputs
or outputs mean (`INPUT_DEFINING`, `OUTPUT_DEFINING`); `seedfleet learner` and `seedfleet run`
make that refusal before TensorFlow loads (`refuse_another_setup`), as the restore would
make it after.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import AlgoConfig, Algorithm, algorithm
from seedfleet.errors import UsageError
from seedfleet.server.config import LearnerConfig
from seedfleet.settings import config_from

log = logging.getLogger("seedfleet.checkpoint")

FORMAT = 1
PREFIX = "ckpt-"
STATE = "state.json"
INPUT_DEFINING = ("normalize_observations",)  # learner settings that change what the network's inputs mean
OUTPUT_DEFINING = ("normalize_values",)  # agent settings that change what the network's outputs mean (PopArt's
# value head outputs the standardised value, a plain head the value itself)


class CheckpointMismatch(UsageError):
    """The newest checkpoint was written for another env, algo or network."""


def _plain(value):
    """Tuples as lists, as JSON reads them back (so a fresh setup compares equal to a saved one)."""
    return json.loads(json.dumps(value, default=str))


NETWORK_DEFAULTS = _plain(dataclasses.asdict(NetworkConfig()))


def _shape_defining(value):
    """A setup entry without what may differ between runs of the same network (the torso's
    compute dtype, which follows the machine, and whether XLA compiles the training step)."""
    free = ("compute_dtype", "jit_compile")
    return {k: v for k, v in value.items() if k not in free} if isinstance(value, dict) else value


def _config(cls, saved: dict):
    """`cls` from its saved fields: lists back to tuples; fields this version no longer has are
    dropped with a warning (a field it added takes its default)."""
    dropped = sorted(set(saved) - {f.name for f in dataclasses.fields(cls)})
    if dropped:
        log.warning("%s: ignoring saved settings this version does not have: %s", cls.__name__, ", ".join(dropped))
    return config_from(cls, saved)


@dataclass(frozen=True)
class RunSetup:
    """What a checkpoint records of its run: enough to rebuild the agent (seedfleet eval,
    export) and to refuse restoring into a learner of another env, algo or network (the
    agent's hyperparameters may change between runs). Written, compared and read back here."""

    env: str
    algo: str
    network: dict
    agent: dict
    learner: dict

    @classmethod
    def of(cls, config: LearnerConfig, algo_config: AlgoConfig, network: NetworkConfig) -> RunSetup:
        return cls(config.env, config.algo, _plain(dataclasses.asdict(network)),
                   _plain(dataclasses.asdict(algo_config)), _plain(dataclasses.asdict(config)))

    @classmethod
    def from_state(cls, state: dict) -> RunSetup:
        setup = state["setup"]
        return cls(**{f.name: setup[f.name] for f in dataclasses.fields(cls)})

    def to_state(self) -> dict:
        return dataclasses.asdict(self)

    def mismatch(self, saved: RunSetup) -> str | None:
        """Why a checkpoint of `saved` cannot be restored into this run, or None."""
        for key in ("env", "algo", "network"):
            theirs, ours = getattr(saved, key), getattr(self, key)
            if key == "network":  # a field added since the checkpoint was written reads as its default
                theirs, ours = {**NETWORK_DEFAULTS, **theirs}, {**NETWORK_DEFAULTS, **ours}
            if _shape_defining(theirs) != _shape_defining(ours):
                return f"were written for {key} {theirs}, this learner runs {ours}"
        for part, keys in (("learner", INPUT_DEFINING), ("agent", OUTPUT_DEFINING)):
            for key in keys:
                theirs, ours = getattr(saved, part).get(key, False), getattr(self, part).get(key, False)
                if theirs != ours:
                    return f"were written with {key} {theirs}, this learner runs {ours}"
        return None

    def refuse(self, directory: Path, state: dict) -> None:
        """Raises CheckpointMismatch if the checkpoint of `state` (in `directory`) is of another setup."""
        reason = self.mismatch(RunSetup.from_state(state))
        if reason:
            raise CheckpointMismatch(f"the checkpoints in {directory} {reason}: pass --fresh, or another --logdir")

    def configs(self) -> tuple[LearnerConfig, Algorithm, AlgoConfig, NetworkConfig]:
        """The learner's config, the algorithm's registry entry (by the name recorded) and the
        agent's and the network's configs the run was made with."""
        algo = algorithm(self.algo)
        return (_config(LearnerConfig, self.learner), algo, _config(algo.config_class, self.agent),
                _config(NetworkConfig, self.network))


def newest_first(directory: Path) -> list[Path]:
    """The complete checkpoint directories in `directory`, newest (last written) first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX)]

    def written_at(path: Path) -> int:
        millis = path.name[len(PREFIX):].split("-", 1)[0]
        return int(millis) if millis.isdigit() else -1

    return sorted(found, key=written_at, reverse=True)


def read_state(path: Path) -> dict:
    """A checkpoint's state.json, after checking its format and the sizes of its other files."""
    state = json.loads((path / STATE).read_text())
    if state.get("format") != FORMAT:
        raise ValueError(f"format {state.get('format')!r}, this learner reads format {FORMAT}")
    for name, size in state["files"].items():
        actual = (path / name).stat().st_size
        if actual != size:
            raise ValueError(f"{name} has {actual} bytes, {size} were written")
    return state


def refuse_another_setup(config: LearnerConfig, algo_config: AlgoConfig, network: NetworkConfig) -> None:
    """What a restore would refuse, refused first: the newest checkpoint whose state reads (the
    one a restore checks) written for another env, algo or network. Nothing with `--fresh`."""
    if config.fresh:
        return
    directory = config.log_dir() / "checkpoints"
    for path in newest_first(directory):
        try:
            state = read_state(path)
        except (OSError, ValueError):
            continue  # damaged: the restore skips it with a warning
        return RunSetup.of(config, algo_config, network).refuse(directory, state)
