"""IMPALA: V-trace, the loss, the agent (Espeholt et al., 2018)."""
