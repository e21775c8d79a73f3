#!/usr/bin/env python3
"""CI: kadmit as a user installs it, proved on the wheel rather than on the checkout.

Builds the wheel as the image is built (``KADMIT_COMPILE=1 pip wheel . --no-deps``: the engine
compiled by mypyc, see setup.py), installs it into a fresh virtual environment in a temporary
directory outside the checkout, and from another directory checks ``kadmit --version``, ``import
kadmit.checks``, that none of the repository's top-level folders is importable under its bare
name, that the engine runs compiled, that the engine's and the controller's tests pass against
the compiled engine (``tests/engine`` and ``tests/controller``, from a copy of ``tests/`` beside
the wheel's venv, with the ``test`` extra), and that ``kadmit
local`` admits and completes one Job created through kubectl (or, where kubectl is missing,
through kubernetes-asyncio from the wheel's own environment) and exits 0 on SIGTERM.

The wheel is built from a copy of the working tree without ``build/``, ``.venv`` and the like,
so that a stale ``build/lib`` left by an earlier build cannot slip removed modules into it and
the checkout is left as it was. Standard library only; it runs with the interpreter that runs
it (``.ci/run``'s). Every step prints one line; the first failure prints ``wheel check: FAILED:
...`` and exits 1. ``KADMIT_CI_NO_KUBECTL=1`` takes the kubernetes-asyncio path even where
kubectl is installed; ``KADMIT_CI_KEEP=1`` keeps the temporary directory.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any, NoReturn

CHECKOUT = Path(__file__).resolve().parent.parent
BARE_NAMES = ("engine", "controller", "webhook", "checks", "certs", "localcluster", "kube")
NOT_SOURCES = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
               ".hypothesis", "kadmit-local.kubeconfig")
JOB = "wheel-check"
READY_WITHIN = 120.0  # seconds for kadmit local to print its ready line
JOB_WITHIN = 120  # seconds for the Job to complete
STARTED = time.monotonic()


class Failed(Exception):
    pass


def ok(message: str) -> None:
    print(f"wheel check: {message}", flush=True)


def fail(message: str) -> NoReturn:
    raise Failed(message)


def tail(text: str, lines: int = 15) -> str:
    kept = text.strip().splitlines()[-lines:]
    return ("\n    " + "\n    ".join(kept)) if kept else " (no output)"


def run(command: list[str], what: str, *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> str:
    """Run ``command``; its stdout, or a failure naming ``what`` with the end of its output."""
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        fail(f"{what}: no answer within {timeout:.0f}s ({' '.join(command)})")
    except OSError as exc:
        fail(f"{what}: cannot run {command[0]}: {exc.strerror or exc}")
    if done.returncode != 0:
        fail(f"{what}: exit code {done.returncode} ({' '.join(command)}){tail(done.stderr or done.stdout)}")
    return done.stdout


def build_wheel(work: Path) -> Path:
    source, dist = work / "source", work / "dist"
    shutil.copytree(CHECKOUT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    began = time.monotonic()
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--quiet", "--disable-pip-version-check",
         "--wheel-dir", str(dist)], "KADMIT_COMPILE=1 pip wheel . --no-deps", cwd=source,
        env={**os.environ, "KADMIT_COMPILE": "1"}, timeout=900)
    wheels = sorted(dist.glob("kadmit-*.whl"))
    if len(wheels) != 1:
        fail(f"pip wheel made {[w.name for w in wheels]}, not one kadmit wheel")
    took = time.monotonic() - began
    ok(f"built {wheels[0].name} with KADMIT_COMPILE=1 pip wheel . --no-deps ({took:.0f}s)")
    return wheels[0]


def inspect_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = "".join(archive.read(n).decode() for n in names
                               if n.endswith(".dist-info/entry_points.txt"))
    tops = {name.split("/", 1)[0] for name in names}
    strays = sorted(t for t in tops if t != "kadmit" and not t.endswith(".dist-info"))
    if strays:
        fail(f"the wheel installs more than the kadmit package: {strays}")
    manifests = [n for n in names if n.startswith("kadmit/manifests/") and n.endswith(".yaml")]
    modules = [n for n in names if n.endswith(".py")]
    compiled = [n for n in names if n.startswith("kadmit/engine/") and n.endswith(".so")]
    sources = [n for n in names if n.startswith("kadmit/engine/") and n.endswith(".py")]
    if len(compiled) != len(sources):
        fail(f"the wheel has {len(compiled)} compiled engine modules for {len(sources)} sources")
    for needed in ("kadmit/py.typed", "kadmit/manifests/crds/kueue.x-k8s.io_clusterqueues.yaml"):
        if needed not in names:
            fail(f"the wheel lacks {needed}")
    if "kadmit = kadmit.controller.cli:main" not in entry_points:
        fail("the wheel declares no kadmit console script (kadmit.controller.cli:main)")
    ok(f"the wheel holds only kadmit/ ({len(modules)} modules, {len(compiled)} of the engine's compiled, "
       f"{len(manifests)} manifests) and its metadata")


def install(wheel: Path, work: Path) -> Path:
    venv = work / "venv"
    began = time.monotonic()
    run([sys.executable, "-m", "venv", str(venv)], "python -m venv", cwd=work)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{wheel}[test]"],
        "pip install of the wheel", cwd=work, timeout=600)
    ok(f"installed it with its dependencies and test extra into a fresh venv outside the checkout, {venv} "
       f"({time.monotonic() - began:.0f}s)")
    return venv


def clean_environment(venv: Path) -> dict[str, str]:
    """The environment of a shell with only the wheel's venv active (not the checkout's)."""
    active = os.environ.get("VIRTUAL_ENV")
    dropped = [CHECKOUT, *([Path(active).resolve()] if active else [])]
    unset = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KUBECONFIG")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not any(Path(p).resolve().is_relative_to(d) for d in dropped)]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    return env


def check_installed(venv: Path, wheel: Path, elsewhere: Path, env: dict[str, str]) -> None:
    version = wheel.name.split("-")[1]
    kadmit = str(venv / "bin" / "kadmit")
    said = run([kadmit, "--version"], "kadmit --version", cwd=elsewhere, env=env).strip()
    if said != f"kadmit {version}":
        fail(f"kadmit --version printed {said!r}, not 'kadmit {version}'")
    ok(f"kadmit --version prints {said!r}")
    python = str(venv / "bin" / "python")
    where = run([python, "-c", "import kadmit.checks, kadmit; print(kadmit.__file__)"],
                "import kadmit.checks", cwd=elsewhere, env=env).strip()
    if not Path(where).is_relative_to(venv):
        fail(f"import kadmit found {where}, not the wheel installed in {venv}")
    ok(f"python -c 'import kadmit.checks' works, from {Path(where).parent}")
    probe = ("import importlib, json, sys\nfound = []\nfor name in sys.argv[1:]:\n"
             "    try:\n        importlib.import_module(name)\n    except ImportError:\n        continue\n"
             "    found.append(name)\nprint(json.dumps(found))")
    found = json.loads(run([python, "-c", probe, *BARE_NAMES], "the bare-name probe", cwd=elsewhere, env=env))
    if found:
        fail(f"importable under a bare name beside kadmit: {found}")
    ok(f"no top-level {', '.join(BARE_NAMES)} is importable there")
    if run([python, "-c", "import kadmit.engine as e; print(e.COMPILED)"], "kadmit.engine.COMPILED",
           cwd=elsewhere, env=env).strip() != "True":
        fail("the installed engine runs interpreted: kadmit.engine.COMPILED is not True")
    ok("the installed engine runs compiled (kadmit.engine.COMPILED)")


def check_engine_tests(venv: Path, work: Path, env: dict[str, str]) -> None:
    """The engine's tests and the controller's, against the compiled engine (compiled code checks
    declared types where the interpreter does not, so the controller's calls into it are run
    too): a copy of ``tests/`` beside the wheel's venv, so that ``tests.*`` imports and ``kadmit``
    is the wheel's, not the checkout's, with the checkout's ``manifests/`` (the YAML the tests
    apply) and pytest's settings as pyproject.toml gives them."""
    tests = work / "compiled-tests"
    tests.mkdir()
    shutil.copytree(CHECKOUT / "tests", tests / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    (tests / "manifests").symlink_to(CHECKOUT / "manifests")  # the YAML the tests apply, as in the checkout
    (tests / "pytest.ini").write_text(pytest_ini())
    began = time.monotonic()
    out = run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
               "tests/engine", "tests/controller"], "tests/engine and tests/controller, compiled",
              cwd=tests, env=env, timeout=900)
    ok(f"tests/engine and tests/controller on the compiled engine: {tail(out, 1).strip()} "
       f"({time.monotonic() - began:.0f}s)")


