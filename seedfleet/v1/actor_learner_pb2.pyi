from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActorMessage(_message.Message):
    __slots__ = ("hello", "steps")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    steps: Steps
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., steps: _Optional[_Union[Steps, _Mapping]] = ...) -> None: ...

class LearnerMessage(_message.Message):
    __slots__ = ("config", "actions")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    config: EnvConfig
    actions: Actions
    def __init__(self, config: _Optional[_Union[EnvConfig, _Mapping]] = ..., actions: _Optional[_Union[Actions, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("run_id", "num_envs", "protocol_version", "evaluation")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_ENVS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    num_envs: int
    protocol_version: int
    evaluation: bool
    def __init__(self, run_id: _Optional[int] = ..., num_envs: _Optional[int] = ..., protocol_version: _Optional[int] = ..., evaluation: _Optional[bool] = ...) -> None: ...

class ObservationSpec(_message.Message):
    __slots__ = ("dtype", "shape")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class AtariPreprocessing(_message.Message):
    __slots__ = ("frame_skip", "image_size", "noop_max", "repeat_action_probability", "max_frames_per_episode", "full_action_space", "game")
    FRAME_SKIP_FIELD_NUMBER: _ClassVar[int]
    IMAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    NOOP_MAX_FIELD_NUMBER: _ClassVar[int]
    REPEAT_ACTION_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAMES_PER_EPISODE_FIELD_NUMBER: _ClassVar[int]
    FULL_ACTION_SPACE_FIELD_NUMBER: _ClassVar[int]
    GAME_FIELD_NUMBER: _ClassVar[int]
    frame_skip: int
    image_size: int
    noop_max: int
    repeat_action_probability: float
    max_frames_per_episode: int
    full_action_space: bool
    game: str
    def __init__(self, frame_skip: _Optional[int] = ..., image_size: _Optional[int] = ..., noop_max: _Optional[int] = ..., repeat_action_probability: _Optional[float] = ..., max_frames_per_episode: _Optional[int] = ..., full_action_space: _Optional[bool] = ..., game: _Optional[str] = ...) -> None: ...

class EnvConfig(_message.Message):
    __slots__ = ("env_id", "env_ids", "seed", "observation", "num_actions", "box_actions", "family", "atari", "settings_json")
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    ENV_IDS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    NUM_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    BOX_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    ATARI_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_JSON_FIELD_NUMBER: _ClassVar[int]
    env_id: str
    env_ids: _containers.RepeatedScalarFieldContainer[int]
    seed: int
    observation: ObservationSpec
    num_actions: int
    box_actions: BoxActions
    family: str
    atari: AtariPreprocessing
    settings_json: str
    def __init__(self, env_id: _Optional[str] = ..., env_ids: _Optional[_Iterable[int]] = ..., seed: _Optional[int] = ..., observation: _Optional[_Union[ObservationSpec, _Mapping]] = ..., num_actions: _Optional[int] = ..., box_actions: _Optional[_Union[BoxActions, _Mapping]] = ..., family: _Optional[str] = ..., atari: _Optional[_Union[AtariPreprocessing, _Mapping]] = ..., settings_json: _Optional[str] = ...) -> None: ...

class BoxActions(_message.Message):
    __slots__ = ("shape", "low", "high")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    low: _containers.RepeatedScalarFieldContainer[float]
    high: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., low: _Optional[_Iterable[float]] = ..., high: _Optional[_Iterable[float]] = ...) -> None: ...

class Steps(_message.Message):
    __slots__ = ("env_ids", "observations", "rewards", "terminated", "truncated", "first", "life_lost", "actions_read")
    ENV_IDS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LIFE_LOST_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_READ_FIELD_NUMBER: _ClassVar[int]
    env_ids: bytes
    observations: bytes
    rewards: bytes
    terminated: bytes
    truncated: bytes
    first: bytes
    life_lost: bytes
    actions_read: int
    def __init__(self, env_ids: _Optional[bytes] = ..., observations: _Optional[bytes] = ..., rewards: _Optional[bytes] = ..., terminated: _Optional[bytes] = ..., truncated: _Optional[bytes] = ..., first: _Optional[bytes] = ..., life_lost: _Optional[bytes] = ..., actions_read: _Optional[int] = ...) -> None: ...

class Actions(_message.Message):
    __slots__ = ("actions",)
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    actions: bytes
    def __init__(self, actions: _Optional[bytes] = ...) -> None: ...
