"""Command-line options the benchmarks share."""

from __future__ import annotations

import argparse
from typing import Any

import yaml


def add_solver_option(parser: argparse.ArgumentParser) -> None:
    """``--solver NAME=VALUE`` (repeatable): a solver parameter for the bench's runs."""
    parser.add_argument("--solver", action="append", default=[], metavar="NAME=VALUE",
                        help="a solver parameter for every run (YAML value; repeatable)")


def solver_values(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The ``--solver`` assignments as ``{name: YAML-parsed value}``."""
    values = {}
    for text in args.solver:
        name, sep, value = text.partition("=")
        if not (sep and name):
            parser.error(f"--solver takes NAME=VALUE, got {text!r}")
        values[name] = yaml.safe_load(value)
    return values
