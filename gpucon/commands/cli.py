"""gpucon, the console for GPU inference fleets: the TUI, the demo, snapshots, config checks
and action verbs.

Each subcommand lives in its own module exposing ``add_arguments(parser, command_name)`` and
``run(args) -> int``. Those modules import only the standard library at module level; heavy
imports (Textual, the Kubernetes client, ...) happen inside ``run``, so building the parser
stays cheap and ``gpucon demo`` never pays for the Kubernetes client's import.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from types import ModuleType

# name -> (module, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "live": ("gpucon.commands.console", "the console on the fleet your config names (the default)"),
    "demo": ("gpucon.commands.console", "the console on the built-in simulated fleet"),
    "serve": ("gpucon.commands.serve", "the NOC wall in a browser, read-only (textual-serve)"),
    "snapshot": ("gpucon.commands.snapshot", "print one snapshot of the fleet (--json)"),
    "record": ("gpucon.commands.record", "record the fleet to a file, without a terminal"),
    "replay": ("gpucon.commands.replay", "replay a recording in the console (read-only)"),
    "config": ("gpucon.commands.config_check", "check the config and print what would be used"),
    "drain": ("gpucon.commands.actions", "drain a backend (stop sending it new work)"),
    "undrain": ("gpucon.commands.actions", "return a drained backend to service"),
    "rebalance": ("gpucon.commands.actions", "propose and apply scheduler weights"),
    "reslice": ("gpucon.commands.actions", "cut a GPU into a new MIG layout (type its name)"),
    "probe": ("gpucon.commands.probe", "run a bounded load probe"),
    "mps-restart": ("gpucon.commands.actions", "restart CUDA MPS on a GPU or VM (drain first)"),
    "audit": ("gpucon.commands.actions", "show the audit log"),
    "scheduler": ("gpucon.commands.lab", "run the reference Redis-Streams scheduler"),
    "backend": ("gpucon.commands.lab", "run a KServe v2 test backend server"),
    "lab": ("gpucon.commands.lab", "start a local real stack on loopback"),
}


def command_module(module_name: str) -> ModuleType:
    """A subcommand's module, by plain imports (the import graph and its linter see them)."""
    if module_name == "gpucon.commands.console":
        from gpucon.commands import console

        return console
    if module_name == "gpucon.commands.serve":
        from gpucon.commands import serve

        return serve
    if module_name == "gpucon.commands.snapshot":
        from gpucon.commands import snapshot

        return snapshot
    if module_name == "gpucon.commands.record":
        from gpucon.commands import record

        return record
    if module_name == "gpucon.commands.replay":
        from gpucon.commands import replay

        return replay
    if module_name == "gpucon.commands.config_check":
        from gpucon.commands import config_check

        return config_check
    if module_name == "gpucon.commands.actions":
        from gpucon.commands import actions

        return actions
    if module_name == "gpucon.commands.probe":
        from gpucon.commands import probe

        return probe
    from gpucon.commands import lab

    return lab


# which subcommands each common option means something to (the lab's servers read no config;
# only the console has a screen to theme or hang on a wall)
CONFIG_COMMANDS = frozenset(
    {"live", "demo", "serve", "snapshot", "config", "drain", "undrain", "rebalance", "reslice"}
    | {"mps-restart", "probe", "audit", "record", "replay"}
)
READ_ONLY_COMMANDS = frozenset(
    {"live", "demo", "config", "drain", "undrain", "rebalance", "reslice", "mps-restart"}
    | {"probe"}
)
SCREEN_COMMANDS = frozenset({"live", "demo", "replay"})


