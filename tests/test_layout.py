"""The import rules that keep the layout honest, read from every module's imports.

The TensorFlow-free core (`seedfleet/`) stands under both sides; the actor side never
loads TensorFlow, the learner or the algorithms; the learner never loads the actor
package; the algorithms know nothing of gRPC or processes; the bench does not reach back
into the CLI that runs it. Nothing imports Keras.
"""

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

SUBPACKAGES = ("server", "actor_client", "algorithms", "deploy", "bench")  # folders installed as seedfleet.<name>
RULES = {  # layer: layers and top-level modules it must not import
    "seedfleet": ("tensorflow", "keras", *SUBPACKAGES),
    "actor_client": ("tensorflow", "keras", "server", "algorithms", "deploy", "bench"),
    "server": ("keras", "actor_client", "deploy", "bench"),
    "algorithms": ("keras", "grpc", "grpc_health", "server", "actor_client", "deploy", "bench", "subprocess",
                   "multiprocessing"),
    "bench": ("keras", "deploy"),  # the CLI in deploy/ runs the bench; both launch through seedfleet.processes
    "deploy": ("keras",),  # no Keras anywhere: TensorFlow's import of it is skipped (server/native_logs.py)
}


def installed_name(folder: tuple[str, ...]) -> tuple[str, ...]:
    """The package a repository folder installs as: server/ is seedfleet.server, and so on."""
    return ("seedfleet", *folder) if folder and folder[0] in SUBPACKAGES else folder


def layer(module: str) -> str:
    """The layer of an imported module: seedfleet.server.x is "server", seedfleet.wire the
    core "seedfleet", tensorflow.python "tensorflow"."""
    parts = module.split(".")
    return parts[1] if parts[0] == "seedfleet" and len(parts) > 1 and parts[1] in SUBPACKAGES else parts[0]


def imported_modules(path: Path) -> list[str]:
    """Every module `path` imports, lazily or not, by its installed name; relative imports resolved."""
    package = installed_name(path.relative_to(ROOT).parent.parts)
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            names.append(".".join([*base, *([node.module] if node.module else [])]))
    return names


def python_files(folder: str) -> list[Path]:
    """The hand-written modules of a repository folder (the core's generated wire code left out)."""
    return [p for p in Path(ROOT, folder).rglob("*.py") if "_pb2" not in p.name]


@pytest.mark.parametrize("package", RULES)
def test_package_imports_only_what_its_layer_may(package):
    files = python_files(package)
    assert files
    broken = [f"{p.relative_to(ROOT)} imports {name}" for p in files for name in imported_modules(p)
              if layer(name) in RULES[package]]
    assert not broken, broken


def test_every_import_of_the_project_uses_its_installed_name():
    """The wheel installs `seedfleet` alone: `import server` would work from a checkout and
    fail from the wheel. (deploy's engine, certs and fleet check import each other relatively,
    so the Makefile runs them from a checkout with no install.)"""
    bare = [f"{p.relative_to(ROOT)} imports {name}" for folder in ("seedfleet", *SUBPACKAGES, "tests")
            for p in python_files(folder) for name in imported_modules(p) if name.split(".")[0] in SUBPACKAGES]
    assert not bare, bare


def test_no_code_picks_an_algorithm_by_name_outside_the_registry():
    """Adding an algorithm is one folder and one registry line: no `algo ==` branch, no
    `hasattr` probing of agents or trainers anywhere else."""
    pattern = re.compile(r"""algo\w*\s*[!=]=|[!=]=\s*["'](vtrace|r2d2)["']|\bhasattr\(""")
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for package in ("server", "deploy", "bench", "algorithms", "seedfleet", "actor_client")
             for p in Path(ROOT, package).rglob("*.py") if p.name != "registry.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found


