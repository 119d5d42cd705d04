"""``garmexport config``: print the effective configuration as TOML, secrets masked."""

from __future__ import annotations

import argparse

from garmexport.config import Config
from garmexport.config_load import describe


def main(args: argparse.Namespace, config: Config) -> int:
    print(describe(config), end="")
    return 0
