"""The deploy/ folder: the instance files load as real instances (Postgres storage on a server this
module starts, the Docker run launcher and queue), the code location loads with the settings a
container gets, the Helm values parse, and the image builds where a Docker daemon answers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster_docker import DockerRunLauncher
from dagster_postgres import PostgresRunStorage

from eval_pipeline.definitions import build_resources, location
from eval_pipeline.defs.executor import CELERY_BROKER_ENV, project_executor
from eval_pipeline.testing.postgres import new_database

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


@pytest.mark.parametrize("name", ["dagster.yaml", "dagster.docker.yaml"])
def test_each_instance_file_loads_on_postgres(
    name: str, postgres: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", new_database(postgres, name.replace(".", "_")))
    shutil.copy(DEPLOY / name, tmp_path / name)
    with dg.DagsterInstance.from_config(str(tmp_path), config_filename=name) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert instance.event_log_storage.get_pool_config().default_pool_limit == 1
        assert instance.nux_enabled is False  # no "what's new" popup over the UI
        if name == "dagster.docker.yaml":
            assert isinstance(instance.run_launcher, DockerRunLauncher)
            assert "DAGSTER_POSTGRES_URL" in instance.run_launcher.env_vars
            assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"


def test_the_code_location_loads_with_a_containers_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_RESULTS_URI", "s3://team-bucket/eval/results")
    monkeypatch.setenv("EVAL_PIPELINE_OUTPUTS_URI", "s3://team-bucket/eval/outputs")
    resources = build_resources()
    assert resources["storage"].results_dir == "s3://team-bucket/eval/results"
    assert resources["parquet_io"].base_dir == "s3://team-bucket/eval/outputs/tables"
    repo = location().get_repository_def()
    assert dg.AssetKey("semantic_retrievals") in repo.asset_graph.get_all_asset_keys()


def test_the_helm_values_name_the_image_module_and_launcher() -> None:
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["--module-name", "eval_pipeline.definitions"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["postgresql"]["enabled"] is False


def test_a_named_broker_puts_the_steps_on_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CELERY_BROKER_ENV, raising=False)
    assert project_executor() is dg.in_process_executor
    monkeypatch.setenv(CELERY_BROKER_ENV, "redis://broker:6379/0")
    assert project_executor().name == "celery"


def test_the_celery_workers_run_the_executors_app_on_the_brokers_queue() -> None:
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    manifests = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all((DEPLOY / "k8s" / "celery-workers.yaml").read_text())
    }
    workers = manifests["eval-pipeline-celery-workers"]["spec"]
    (worker,) = workers["template"]["spec"]["containers"]
    assert workers["replicas"] >= 2
    command = worker["command"]
    assert (
        command[:3] == ["celery", "-A", "dagster_celery.app"]
        and command[command.index("-Q") + 1] == "dagster"
    )
    assert command[command.index("-b") + 1] == env[CELERY_BROKER_ENV]
    worker_env = {e["name"]: e.get("value") for e in worker["env"]}
    assert worker_env[CELERY_BROKER_ENV] == env[CELERY_BROKER_ENV]
    assert {k: worker_env[k] for k in ("EVAL_PIPELINE_RESULTS_URI", "EVAL_PIPELINE_OUTPUTS_URI")} == {
        k: env[k] for k in ("EVAL_PIPELINE_RESULTS_URI", "EVAL_PIPELINE_OUTPUTS_URI")
    }
    assert manifests["eval-pipeline-broker"]["spec"]["ports"][0]["port"] == 6379


def test_the_image_builds_where_docker_runs() -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker client on this machine")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        pytest.skip("docker daemon not reachable here (`docker info` failed); the image is not built")
    build = ["docker", "build", "-f", str(DEPLOY / "Dockerfile"), "-t", "eval-pipeline:test", str(REPO)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
