"""APPO (Petrenko et al., 2020, Sample Factory): IMPALA's agent and V-trace targets, trained
the way PPO is, with several passes over each batch in minibatches under a clipped ratio."""
