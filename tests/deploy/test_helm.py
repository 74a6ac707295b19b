"""The Helm chart, rendered and linted by Helm's Go SDK (``helm-python-sdk``).

The rendered objects are validated against Kubernetes' JSON schemas (``kubernetes-validate``). Each check is
skipped, saying why, where its tool is not installed.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from bot.cli.main import build_parser
from bot.intake.routing import INTERACTIVE, REVIEW
from tests.stories import DEPLOY, spark_command

CHART = DEPLOY / "helm" / "spark"

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm's Go SDK) is not installed")


def _render_files(values: dict[str, Any] | None = None) -> dict[str, str]:
    chart = helm.Chart.load(CHART)
    try:
        rendered: dict[str, str] = chart.render(values or {}, name="spark", namespace="bots")
    finally:
        chart.close()
    return rendered


def _render(values: dict[str, Any] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    objects = {}
    for path, text in _render_files(values).items():
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def test_helm_lint_is_clean() -> None:
    result = helm.lint(CHART, strict=True)
    assert result["errors"] == []
    assert [m for m in result["messages"] if m["severity"] > 1] == []


def test_chart_renders_web_worker_secret_redis_and_keda() -> None:
    objects = _render(
        {"ingress": {"enabled": True}, "secrets": {"GITHUB_WEBHOOK_SECRET": "s3"}, "keda": {"enabled": True}}
    )
    assert set(objects) == {
        ("Deployment", "spark-web"),
        ("Deployment", "spark-worker"),
        ("Service", "spark-web"),
        ("Ingress", "spark"),
        ("Secret", "spark"),
        ("StatefulSet", "spark-redis"),
        ("Service", "spark-redis"),
        ("Secret", "spark-redis"),
        ("NetworkPolicy", "spark-redis"),
        ("ScaledObject", "spark-worker"),
        ("TriggerAuthentication", "spark-redis"),
    }
    web = objects[("Deployment", "spark-web")]["spec"]["template"]["spec"]
    worker = objects[("Deployment", "spark-worker")]["spec"]["template"]["spec"]
    assert spark_command(web["containers"][0]["command"]) == "serve"
    assert spark_command(worker["containers"][0]["command"]) == "worker"
    for pod in (web, worker):
        assert pod["securityContext"]["runAsNonRoot"] is True
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["REDIS_URL"] == "redis://:$(REDIS_PASSWORD)@spark-redis:6379/0"
        assert env["PROMETHEUS_MULTIPROC_DIR"] == "/run/spark-metrics"
        assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "spark"}}]
    assert objects[("Secret", "spark")]["stringData"] == {"GITHUB_WEBHOOK_SECRET": "s3"}
    # KEDA owns the worker count: the Deployment must not fight it.
    assert "replicas" not in objects[("Deployment", "spark-worker")]["spec"]
    redis_args = objects[("StatefulSet", "spark-redis")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert redis_args[redis_args.index("--appendonly") + 1] == "yes"


def test_keda_scales_workers_on_both_queues() -> None:
    scaled = _render({"keda": {"enabled": True}})[("ScaledObject", "spark-worker")]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {"name": "spark-worker"}
    triggers = scaled["spec"]["triggers"]
    assert [t["metadata"]["listName"] for t in triggers] == [f"rq:queue:{INTERACTIVE}", f"rq:queue:{REVIEW}"]
    for trigger in triggers:
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["address"] == "spark-redis:6379"
        # KEDA trigger metadata is a map of strings.
        assert all(isinstance(value, str) for value in trigger["metadata"].values())


def test_external_redis_replaces_the_bundled_one() -> None:
    values = {
        "redis": {"enabled": False, "external": {"url": "rediss://cache:6380/2", "address": "cache:6380"}},
        "keda": {"enabled": False},
        "existingSecret": "spark-credentials",
    }
    objects = _render(values)
    assert not any(
        kind in ("StatefulSet", "ScaledObject", "Secret", "NetworkPolicy", "TriggerAuthentication")
        for kind, _ in objects
    )
    worker = objects[("Deployment", "spark-worker")]
    assert worker["spec"]["replicas"] == 2
    container = worker["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "REDIS_URL", "value": "rediss://cache:6380/2"} in container["env"]
    assert container["envFrom"] == [{"secretRef": {"name": "spark-credentials"}}]
    with pytest.raises(helm.HelmError, match=r"redis\.external\.url"):
        _render({"redis": {"enabled": False}})


def test_rendered_kubernetes_objects_match_the_kubernetes_schemas() -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    objects = _render(
        {"ingress": {"enabled": True, "tls": [{"secretName": "t", "hosts": ["spark.example.com"]}]}}
    )
    checked = 0
    for (kind, _), obj in objects.items():
        if kind in ("ScaledObject", "TriggerAuthentication"):
            continue  # KEDA CRDs, not in Kubernetes' schemas; their shape is checked above
        validate.validate(obj, validate.latest_version(), strict=True)
        checked += 1
    assert checked == 9


def test_keda_is_optional_and_off_by_default_with_plain_replicas() -> None:
    objects = _render()
    assert not any(kind == "ScaledObject" for kind, _ in objects)
    assert objects[("Deployment", "spark-worker")]["spec"]["replicas"] == 2


def test_workers_serve_metrics_and_both_roles_are_annotated_for_scraping() -> None:
    objects = _render()
    web = objects[("Deployment", "spark-web")]["spec"]["template"]
    worker = objects[("Deployment", "spark-worker")]["spec"]["template"]
    container = worker["spec"]["containers"][0]
    args = build_parser().parse_args(container["command"][1:])
    assert args.metrics_port == 9100
    assert container["ports"] == [{"name": "metrics", "containerPort": 9100}]
    assert worker["metadata"]["annotations"]["prometheus.io/port"] == "9100"
    assert web["metadata"]["annotations"]["prometheus.io/port"] == "3000"
    for pod in (web, worker):
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"


def test_credentials_come_from_a_secret_and_setup_knows_the_release() -> None:
    objects = _render()
    for name in ("spark-web", "spark-worker"):
        container = objects[("Deployment", name)]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert container["envFrom"] == [{"secretRef": {"name": "spark"}}]
        # Nothing points the App's key at a file on a pod volume.
        assert not {"GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_PATH", "GITHUB_APP_ID"} & set(env)
        assert env["SPARK_HELM_RELEASE"] == "spark" and env["SPARK_HELM_NAMESPACE"] == "bots"


def test_notes_give_the_next_steps() -> None:
    first = _render_files()["spark/templates/NOTES.txt"]
    assert "kubectl -n bots port-forward svc/spark-web 3000:80" in first
    assert "/setup?token=TOKEN&url=PUBLIC_URL" in first
    assert "kubectl -n bots logs deploy/spark-web | grep setup" in first
    assert "--set secrets.CEREBRAS_API_KEY=" in first
    assert "kubectl -n bots exec deploy/spark-worker -- spark doctor" in first
    assert "/spark help" in first
    configured = _render_files(
        {"existingSecret": "spark-app", "ingress": {"enabled": True, "host": "spark.acme.dev"}}
    )["spark/templates/NOTES.txt"]
    assert "from the Secret spark-app" in configured and "rollout restart" in configured
    assert "/setup?token" not in configured and "spark doctor" in configured
    with_ingress = _render_files({"ingress": {"enabled": True, "host": "spark.acme.dev"}})
    notes = with_ingress["spark/templates/NOTES.txt"]
    # Not through the ingress: /setup is reached with a port-forward, told the public URL.
    assert "kubectl -n bots port-forward svc/spark-web 3000:80" in notes
    assert "http://localhost:3000/setup?token=TOKEN&url=https://spark.acme.dev" in notes
    assert "https://spark.acme.dev/setup" not in notes


def test_docs_first_step_builds_and_pushes_the_image_the_chart_installs() -> None:
    docs = (DEPLOY.parent / "docs" / "deploy.md").read_text()
    section = docs[docs.index("### Kubernetes (Helm)") :]
    first_block = section[section.index("```sh") : section.index("```", section.index("```sh") + 5)]
    assert "docker build -f deploy/Dockerfile -t registry.example.com/spark:0.1.0 ." in first_block
    assert "docker push registry.example.com/spark:0.1.0" in first_block
    assert "--set image.repository=registry.example.com/spark" in section
    assert "--set image.tag=0.1.0" in section


def test_the_ingress_routes_github_deliveries_only() -> None:
    from bot.web.webhooks import WEBHOOK_PATH

    ingress = _render({"ingress": {"enabled": True}})[("Ingress", "spark")]
    [rule] = ingress["spec"]["rules"]
    assert [(p["path"], p["pathType"]) for p in rule["http"]["paths"]] == [(WEBHOOK_PATH, "Exact")]


def test_the_bundled_redis_requires_a_password_and_only_spark_pods_reach_it() -> None:
    objects = _render({"keda": {"enabled": True}})
    password = objects[("Secret", "spark-redis")]["data"]["password"]
    assert len(base64.b64decode(password)) == 32
    redis_pod = objects[("StatefulSet", "spark-redis")]["spec"]["template"]["spec"]
    [redis] = redis_pod["containers"]
    assert redis["args"][-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
    secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in redis["env"]}
    key = {"name": "spark-redis", "key": "password"}
    assert secret_env == {"REDIS_PASSWORD": key, "REDISCLI_AUTH": key}
    assert redis["readinessProbe"]["exec"]["command"] == ["redis-cli", "ping"] and redis["livenessProbe"]
    for name in ("spark-web", "spark-worker"):
        env = objects[("Deployment", name)]["spec"]["template"]["spec"]["containers"][0]["env"]
        # Defined before REDIS_URL, which Kubernetes expands it into.
        assert env[0] == {
            "name": "REDIS_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "spark-redis", "key": "password"}},
        }
    policy = objects[("NetworkPolicy", "spark-redis")]["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "redis"
    [allowed] = policy["ingress"]
    [source] = allowed["from"]
    rules = {e["key"]: e["values"] for e in source["podSelector"]["matchExpressions"]}
    assert rules["app.kubernetes.io/component"] == ["web", "worker"]
    assert rules["app.kubernetes.io/instance"] == ["spark"]
    for trigger in objects[("ScaledObject", "spark-worker")]["spec"]["triggers"]:
        assert trigger["authenticationRef"] == {"name": "spark-redis"}
    auth = objects[("TriggerAuthentication", "spark-redis")]["spec"]["secretTargetRef"]
    assert auth == [{"parameter": "password", "name": "spark-redis", "key": "password"}]
    # A password given is the one used.
    given = _render({"redis": {"password": "letmein42"}})[("Secret", "spark-redis")]["data"]["password"]
    assert base64.b64decode(given) == b"letmein42"


def test_the_worker_has_liveness_and_readiness_probes() -> None:
    worker = _render()[("Deployment", "spark-worker")]["spec"]["template"]["spec"]["containers"][0]
    assert worker["livenessProbe"]["tcpSocket"] == {"port": "metrics"}
    assert spark_command(worker["readinessProbe"]["exec"]["command"]) == "doctor"
    # Alive for longer than a worker waits for its Redis at start (SPARK_REDIS_WAIT_SECONDS).
    live = worker["livenessProbe"]
    from bot.settings import Settings

    waited = Settings.model_fields["spark_redis_wait_seconds"].default
    assert live["initialDelaySeconds"] + live["periodSeconds"] * live["failureThreshold"] > waited
