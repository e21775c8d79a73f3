"""``kadmit local``'s Configuration: JobSets and Pods managed unless the user's file chose."""

import yaml

from kadmit.controller.config import Configuration, parse
from kadmit.controller.local_setup import JOBSET_FRAMEWORK, POD_FRAMEWORK, local_configuration, on_loopback

LWS = "leaderworkerset.x-k8s.io/leaderworkerset"
KUBEFLOW = (
    *(f"kubeflow.org/{k}" for k in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob")),
    "trainer.kubeflow.org/trainjob",
)


def test_default_configuration_gains_jobsets_and_pods_and_loses_leader_election() -> None:
    config = local_configuration(Configuration())
    assert config.frameworks == (
        "batch/job",
        JOBSET_FRAMEWORK,
        POD_FRAMEWORK,
        "deployment",
        "statefulset",
        LWS,
        *KUBEFLOW,
        "ray.io/rayjob",
        "ray.io/raycluster",
        "workload.codeflare.dev/appwrapper",
    )
    assert config.leader_election.leader_elect is False


def test_users_frameworks_are_kept_when_they_chose() -> None:
    chosen = parse(
        yaml.safe_load(
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
            "integrations:\n  frameworks: [batch/job]\n"
        )
    )
    assert local_configuration(chosen, manage_jobsets=False).frameworks == ("batch/job",)


def test_jobsets_and_pods_are_not_listed_twice() -> None:
    config = Configuration(frameworks=("batch/job", POD_FRAMEWORK, JOBSET_FRAMEWORK))
    assert local_configuration(config).frameworks == (
        "batch/job",
        POD_FRAMEWORK,
        JOBSET_FRAMEWORK,
        "deployment",
        "statefulset",
        LWS,
        *KUBEFLOW,
        "ray.io/rayjob",
        "ray.io/raycluster",
        "workload.codeflare.dev/appwrapper",
    )


def test_every_server_listens_on_loopback_at_a_free_port() -> None:
    config = local_configuration(Configuration())
    assert (config.webhook_host, config.webhook_port) == ("127.0.0.1", 0)
    assert (config.visibility_host, config.visibility_port) == ("127.0.0.1", 0)
    assert (config.metrics_bind_address, config.health_probe_bind_address) == ("127.0.0.1:0", "127.0.0.1:0")
    quiet = on_loopback(Configuration(), metrics=False, health=False)
    assert (quiet.metrics_bind_address, quiet.health_probe_bind_address) == ("0", "0")
