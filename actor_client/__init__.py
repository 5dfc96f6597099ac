"""Thin actors: environment-only processes that stream observations to the learner.

Nothing here imports TensorFlow, the server or the algorithms.
"""
