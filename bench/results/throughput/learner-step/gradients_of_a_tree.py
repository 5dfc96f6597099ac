"""One learner step's gradients of the Breakout-v5 default from a given tree's code, on a saved batch
(BENCHMARKS.md, "Breakout-v5 to 5M at the faster step"). From the repository root:

    python bench/results/throughput/learner-step/gradients_of_a_tree.py ROOT OUT.npz \
        --env ALE/Breakout-v5 --algo appo --mode train_only --compute-dtype float32 --no-jit-compile

ROOT is a checkout (e.g. a worktree of 56407d8); its packages replace the installed tree's for this
process. The first run saves the batch to /tmp/equiv-batch.pkl and later runs read it, so every
tree sees the same batch; the initial weights are the seed's. OUT holds the gradients of the first
4 unrolls, then the weights; compare two with compare_gradients.py."""
import os
import pickle
import sys

import __editable___seedfleet_0_1_0_finder as finder

ROOT, OUT = sys.argv[1], sys.argv[2]
INSTALLED = os.path.dirname(finder.MAPPING["seedfleet"])
for package, path in list(finder.MAPPING.items()):
    finder.MAPPING[package] = path.replace(INSTALLED, ROOT)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import seedfleet.bench.run as run  # noqa: E402
from seedfleet.bench.phases import bench_agent, real_layout_batch  # noqa: E402
from seedfleet.deploy.cli import main  # noqa: E402

BATCH = "/tmp/equiv-batch.pkl"


def gradients(config, setup, workdir) -> dict:
    agent, env_config, _, device = bench_agent(setup)
    if os.path.exists(BATCH):
        with open(BATCH, "rb") as f:
            batch = pickle.load(f)
    else:
        batch = tf.nest.map_structure(np.asarray, real_layout_batch(agent, env_config, device))
        with open(BATCH, "wb") as f:
            pickle.dump(batch, f)
    minibatch = tf.nest.map_structure(lambda v: v[:4], batch)
    with tf.device(device):
        grads, metrics = agent._gradients(agent.devices.shard(minibatch))
    np.savez(OUT, *[g.numpy() for g in grads], *[v.numpy() for v in agent.net.trainable_variables])
    losses = {k: float(v) for k, v in metrics.items() if k.startswith("loss")}
    print("algorithms from", sys.modules["seedfleet.algorithms"].__path__, losses)
    return {}


run.measure = gradients
try:
    main(["bench", *sys.argv[3:]])
except SystemExit:
    pass
