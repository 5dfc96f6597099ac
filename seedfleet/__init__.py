"""seedfleet, the one installed package. In the repository its sub-packages are top-level
folders (pyproject.toml maps them): `server` (the learner), `actor_client` (thin actors),
`algorithms`, `deploy` (the command, images, fleets) and `bench`.

This folder is the TensorFlow-free core under both sides: the wire (`wire`, and `v1`,
generated from proto/ by `make proto`), env families (`envs`), thread and process
helpers. The learner and the actors both import it, never each other."""
