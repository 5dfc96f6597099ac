"""The TensorFlow-free core under both sides: the wire (`wire`, and `v1`, generated from
proto/ by `make proto`), env construction (`envs`, `extra_envs`), thread and process
helpers. The learner (`server`) and the actors (`actor_client`) both import it, never
each other."""