def add_common_arguments(
    parser: argparse.ArgumentParser, *, suppress: bool = False, command: str | None = None
) -> None:
    """Options accepted before or after the subcommand (``gpucon --read-only demo`` too); a
    subcommand gets only those that mean something to it (``command``; None: all of them)."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    if command is None or command in CONFIG_COMMANDS:
        parser.add_argument(
            "--config",
            metavar="PATH",
            default=default(None),
            help="config file (default: XDG path)",
        )
        parser.add_argument(
            "--fleet", metavar="NAME", default=default(None), help="which configured fleet to open"
        )
    if command is None or command in READ_ONLY_COMMANDS:
        parser.add_argument(
            "--read-only",
            action="store_true",
            default=default(False),
            help="no action can write (controls are never built)",
        )
    if command is None or command in SCREEN_COMMANDS:
        parser.add_argument(
            "--noc",
            action="store_true",
            default=default(False),
            help="wall screen: read-only, high contrast, pages cycle",
        )
        parser.add_argument(
            "--theme",
            metavar="NAME",
            default=default(None),
            help="gpucon-dark, gpucon-light, gpucon-noc",
        )


# options that take a value: the token after them is never the subcommand (the console's own
# are here too: ``gpucon --noc --page-seconds 3`` is the live console's)
_VALUED_OPTIONS = frozenset(
    {"--config", "--fleet", "--theme", "--refresh", "--page-seconds", "--seed", "--scenario"}
    | {"--size", "--record", "--from", "--at", "--speed"}
)


def command_index(argv: Sequence[str]) -> int | None:
    """Where in ``argv`` the subcommand is (the first word that is not an option or its value)."""
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
        elif token == "--":
            return i + 1 if i + 1 < len(argv) else None
        elif token.startswith("-"):
            skip = token in _VALUED_OPTIONS
        else:
            return i
    return None


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (the first word that is not an option or its value)."""
    index = command_index(argv)
    return None if index is None else argv[index]


_OPTION_COMMANDS = {
    "--config": CONFIG_COMMANDS,
    "--fleet": CONFIG_COMMANDS,
    "--read-only": READ_ONLY_COMMANDS,
    "--noc": SCREEN_COMMANDS,
    "--theme": SCREEN_COMMANDS,
}


def leading_options_first(argv: list[str]) -> list[str]:
    """``gpucon [options] COMMAND [more]`` as ``gpucon COMMAND [options] [more]``: options
    before the subcommand are its own (``gpucon --noc --page-seconds 3 demo``). A common option
    that means nothing to the subcommand is a usage error that says so."""
    index = command_index(argv)
    if not index or "--" in argv[:index] or argv[index] not in COMMANDS:
        return argv
    command = argv[index]
    for token in argv[:index]:
        commands = _OPTION_COMMANDS.get(token.split("=", 1)[0])
        if commands is not None and command not in commands:
            print(f"gpucon: error: {token} means nothing to 'gpucon {command}'", file=sys.stderr)
            raise SystemExit(2)
    return [command, *argv[:index], *argv[index + 1 :]]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``argv``, only the named subcommand's module is imported.

    ``gpucon demo`` then never imports the action, lab or snapshot modules just to build
    their options (``gpucon --help`` lists every command from COMMANDS alone).
    """
    only = None if argv is None else chosen_command(argv)
    # a known command and no help asked for: the other commands are neither parsed nor listed
    # (``gpucon demo`` builds one subparser, not twelve)
    alone = only in COMMANDS and not {"-h", "--help"} & set(argv or ())
    description = " ".join(__doc__.split("\n\n")[0].split())
    parser = argparse.ArgumentParser(prog="gpucon", description=description)
    add_common_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        if argv is not None and name != only:
            if not alone:
                sub.add_parser(name, help=help_text)  # named in --help; never parsed this run
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(command=name, module=module_name)
        add_common_arguments(p, suppress=True, command=name)
        command_module(module_name).add_arguments(p, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # building the parser and importing the command allocate many objects and free none: the
    # cyclic garbage collector is off meanwhile (the console keeps it off until its first
    # frame: gpucon.commands.console.run)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        args_list = list(sys.argv[1:] if argv is None else argv)
        command = chosen_command(args_list)
        if command is None and not {"-h", "--help"} & set(args_list):
            # no subcommand: ``gpucon [options]`` is ``gpucon live [options]``, live's own
            # options (--refresh, --page-seconds) included
            args_list.insert(0, "live")
        else:
            args_list = leading_options_first(args_list)
        parser = build_parser(args_list)
        args = parser.parse_args(args_list)
        module = command_module(args.module)
        # the config's records and the alert model under them: long-lived objects, imported
        # with the collector off like the rest (a few milliseconds of collections otherwise)
        from gpucon.config import ConfigError
    finally:
        if gc_was_on:
            gc.enable()

    try:
        result: int = module.run(args)
    except ConfigError as exc:  # a missing or bad config is a message, never a traceback
        print(f"gpucon: {exc}", file=sys.stderr)  # ConfigError's message is already redacted
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
