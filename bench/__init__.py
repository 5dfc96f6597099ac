"""seedfleet bench: frames/s measured beside the env, inference and training ceilings."""
