"""The Kubernetes fleet (deploy/k8s), checked without a cluster: kustomize renders the base and the
GPU overlay, kubernetes-validate checks every object against the API schemas (strict: an unknown
field fails), and the learner's and actors' containers run as local processes with their own
commands, environments and mounts: the gRPC health probe answers, frames flow, and a restarted
learner is found again by the actors through the Service's name."""

import copy
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from conftest import ROOT, Proc, free_port, progress_frames, tool

from seedfleet.deploy.certs import make_credentials
from seedfleet.deploy.cli import build_parser
from seedfleet.deploy.healthcheck import check

K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.37.0"  # the newest schemas kubernetes-validate carries
IMAGE_ENTRYPOINT = ["seedfleet"]  # deploy/Dockerfile's, for both images


def render(overlay: str) -> list[dict]:
    done = subprocess.run([tool("kustomize"), "build", str(K8S / overlay)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return list(yaml.safe_load_all(done.stdout))


def find(docs: list[dict], kind: str, name: str) -> dict:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def pod_spec(docs: list[dict], kind: str, name: str) -> dict:
    return find(docs, kind, name)["spec"]["template"]["spec"]


def container_env(docs: list[dict], container: dict) -> dict[str, str]:
    """The container's environment as the kubelet builds it: its ConfigMaps' data, then `env`."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", ()):
        env |= find(docs, "ConfigMap", source["configMapRef"]["name"])["data"]
    return env | {e["name"]: e["value"] for e in container.get("env", ())}


def unknown_variables(env: dict[str, str], command: str) -> list[str]:
    """SEEDFLEET_* variables that are no flag of `seedfleet <command>`."""
    flags = {opt for action in build_parser(command)._actions for opt in action.option_strings}
    return [v for v in env if "--" + v.removeprefix("SEEDFLEET_").lower().replace("_", "-") not in flags]


@pytest.mark.parametrize("overlay", ["base", "gpu"])
def test_every_rendered_object_passes_the_kubernetes_schemas(overlay):
    docs = render(overlay)
    assert {(d["kind"], d["metadata"]["name"].rsplit("-", 1)[0] if d["kind"] == "ConfigMap" else d["metadata"]["name"])
            for d in docs} == {("Service", "learner"), ("StatefulSet", "learner"), ("Deployment", "actor"),
                               ("ConfigMap", "learner-settings"), ("ConfigMap", "actor-settings")}
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_schema_check_fails_on_a_misspelt_field():
    statefulset = copy.deepcopy(find(render("base"), "StatefulSet", "learner"))
    statefulset["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # resources, misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, KUBERNETES_VERSION, strict=True)


def test_every_container_has_requests_limits_and_runs_locked_down():
    docs = render("base")
    for kind, name in (("StatefulSet", "learner"), ("Deployment", "actor")):
        spec = pod_spec(docs, kind, name)
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == 10001
        for container in spec["containers"]:
            where = f"{name}/{container['name']}"
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= container["resources"][bound].keys(), where
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"], where
            assert context["readOnlyRootFilesystem"] is True, where
            assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}, where  # the one place they write


def test_the_learner_is_probed_through_grpc_health_and_stops_gracefully():
    docs = render("base")
    spec = pod_spec(docs, "StatefulSet", "learner")
    learner = spec["containers"][0]
    [grpc_port] = [p["containerPort"] for p in learner["ports"] if p["name"] == "grpc"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert learner[probe]["grpc"] == {"port": grpc_port}, probe
    assert container_env(docs, learner)["SEEDFLEET_ADDRESS"].endswith(f":{grpc_port}")
    service = find(docs, "Service", "learner")["spec"]
    assert {"name": "grpc", "port": grpc_port, "targetPort": "grpc", "appProtocol": "grpc"} in service["ports"]
    actor = pod_spec(docs, "Deployment", "actor")["containers"][0]
    assert container_env(docs, actor)["SEEDFLEET_LEARNER"] == f"learner:{grpc_port}"  # the Service's name
    assert spec["terminationGracePeriodSeconds"] >= 60  # room for the last checkpoint, as compose's 60 s
    assert find(docs, "StatefulSet", "learner")["spec"]["replicas"] == 1


def test_the_gpu_overlay_gives_the_learner_the_gpu_build_and_one_gpu():
    base, gpu = render("base"), render("gpu")
    learner = pod_spec(gpu, "StatefulSet", "learner")
    assert {c["image"] for c in learner["containers"]} == {"seedfleet-learner:gpu"}
    assert learner["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert learner["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert find(gpu, "Deployment", "actor") == find(base, "Deployment", "actor")


def test_every_container_variable_and_argument_parses_as_a_seedfleet_flag(monkeypatch):
    docs = render("base")
    for kind, name in (("StatefulSet", "learner"), ("Deployment", "actor")):
        spec = pod_spec(docs, kind, name)
        container = spec["containers"][0]
        assert "command" not in container  # the image's entrypoint, seedfleet
        command, *args = container["args"]
        env = container_env(docs, container)
        assert unknown_variables(env, command) == [], name
        for variable, value in env.items():
            monkeypatch.setenv(variable, value)
        build_parser(command, env.get("SEEDFLEET_ALGO", "vtrace"), env.get("SEEDFLEET_ENV", "CartPole-v1")
                     ).parse_args(args)  # exits on a value that does not parse
    assert unknown_variables({"SEEDFLEET_ENVS": "8", "SEEDFLEET_NO_SUCH_FLAG": "1"}, "actor") == [
        "SEEDFLEET_NO_SUCH_FLAG"]


class LocalPods:
    """Containers of the rendered objects started as processes here: the image's entrypoint becomes
    this Python's `-m seedfleet.deploy.cli`, each volume a directory under `root` (the token Secret: a folder
    with `make certs`' token), and the learner's port a free one on loopback, both for its [::] and
    for the Service name `learner` the actors dial."""

    def __init__(self, docs: list[dict], root: Path, procs: list, secrets: dict[str, Path]):
        self.docs, self.root, self.procs, self.secrets = docs, root, procs, secrets
        self.grpc_port, self.port = 8470, free_port()

    def volume_dir(self, pod: str, volume: dict) -> Path:
        if "secret" in volume:
            return self.secrets[volume["secret"]["secretName"]]
        return self.root / pod / volume["name"]  # a claim of the volumeClaimTemplates, or an emptyDir

    def local(self, value: str, mounts: dict[str, Path]) -> str:
        """`value` with a path under a mount moved to its directory here (the longest mount
        that holds it, once) and the learner's addresses made local."""
        holding = [t for t in mounts if value == t or value.startswith(t + "/")]
        if holding:
            target = max(holding, key=len)
            value = str(mounts[target]) + value[len(target):]
        for host in ("[::]", "learner"):
            value = value.replace(f"{host}:{self.grpc_port}", f"127.0.0.1:{self.port}")
        return value

    def start(self, kind: str, name: str) -> Proc:
        spec = pod_spec(self.docs, kind, name)
        container = spec["containers"][0]
        volumes = {v["name"]: v for v in spec.get("volumes", ())}
        volumes |= {t["metadata"]["name"]: t["metadata"]
                    for t in find(self.docs, kind, name)["spec"].get("volumeClaimTemplates", ())}
        mounts = {m["mountPath"]: self.volume_dir(name, volumes[m["name"]]) for m in container["volumeMounts"]}
        for directory in mounts.values():
            directory.mkdir(parents=True, exist_ok=True)
        env = {k: self.local(v, mounts) for k, v in container_env(self.docs, container).items()}
        env["PYTHONPATH"] = str(ROOT)
        cwd = Path(self.local(container["workingDir"], mounts)) if "workingDir" in container else self.root
        assert container.get("command", IMAGE_ENTRYPOINT) == IMAGE_ENTRYPOINT
        proc = Proc([sys.executable, "-m", "seedfleet.deploy.cli", *container["args"]], env=env, cwd=cwd)
        self.procs.append(proc)
        return proc

    def wait_until_ready(self, learner: Proc, timeout: float = 120.0) -> None:
        """The readiness probe: the gRPC health service at the probe's port answers SERVING."""
        probe = pod_spec(self.docs, "StatefulSet", "learner")["containers"][0]["readinessProbe"]["grpc"]
        assert probe["port"] == self.grpc_port
        deadline = time.monotonic() + timeout
        while check(f"127.0.0.1:{self.port}", timeout_s=1.0) != "SERVING":
            assert learner.popen.poll() is None, f"the learner exited:\n{learner.output()[-3000:]}"
            assert time.monotonic() < deadline, learner.output()[-3000:]
            time.sleep(0.5)


def wait_for_frames(learner: Proc, actors: list[Proc], since: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while not (len(frames := progress_frames(learner.lines[since:])) >= 3 and 0 < frames[-3] < frames[-2] < frames[-1]):
        assert time.monotonic() < deadline, learner.output()[-3000:] + "\n" + actors[0].output()[-2000:]
        assert all(p.popen.poll() is None for p in (learner, *actors)), learner.output()[-3000:]
        time.sleep(0.5)
    return frames[-1]


def wait_for_connections(learner: Proc, count: int, timeout: float = 60.0) -> None:
    """Until the learner has logged `count` actor connections: each actor retries on its own
    backoff, so one may come back some seconds after frames flow again."""
    deadline = time.monotonic() + timeout
    while sum("learner actor connected" in line for line in learner.lines) < count:
        assert time.monotonic() < deadline, learner.output()[-3000:]
        time.sleep(0.5)
    assert sum("learner actor connected" in line for line in learner.lines) == count


def test_the_pods_run_as_local_processes_and_actors_find_a_restarted_learner(tmp_path, procs):
    docs = render("base")
    settings = {"learner-settings": {"SEEDFLEET_ENV": "CartPole-v1", "SEEDFLEET_PROGRESS_INTERVAL_S": "1"},
                "actor-settings": {"SEEDFLEET_ENVS": "4"}}
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            doc["data"] |= settings[doc["metadata"]["name"].rsplit("-", 1)[0]]
    make_credentials(tmp_path / "secrets")
    pods = LocalPods(docs, tmp_path, procs, {"seedfleet-token": tmp_path / "secrets"})
    learner = pods.start("StatefulSet", "learner")
    pods.wait_until_ready(learner)
    actors = [pods.start("Deployment", "actor") for _ in range(2)]
    frames = wait_for_frames(learner, actors, 0)
    wait_for_connections(learner, 2)

    assert learner.stop(signal.SIGTERM, timeout=60) == 0, learner.output()[-2000:]  # the pod is deleted
    logdir = tmp_path / "learner" / "data" / "runs" / "CartPole-v1-vtrace-seed0"
    assert json.loads((logdir / "summary.json").read_text())["frames"] >= frames
    learner = pods.start("StatefulSet", "learner")  # its replacement, on the same claim
    pods.wait_until_ready(learner)
    learner.wait_for(r"restored|resum", timeout=30)
    wait_for_frames(learner, actors, 0)
    wait_for_connections(learner, 2)  # both came back on their own
    assert learner.stop(signal.SIGTERM, timeout=60) == 0