def pytest_ini() -> str:
    """pyproject.toml's ``[tool.pytest.ini_options]`` as a pytest.ini for the copied tests, without
    ``testpaths`` and ``addopts`` (this check names its paths and options itself): one home for
    the settings, so a setting added there reaches the compiled run too."""
    with open(CHECKOUT / "pyproject.toml", "rb") as stream:
        options = tomllib.load(stream)["tool"]["pytest"]["ini_options"]
    lines = ["[pytest]"]
    for key, value in options.items():
        if key in ("testpaths", "addopts"):
            continue
        lines.append(f"{key} = {' '.join(map(str, value)) if isinstance(value, list) else value}")
    return "\n".join(lines) + "\n"


def wait_ready(local: subprocess.Popen[str], log: Path) -> str:
    assert local.stdout is not None
    deadline = time.monotonic() + READY_WITHIN
    with selectors.DefaultSelector() as selector:
        selector.register(local.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(timeout=left):
                break
            line = local.stdout.readline()
            if not line:  # the process closed its stdout: it ended
                local.wait(timeout=10)
                fail(f"kadmit local exited with code {local.returncode} before it was ready"
                     f"{tail(log.read_text())}")
            if line.startswith("kadmit local: ready"):
                return line.strip()
    fail(f"kadmit local printed no ready line within {READY_WITHIN:.0f}s{tail(log.read_text())}")


def job_through_kubectl(kubectl: str, kubeconfig: Path, elsewhere: Path, env: dict[str, str]) -> list[Any]:
    base = [kubectl, "--kubeconfig", str(kubeconfig), "--namespace", "default"]
    run([*base, "create", "job", JOB, "--image=busybox", "--", "echo", "hi"], "kubectl create job",
        cwd=elsewhere, env=env)
    ok(f"kubectl create job {JOB} --image=busybox -- echo hi (namespace default, LocalQueue default)")
    run([*base, "wait", "--for=condition=complete", f"job/{JOB}", f"--timeout={JOB_WITHIN}s"],
        "kubectl wait --for=condition=complete", cwd=elsewhere, env=env, timeout=JOB_WITHIN + 30)
    ok(f"kubectl wait --for=condition=complete job/{JOB}: the Job completed")
    listed = json.loads(run([*base, "get", "workloads.kueue.x-k8s.io", "-o", "json"], "kubectl get workloads",
                            cwd=elsewhere, env=env))
    items: list[Any] = listed.get("items") or []
    return items


# Run by the wheel's python when there is no kubectl: the same Job, through kubernetes-asyncio.
FALLBACK = """
import asyncio, json, sys
from kubernetes_asyncio import client, config

async def main(kubeconfig, name, within):
    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        batch = client.BatchV1Api(api)
        await batch.create_namespaced_job("default", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": name, "image": "busybox", "command": ["echo", "hi"]}]}}}})
        print("created", file=sys.stderr, flush=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            job = await batch.read_namespaced_job(name, "default")
            conditions = (job.status and job.status.conditions) or []
            if any(c.type == "Complete" and c.status == "True" for c in conditions):
                break
            if loop.time() > deadline:
                sys.exit(f"Job {name} did not complete within {within}s: {conditions}")
            await asyncio.sleep(0.5)
        listed = await client.CustomObjectsApi(api).list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", "default", "workloads")
        print(json.dumps(listed["items"]))

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


def job_through_kubernetes_asyncio(
    venv: Path, kubeconfig: Path, elsewhere: Path, env: dict[str, str]
) -> list[Any]:
    out = run([str(venv / "bin" / "python"), "-c", FALLBACK, str(kubeconfig), JOB, str(JOB_WITHIN)],
              "the Job through kubernetes-asyncio", cwd=elsewhere, env=env, timeout=JOB_WITHIN + 30)
    ok(f"kubernetes-asyncio created Job default/{JOB} (busybox, echo hi) and read it Complete")
    items: list[Any] = json.loads(out)
    return items


def check_admitted(workloads: list[Any]) -> None:
    mine = [w for w in workloads if any(o.get("kind") == "Job" and o.get("name") == JOB
                                        for o in w["metadata"].get("ownerReferences", []))]
    if len(mine) != 1:
        fail(f"expected one Workload owned by Job {JOB}, found {[w['metadata']['name'] for w in mine]}")
    workload = mine[0]
    status = workload.get("status") or {}
    states = {c["type"]: c["status"] for c in status.get("conditions") or []}
    queue = (status.get("admission") or {}).get("clusterQueue")
    if states.get("Admitted") != "True" or not queue:
        fail(f"Workload {workload['metadata']['name']} was not admitted: conditions {states}, "
             f"admission {status.get('admission')}")
    ok(f"its Workload {workload['metadata']['name']} was admitted to ClusterQueue {queue} "
       f"(Finished={states.get('Finished')})")


def check_local(venv: Path, work: Path, elsewhere: Path, env: dict[str, str]) -> None:
    kubeconfig, log = work / "local.kubeconfig", work / "kadmit-local.stderr"
    began = time.monotonic()
    with log.open("w") as stderr:
        local = subprocess.Popen([str(venv / "bin" / "kadmit"), "local", "--kubeconfig", str(kubeconfig)],
                                 cwd=elsewhere, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        ready = wait_ready(local, log)
        ok(f"kadmit local --kubeconfig {kubeconfig} is ready after {time.monotonic() - began:.1f}s: {ready}")
        kubectl = shutil.which("kubectl", path=env["PATH"])
        if kubectl and not os.environ.get("KADMIT_CI_NO_KUBECTL"):
            workloads = job_through_kubectl(kubectl, kubeconfig, elsewhere, env)
        else:
            why = "KADMIT_CI_NO_KUBECTL is set" if kubectl else "kubectl is not on PATH"
            ok(f"{why}: creating and reading the Job with kubernetes-asyncio from the wheel's venv instead")
            workloads = job_through_kubernetes_asyncio(venv, kubeconfig, elsewhere, env)
        check_admitted(workloads)
        local.send_signal(signal.SIGTERM)
        try:
            code = local.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fail(f"kadmit local was still running 30s after SIGTERM{tail(log.read_text())}")
        if code != 0:
            fail(f"kadmit local exited with code {code} on SIGTERM, not 0{tail(log.read_text())}")
        ok("kadmit local stopped on SIGTERM with exit code 0")
    finally:
        if local.poll() is None:
            local.kill()
            local.wait()


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="kadmit-wheel-check-"))
    try:
        wheel = build_wheel(work)
        inspect_wheel(wheel)
        venv = install(wheel, work)
        elsewhere = work / "elsewhere"  # not the checkout, nor anywhere kadmit's sources are
        elsewhere.mkdir()
        env = clean_environment(venv)
        check_installed(venv, wheel, elsewhere, env)
        check_engine_tests(venv, work, env)
        check_local(venv, work, elsewhere, env)
    except Failed as exc:
        print(f"wheel check: FAILED: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if os.environ.get("KADMIT_CI_KEEP"):
            print(f"wheel check: kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    ok(f"passed in {time.monotonic() - STARTED:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
