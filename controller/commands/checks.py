"""``kadmit checks``: run admission-check plugins against any cluster that serves the Kueue API.

``kadmit checks run --enable NAME`` is a complete external admission-check controller, as Kueue's
contract defines one: beside an upstream Kueue installation (kadmit itself runs the installed
plugins), it keeps the AdmissionChecks of the enabled plugins ``Active`` and writes their
verdicts into ``Workload.status.admissionChecks``. ``kadmit checks list`` shows the installed
plugins.
"""

from __future__ import annotations

import logging
from typing import Any

from kadmit.controller.cli import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CommandError,
    add_command,
    add_log_level_argument,
    run_async,
)
from kadmit.controller.defaults import DEFAULT_NAMESPACE

# ``kadmit --help`` imports this module: what the checks run on is imported where it runs
# (kadmit.controller.checks_service).


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checks", help="admission-check plugins: list them, or run them as a check controller",
        description=__doc__,
    )
    sub = parser.add_subparsers(dest="checks_command", metavar="ACTION")
    sub.required = True
    add_command(sub, "list", run_list, help="show the installed admission-check plugins")
    run = add_command(sub, "run", run_checks, help="run enabled plugins against a cluster until interrupted")
    run.add_argument("--enable", "-e", action="append", default=[], metavar="NAME",
                     help="a plugin to run: an entry-point name of group kadmit.checks, or module:Class "
                          "(repeat for several)")
    run.add_argument("--kubeconfig", metavar="PATH",
                     help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    run.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    run.add_argument("--config", metavar="FILE",
                     help="a Kueue Configuration file whose settings the plugins read "
                          "(e.g. namespace and multiKueue for the multikueue check)")
    run.add_argument("--max-concurrency", type=int, metavar="N",
                     help="workloads evaluated at once (default 32)")
    run.add_argument("--call-timeout", type=float, default=10.0, metavar="SECONDS",
                     help="time a plugin may take for one verdict before it counts as Pending (default 10)")
    run.add_argument("--resync-period", type=float, default=300.0, metavar="SECONDS",
                     help="re-evaluate everything this often, whatever the events (default 300)")
    run.add_argument("--leader-elect", action="store_true",
                     help="act only while holding a Lease, so that several replicas can run (one acts)")
    run.add_argument("--leader-election-namespace", default=DEFAULT_NAMESPACE, metavar="NAMESPACE",
                     help=f"namespace of the Lease (default {DEFAULT_NAMESPACE})")
    run.add_argument("--leader-election-id", default="kadmit-checks", metavar="NAME",
                     help="name of the Lease (default kadmit-checks)")
    run.add_argument("--metrics-bind-address", default="0", metavar="ADDRESS",
                     help="serve Prometheus metrics at http://ADDRESS/metrics, e.g. :8080 (default 0: off)")
    add_log_level_argument(run, logs="logs are lines of text on stderr")


def run_list(args: Any) -> int:
    from kadmit.checks.discovery import PluginError, available, load

    installed = available()
    if not installed:
        print("no admission-check plugins installed (entry-point group kadmit.checks)")
        return 0
    for name in sorted(installed):
        try:
            plugin = load(name)
            print(f"{name}\t{plugin.controller_name}\t{installed[name].value}")
        except PluginError as exc:
            print(f"{name}\t(broken: {exc})\t{installed[name].value}")
    return 0


def run_checks(args: Any) -> int:
    from kadmit.checks.discovery import PluginError, available, load_all
    from kadmit.checks.metrics import CheckMetrics
    from kadmit.checks.runner import DEFAULT_MAX_CONCURRENCY
    from kadmit.controller.config import ConfigError
    from kadmit.controller.config import load as load_configuration

    if not args.enable:
        known = ", ".join(sorted(available())) or "none installed"
        raise CommandError(f"no check enabled: pass --enable NAME (available: {known})", EXIT_USAGE)
    if args.max_concurrency is None:
        args.max_concurrency = DEFAULT_MAX_CONCURRENCY
    if args.max_concurrency < 1:
        raise CommandError("--max-concurrency must be at least 1", EXIT_USAGE)
    if args.call_timeout <= 0 or args.resync_period <= 0:
        raise CommandError("--call-timeout and --resync-period must be positive", EXIT_USAGE)
    try:
        configuration = load_configuration(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    document = configuration.document
    metrics = CheckMetrics()
    try:
        plugins = load_all(args.enable, document, metrics.registry)
    except PluginError as exc:
        # A name that is no plugin (unknown, not a plugin, or two claiming one controller) is the
        # command line's mistake; a plugin that raised while imported, built or configured is not.
        raise CommandError(str(exc), EXIT_FAILURE if exc.__context__ else EXIT_USAGE) from None
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kadmit.controller.checks_service import run_service

    run_async(run_service(args, plugins, metrics, configuration.client_rate_limiter()))
    return 0
