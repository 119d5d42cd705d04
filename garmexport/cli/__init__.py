"""The ``garmexport`` command: the argparse front (``main``), one module per command."""
