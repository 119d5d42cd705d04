"""One instance with several readers (``actors.parallelism`` > 1): the supervisor process
(``supervisor``) and the rules it follows (``shares``: what each reader gets, what the
instance's exit code is)."""