def test_no_cycle_between_packages():
    """The layers' import graph (lazy imports included) is acyclic: the CLI and the bench
    on top, the learner and the actor beside each other, algorithms and the core below."""
    packages = [*RULES, "deploy"]
    edges = {package: {layer(name) for p in python_files(package) for name in imported_modules(p)}
             & (set(packages) - {package}) for package in packages}

    def cycle_from(package: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if package in path:
            return (*path, package)
        return next((c for nxt in sorted(edges[package]) if (c := cycle_from(nxt, (*path, package)))), None)

    cycles = [c for package in packages if (c := cycle_from(package, ()))]
    assert not cycles, cycles[0]
    assert "deploy" not in edges["bench"]  # the CLI runs the bench, never the reverse


def test_every_package_is_installed():
    """pyproject.toml lists packages by hand: a folder left out would be missing from an
    installed learner or actor (the Docker images), though the tests, run from the tree, pass."""
    listed = set(re.search(r"packages = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.S).group(1)
                 .replace('"', "").replace("\n", "").replace(" ", "").split(","))
    found = {".".join(installed_name(p.parent.relative_to(ROOT).parts)) for p in Path(ROOT).glob("*/**/__init__.py")
             if p.parts[len(Path(ROOT).parts)] in {"seedfleet", *SUBPACKAGES}}
    assert found <= listed, sorted(found - listed)
    assert {name.split(".")[0] for name in listed} == {"seedfleet"}


def test_no_atari_branch_outside_the_atari_family():
    """Env families are chosen in one registry (seedfleet/envs/registry.py): nothing outside
    the ALE family branches on Atari, by an `atari` flag or by the family's name."""
    pattern = re.compile(r"""if[^#]*\batari\b|atari\s*:\s*bool|[!=]=\s*["']ale["']""", re.I)
    files = [p for folder in ("seedfleet", *SUBPACKAGES) for p in python_files(folder)
             if p.relative_to(ROOT).as_posix() != "seedfleet/envs/ale_family.py"]
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found


def test_every_graph_is_traced_without_autograph():
    """Graphs are made by algorithms/graph.py's `graph_function`, which leaves AutoGraph's
    rewrite of every traced function out (half of a learner step's first trace): a bare
    `tf.function` elsewhere would bring it back, and hide a Python `if` on a tensor."""
    pattern = re.compile(r"\btf\.function\(|@tf\.function")
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for folder in ("seedfleet", *SUBPACKAGES)
             for p in python_files(folder) if p.relative_to(ROOT).as_posix() != "algorithms/graph.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found


def test_the_wheel_installs_one_top_level_package(tmp_path):
    """`pip wheel .` of the repository's files: everything under `seedfleet/`, the folders
    mapped to its sub-packages, and no other top-level name in a user's site-packages."""
    import shutil
    import subprocess
    import sys
    import zipfile

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    source = tmp_path / "source"
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(source)], capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("seedfleet-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"seedfleet"}
    for module in ("seedfleet/server/learner.py", "seedfleet/actor_client/actor.py", "seedfleet/envs/ale_family.py",
                   "seedfleet/algorithms/replay_trainer.py", "seedfleet/deploy/cli.py", "seedfleet/bench/learn.py",
                   "seedfleet/v1/actor_learner_pb2.py"):
        assert module in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "seedfleet = seedfleet.deploy.cli:main" in entry_points


CLI_TENSORFLOW_FREE = (
    "deploy/cli.py", "deploy/flags.py", "deploy/launch_config.py", "actor_client/actor.py", "bench/config.py",
    "bench/plot.py", "server/config.py", "algorithms/registry.py", "algorithms/network_config.py",
    "algorithms/impala/config.py", "algorithms/appo/config.py", "algorithms/r2d2/config.py", "algorithms/sac/config.py",
)


def test_what_the_cli_reads_before_a_command_runs_never_imports_tensorflow():
    """The CLI answers --help, a mistaken flag or an unknown env from these modules alone
    (the configs, the registry's records): TensorFlow loads only once a command runs
    (tests/test_cli.py checks the same at run time, imports of imports included)."""
    found = [f"{path} imports {name}" for path in CLI_TENSORFLOW_FREE
             for name in imported_modules(ROOT / path) if layer(name) in ("tensorflow", "keras")]
    assert not found, found
    from seedfleet.deploy.cli import COMMANDS

    config_files = {name.split(":")[0].removeprefix("seedfleet.").replace(".", "/") + ".py"
                    for command in COMMANDS.values() for name in command.configs}
    assert config_files <= set(CLI_TENSORFLOW_FREE), config_files - set(CLI_TENSORFLOW_FREE)
