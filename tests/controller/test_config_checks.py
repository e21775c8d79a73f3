"""The configuration blocks that wire the webhook and the check plugins: kadmit's ``admissionChecks``
extension, ``multiKueue.dispatcherName`` and the ``PartialAdmission`` gate."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kadmit.checks.discovery import available
from kadmit.controller.cli import main
from kadmit.controller.config import ConfigError, load

HEADER = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + text)
    return path


def test_every_installed_plugin_runs_by_default() -> None:
    installed = sorted(available())
    assert {"resourcequota", "provisioning", "multikueue"} <= set(installed)
    assert load(None).admission_checks.select(installed) == installed


def test_enabled_runs_only_the_listed_plugins_in_order(tmp_path: Path) -> None:
    config = load(write(tmp_path, "admissionChecks: {enabled: [resourcequota, multikueue]}\n"))
    assert config.admission_checks.select(available()) == ["resourcequota", "multikueue"]
    nothing = load(write(tmp_path, "admissionChecks: {enabled: []}\n"))
    assert nothing.admission_checks.select(available()) == []


def test_disabled_runs_every_other_installed_plugin(tmp_path: Path) -> None:
    config = load(write(tmp_path, "admissionChecks:\n  disabled: [provisioning]\n"))
    selected = config.admission_checks.select(available())
    assert "provisioning" not in selected
    assert selected == sorted(name for name in available() if name != "provisioning")
    assert config.ignored_fields == ()  # kadmit's own block is acted on, not warned about


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("admissionChecks: {enabled: [resourcequota, nosuch]}\n",
         "admissionChecks.enabled: no admission-check plugin named 'nosuch' (installed: "),
        ("admissionChecks: {disabled: [nosuch]}\n",
         "admissionChecks.disabled: no admission-check plugin named 'nosuch' (installed: "),
        ("admissionChecks: {enabled: [resourcequota], disabled: [provisioning]}\n",
         "admissionChecks: set enabled or disabled, not both"),
        ("admissionChecks: {enabled: resourcequota}\n", "admissionChecks.enabled: must be a list of strings"),
        ("admissionChecks: {enabled: [resourcequota, resourcequota]}\n", "'resourcequota' is listed twice"),
        ("admissionChecks: {enable: [resourcequota]}\n", "unknown field 'admissionChecks.enable'"),
        ("admissionChecks: [resourcequota]\n", "admissionChecks: must be an object"),
        ("admissionChecks: {settings: {nosuch: {}}}\n",
         "admissionChecks.settings: no admission-check plugin named 'nosuch' (installed: "),
        ("admissionChecks: {settings: {resourcequota: 3}}\n",
         "admissionChecks.settings.resourcequota: must be an object"),
        ("admissionChecks: {settings: [resourcequota]}\n",
         "admissionChecks.settings: must map plugin names to their settings"),
        ("multiKueue: {dispatcherName: ''}\n", "multiKueue.dispatcherName: must be a non-empty string"),
        ("multiKueue: [incremental]\n", "multiKueue: must be an object"),
        ("multiKueue: {gcInterval: soon}\n", "multiKueue.gcInterval: invalid duration 'soon'"),
        ("multiKueue: {incrementalDispatcherConfig: {stepSize: 0}}\n",
         "multiKueue.incrementalDispatcherConfig.stepSize: must be >= 1, got 0"),
    ],
)
def test_bad_blocks_get_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load(path)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_an_unknown_plugin_stops_kadmit_run_with_the_installed_ones_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "admissionChecks: {enabled: [buisness-hours]}\n")
    assert main(["run", "--config", str(path)]) == 1  # the file is wrong, not the command line
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "no admission-check plugin named 'buisness-hours'" in lines[0]
    installed = lines[0].rsplit("(installed: ", 1)[1].rstrip(")").split(", ")
    assert installed == sorted(available())


def test_multikueue_dispatcher(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert not load(None).incremental_dispatch
    with caplog.at_level(logging.WARNING):
        config = load(write(tmp_path, """
multiKueue:
  gcInterval: 2m
  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental
"""))
    assert config.incremental_dispatch
    assert config.ignored_fields == ()  # the multikueue check plugin reads gcInterval
    assert "multiKueue" not in caplog.text
    assert config.document["multiKueue"]["gcInterval"] == "2m"  # what the plugins are built from
    explicit = load(
        write(tmp_path, "multiKueue: {dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once}\n")
    )
    assert not explicit.incremental_dispatch and explicit.ignored_fields == ()
    external = load(write(tmp_path, "multiKueue: {dispatcherName: example.com/my-dispatcher}\n"))
    assert external.multikueue_dispatcher == "example.com/my-dispatcher" and not external.incremental_dispatch


def test_partial_admission_gate(tmp_path: Path) -> None:
    assert load(None).partial_admission  # Beta, on in Kueue
    off = load(write(tmp_path, "featureGates: {PartialAdmission: false}\n"))
    assert not off.partial_admission and off.ignored_fields == ()
    assert load(write(tmp_path, "featureGates: {PartialAdmission: true}\n")).partial_admission


def test_multikueue_fields_the_plugin_does_not_read_are_warned_about(tmp_path: Path) -> None:
    block = "multiKueue: {gcInterval: 1m, clusterProfile: {}, externalFrameworks: [{name: Foo.v1.ex.com}]}\n"
    config = load(write(tmp_path, block))
    assert config.ignored_fields == ("multiKueue.clusterProfile",)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("[{name: Foo}]", "externalFrameworks[0].name: 'Foo': must be in 'kind.version.group' format"),
        ("[{name: ''}]", "externalFrameworks[0].name: name is required"),
        (
            "[{name: Foo.v1.example.com}, {name: Foo.v1.example.com}]",
            "externalFrameworks[1].name: Duplicate value: 'Foo.v1.example.com'",
        ),
        (
            "[{name: JobSet.v1alpha2.jobset.x-k8s.io}]",
            "externalFrameworks[0].name: 'JobSet.v1alpha2.jobset.x-k8s.io': "
            "conflicts with a built-in MultiKueue adapter",
        ),
        ("{name: Foo.v1.example.com}", "externalFrameworks: must be a list of {name: kind.version.group}"),
    ],
)
def test_external_frameworks_are_checked_as_kueue_checks_them(
    tmp_path: Path, names: str, message: str
) -> None:
    frameworks = "integrations: {frameworks: [batch/job, jobset.x-k8s.io/jobset]}\n"
    with pytest.raises(ConfigError) as caught:
        load(write(tmp_path, f"{frameworks}multiKueue: {{externalFrameworks: {names}}}\n"))
    path = tmp_path / "config.yaml"
    assert str(caught.value) == f"config {path}: multiKueue.{message}"


def test_a_plugins_settings_block_is_kept_for_it(tmp_path: Path) -> None:
    from kadmit.checks import plugin_settings

    config = load(write(tmp_path, "admissionChecks: {settings: {resourcequota: {strict: true}}}\n"))
    assert plugin_settings(config.document, "resourcequota") == {"strict": True}
    assert plugin_settings(config.document, "provisioning") == {}
    assert config.ignored_fields == ()
