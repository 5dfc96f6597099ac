"""The network's settings: one dataclass, every field a flag. TensorFlow-free, so the CLI
reads it (and answers `--help`) without loading TensorFlow; algorithms/networks.py builds from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NetworkConfig:
    torso: str = "auto"  # auto | mlp | nature | nature_half | impala_shallow | minatar | pool (auto: mlp for
    # vectors; images: nature from 36 pixels a side, minatar below; pool: next to free, for measuring the learner)
    mlp_sizes: tuple[int, ...] = (64, 64)  # hidden layers of the mlp torso
    activation: str = "relu"  # the mlp torso's: relu | tanh (PPO's MuJoCo setups: tanh)
    dense_init: str = "orthogonal"  # mlp, conv, IQN/QR-DQN and SAC head layers: orthogonal | fan_in_uniform
    # (PyTorch's) | variance_scaling (Dopamine's: U(+-sqrt(sqrt(3) / fan_in)), zero biases)
    shared_torso: bool = True  # actor-critic: the value reads the policy's torso; false: a torso of its own
    initial_log_std: float = 0.0  # Box actions: the Gaussian's log std at the start (the same in every state)
    conv_padding: str = "valid"  # conv torsos: valid (whole windows; Nature's 7x7 last map) | same (zero
    # borders, ceil(n / stride) outputs a side; Dopamine's networks, 11x11 last map on 84x84 frames)
    layer_norm: bool = False  # conv and mlp torsos: layer normalisation before each activation (PQN's network)
    conv_norm: str = "pixel"  # with --layer-norm, a conv's output over: pixel (each pixel's channels) | map (all)
    feature_norm: bool = False  # conv torsos: layer normalisation of the dense feature layer alone, before its ReLU
    dense_units: int = 0  # conv torsos: units of the dense layer after the convs (0: the torso's own, e.g. 256 shallow)
    # conv torsos of actor-critic agents: each input pixel standardised by its running mean and std over the
    # frames trained on, clipped to [-5, 5] (algorithms/pixel_normalization.py; Sample Factory's normalize_input)
    pixel_norm: bool = False
    lstm_size: int = 0  # LSTM core size; 0: none for vtrace; for r2d2 512 (Atari frames), 128 (small images), 64
    frame_stack: int = 0  # frames stacked on the learner (0: 4 for [H, W] frames, 1 for [H, W, C] and vectors)
    compute_dtype: str = "auto"  # conv torso arithmetic: float32, bfloat16, or auto (bfloat16 on CPUs with bf16 units)
    jit_compile: bool = True  # compile the training step with XLA (1.4x on an AVX2 CPU; auto's bfloat16 leaves it off)
