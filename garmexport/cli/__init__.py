"""The ``garmexport`` command: the argparse front (``main``) and one thin module per subcommand."""
