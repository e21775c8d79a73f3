"""Node pools from YAML: the defaults, the file format, and clear errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kadmit.localcluster.quantity import QuantityError, parse_quantity
from kadmit.localcluster.sim.duration import DurationError, parse_duration
from kadmit.localcluster.sim.nodeconfig import POOL_LABEL, NodeConfigError, default_config, load_config


def test_default_config_has_a_cpu_pool_and_a_tainted_gpu_pool() -> None:
    config = default_config()
    gpu = config.pool("gpu")
    assert config.pool("cpu") is not None and gpu is not None
    node = gpu.node("gpu-0")
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert node["metadata"]["labels"][POOL_LABEL] == "gpu"


def test_file_with_names_counts_and_limits(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "defaultRuntime: 250ms\n"
        "pools:\n"
        "- name: small\n  names: [alpha, beta]\n  maxCount: 4\n  labels: {tier: small}\n"
        "  allocatable: {cpu: 2, memory: 4Gi}\n"
        "- name: big\n  count: 1\n"
        "  taints: [{key: dedicated, value: big, effect: NoSchedule}]\n"
        "  allocatable: {cpu: '64'}\n"
    )
    config = load_config(path)
    assert config.default_runtime == 0.25
    small, big = config.pools
    assert small.initial_names == ("alpha", "beta") and small.max_count == 4
    assert small.allocatable == {"cpu": "2", "memory": "4Gi", "pods": "110"}
    assert big.initial_names == ("big-0",) and big.max_count == 1
    assert big.node("big-0")["spec"]["taints"][0]["key"] == "dedicated"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pools: [{name: a, allocatable: {cpu: lots}}]", "pools.0.allocatable.cpu: invalid quantity 'lots'"),
        ("pools: [{name: a, count: 3, maxCount: 2}]", "pools.0.maxCount: 2 is below the initial 3 nodes"),
        ("pools: [{name: a}, {name: a}]", "pools.1.name: duplicate pool 'a'"),
        ("pools: [{name: a, names: [x], count: 1}]", "pools.0: give either names or count, not both"),
        ("pools: [{name: a, taints: [{key: k, effect: Sometimes}]}]", "pools.0.taints.0.effect"),
        ("pools: [{name: a, colour: red}]", "Additional properties are not allowed"),
        ("defaultRuntime: soon", "defaultRuntime: invalid duration 'soon'"),
        ("pools: [", "not valid YAML"),
    ],
)
def test_bad_files_get_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    with pytest.raises(NodeConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(NodeConfigError, match="No such file"):
        load_config(tmp_path / "absent.yaml")


def test_quantities_and_durations() -> None:
    assert parse_quantity("500m") * 2 == 1
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("1.5k") == 1500
    with pytest.raises(QuantityError):
        parse_quantity("1.5.1")
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1m30s") == 90
    assert parse_duration("0") == 0
    assert parse_duration("2") == 2
    for bad in ("-1s", "5 parsecs", ""):
        with pytest.raises(DurationError):
            parse_duration(bad)
