"""``kadmit list|describe|stop|resume``: the queue CLI, in the spirit of Kueue's kueuectl.

    kadmit list clusterqueues|localqueues|workloads [-n NS | -A] [-o json|yaml]
    kadmit describe workload NAME [-n NS] [-o json|yaml]
    kadmit stop clusterqueue|localqueue NAME [--keep-already-running] [-n NS]
    kadmit stop workload NAME [-n NS]
    kadmit resume clusterqueue|localqueue|workload NAME [-n NS]

Every command works against any cluster through the kubeconfig (``--kubeconfig``,
``$KUBECONFIG``, ``~/.kube/config``; ``--context``), in the context's namespace unless ``-n``
says otherwise. The work is in :mod:`kadmit.controller.queuectl`, imported only when a command
runs (``kadmit --help`` stays fast).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from kadmit.controller.cli import CommandError, add_command, connect, run_async

QUEUE_KINDS = ["clusterqueue", "clusterqueues", "cq", "localqueue", "localqueues", "lq"]
ALL_KINDS = [*QUEUE_KINDS, "workload", "workloads", "wl"]
STATUSES = ["all", "pending", "quotareserved", "admitted", "finished"]


def _cluster_options(
    parser: argparse.ArgumentParser, *, namespaced: bool = True, all_namespaces: bool = False
) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    if namespaced:
        parser.add_argument("-n", "--namespace", help="namespace (default: the context's, else default)")
    if all_namespaces:
        parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def _output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=["json", "yaml"], help="print json or yaml for scripts")


def register(subparsers: Any) -> None:
    listing = add_command(
        subparsers, "list", run_list,
        help="list ClusterQueues, LocalQueues or Workloads with their counts and positions",
        description="List ClusterQueues, LocalQueues or Workloads. Workloads show their status and, when "
        "pending, their position (in the LocalQueue, the ClusterQueue in brackets; from 0, as the "
        "Visibility API counts) and why they wait.",
    )
    listing.add_argument("kind", choices=ALL_KINDS, metavar="{clusterqueues,localqueues,workloads}")
    _cluster_options(listing, all_namespaces=True)
    _output_option(listing)
    listing.add_argument("-l", "--selector", help="label selector, as kubectl's (e.g. team=a)")
    listing.add_argument("--field-selector", help="field selector, as kubectl's (e.g. metadata.name=x)")
    listing.add_argument(
        "--active", choices=["true", "false"], help="clusterqueues: only the active (or inactive) ones"
    )
    listing.add_argument(
        "--for",
        dest="owned_by",
        metavar="TYPE/NAME",
        help="workloads: only those of this job, e.g. job/sample",
    )
    listing.add_argument("--clusterqueue", "-c", help="workloads: only those of this ClusterQueue")
    listing.add_argument("--localqueue", "-q", help="workloads: only those of this LocalQueue")
    listing.add_argument(
        "--status",
        action="append",
        choices=STATUSES,
        type=str.lower,
        default=[],
        help="workloads: only those in this status (repeatable)",
    )

    describe = add_command(
        subparsers, "describe", run_describe, help="say what a Workload waits for and what would let it in",
        description="Describe a Workload in plain words: its queue, its position, what it waits for and "
        "what would let it in (quota missing per flavor, what the cohort could lend, a stopped queue).",
    )
    describe.add_argument("kind", choices=["workload", "workloads", "wl"], metavar="workload")
    describe.add_argument("name")
    _cluster_options(describe)
    _output_option(describe)

    for verb, text in (
        ("stop", "stop admitting to a queue, or put a Workload on hold"),
        ("resume", "resume a stopped queue or Workload"),
    ):
        parser = add_command(
            subparsers, verb, run_stop if verb == "stop" else run_resume, help=text,
            description=(
                "Stop a ClusterQueue or LocalQueue (spec.stopPolicy HoldAndDrain: admitted workloads are "
                "evicted; Hold with --keep-already-running) or a Workload (spec.active false), as kueuectl."
                if verb == "stop"
                else "Resume a ClusterQueue or LocalQueue (spec.stopPolicy None) or a Workload "
                "(spec.active true)."
            ),
        )
        parser.add_argument("kind", choices=ALL_KINDS, metavar="{clusterqueue,localqueue,workload}")
        parser.add_argument("name")
        _cluster_options(parser)
        if verb == "stop":
            parser.add_argument(
                "--keep-already-running",
                action="store_true",
                help="queues: stop admitting but let admitted workloads run (stopPolicy Hold)",
            )


def run_list(args: argparse.Namespace) -> int:
    return _run(args, "list")


def run_describe(args: argparse.Namespace) -> int:
    return _run(args, "describe")


def run_stop(args: argparse.Namespace) -> int:
    return _run(args, "stop")


def run_resume(args: argparse.Namespace) -> int:
    return _run(args, "resume")


def _run(args: argparse.Namespace, verb: str) -> int:
    from kadmit.controller import queuectl

    kind = queuectl.KINDS[args.kind][0]
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise CommandError(f"--kubeconfig {args.kubeconfig}: no such file")
    if verb == "stop" and kind == "workload" and args.keep_already_running:
        raise CommandError("--keep-already-running applies to queues, not to a workload", 2)
    if (
        verb == "list"
        and kind != "workload"
        and (args.clusterqueue or args.localqueue or args.status or args.owned_by)
    ):
        raise CommandError("--clusterqueue, --localqueue, --status and --for apply to workloads", 2)
    if verb == "list" and kind != "clusterqueue" and args.active:
        raise CommandError("--active applies to clusterqueues", 2)
    if verb == "list" and args.owned_by and "/" not in args.owned_by:
        raise CommandError(f"--for {args.owned_by}: want TYPE/NAME, e.g. job/sample", 2)
    return run_async(_session(args, verb, kind))


async def _session(args: argparse.Namespace, verb: str, kind: str) -> int:
    from kadmit.controller import queuectl
    from kadmit.kube import ApiError, ApiUnreachable

    namespace = getattr(args, "namespace", None) or queuectl.current_namespace(args.kubeconfig, args.context)
    out = queuectl.stdout()
    kube = await connect(args.kubeconfig, args.context)
    try:
        async with kube:
            if verb == "list":
                scope = queuectl.Scope(
                    namespace, bool(args.all_namespaces), args.selector, args.field_selector
                )
                if kind == "clusterqueue":
                    active = None if args.active is None else args.active == "true"
                    await queuectl.list_cluster_queues(
                        kube, scope, args.output, out, queuectl.now(), active=active
                    )
                elif kind == "localqueue":
                    await queuectl.list_local_queues(kube, scope, args.output, out, queuectl.now())
                else:
                    await queuectl.list_workloads(
                        kube,
                        scope,
                        args.output,
                        out,
                        queuectl.now(),
                        cluster_queue=args.clusterqueue,
                        local_queue=args.localqueue,
                        statuses=args.status,
                        owned_by=args.owned_by,
                    )
            elif verb == "describe":
                await queuectl.describe_workload(kube, namespace, args.name, args.output, out)
            else:
                await queuectl.set_stopped(
                    kube,
                    kind,
                    namespace,
                    args.name,
                    verb == "stop",
                    bool(getattr(args, "keep_already_running", False)),
                    out,
                )
    except queuectl.QueueCommandError as exc:
        raise CommandError(str(exc)) from None
    except ApiUnreachable as exc:
        raise CommandError(f"cannot reach the cluster: {exc.message}") from None
    except ApiError as exc:
        raise CommandError(f"the cluster refused a request: {exc.message or exc.reason}") from None
    return 0
