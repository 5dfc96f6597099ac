"""Wire code generated from proto/ by `make proto`; the home of the seedfleet.v1 protocol."""
