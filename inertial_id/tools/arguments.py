"""Command-line conventions the ``inertial-id`` subcommands share: ``NAME=VALUE`` pairs, an
option's former name accepted silently, the recording a command reads (the positional
``BAG``, with ``--bag`` as its former spelling), and where Dask work runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from inertial_id.core.errors import InertialIdError, SampleError


def name_value_pair(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}") from None


def former_flag(parser: argparse.ArgumentParser, flag: str, action: argparse.Action) -> None:
    """Accept ``flag``, a former name of ``action``'s option, as that option; it is not
    shown in ``--help``."""
    parser.add_argument(flag, dest=action.dest, type=action.type, nargs=action.nargs,
                        default=action.default, help=argparse.SUPPRESS)


def add_bag(parser: argparse.ArgumentParser, text: str) -> None:
    """The recording a command reads, given as replay and play take theirs: the positional
    ``BAG`` (``text`` describes it); ``--bag BAG``, its former spelling, is accepted until
    the next release (so its help says). Read it with :func:`given_bag`."""
    parser.add_argument("bag", nargs="?", type=Path, metavar="BAG", help=text)
    parser.add_argument("--bag", dest="former_bag", type=Path, metavar="BAG",
                        help="deprecated, accepted until the next release: give BAG without "
                        "--bag")


def given_bag(args: argparse.Namespace) -> Path | None:
    """The bag of :func:`add_bag`, either spelling; ``None`` without one."""
    if args.bag is not None and args.former_bag is not None:
        raise SampleError("give the BAG once (--bag is its former spelling)")
    return args.bag if args.bag is not None else args.former_bag


def required_bag(args: argparse.Namespace) -> Path:
    """The bag of a command that cannot do without one (:func:`add_bag`)."""
    bag = given_bag(args)
    if bag is None:
        raise SampleError("give the BAG to read")
    return bag


def add_engine(parser: argparse.ArgumentParser) -> None:
    """Where ``batch`` and ``tune`` run their replays: ``--workers`` processes of a local Dask
    cluster or an existing cluster's ``--scheduler`` (one or the other)."""
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--workers", type=int, metavar="N",
                        help="processes of the local Dask cluster (default: the CPU count)")
    engine.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                        help="the scheduler of an existing Dask cluster")


def check_writable(path: Path, directory: bool = False) -> None:
    """Fail before a long replay, not after: ``path`` can be created as a file (or, with
    ``directory``, as a directory) by this user. Raises :class:`InertialIdError` saying why."""
    path = Path(path)
    kind = "directory" if directory else "file"
    if path.exists() and path.is_dir() != directory:
        raise InertialIdError(f"{path}: exists and is not a {kind}")
    parent = path if directory and path.exists() else path.parent
    existing = parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InertialIdError(f"{path}: cannot create it, {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK) or (
            path.exists() and not os.access(path, os.W_OK)):
        raise InertialIdError(f"{path}: not writable")
