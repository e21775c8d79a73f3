"""Subcommands of ``kadmit``: each module here exposes ``register(subparsers)``."""
