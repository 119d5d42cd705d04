"""The commit protocol's rules: standard library only, no clock, no I/O."""
