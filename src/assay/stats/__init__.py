"""Statistics as pure functions: standard errors, online and paired estimates; no I/O."""
