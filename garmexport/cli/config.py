"""``garmexport config``: print the effective configuration as TOML, secrets masked."""

from __future__ import annotations

import argparse

from garmexport.config import Config


def main(args: argparse.Namespace, config: Config) -> int:
    print(config.describe(), end="")
    return 0
