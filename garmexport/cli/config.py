"""``garmexport config``: print the effective configuration as TOML, secrets masked."""

from __future__ import annotations

import argparse

from garmexport.settings.config import Config
from garmexport.settings.load import describe


def main(args: argparse.Namespace, config: Config) -> int:
    print(describe(config), end="")
    return 0
