"""The committed wire code is what `make proto` generates from proto/ today."""

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

GENERATED = ["actor_learner_pb2.py", "actor_learner_pb2.pyi", "actor_learner_pb2_grpc.py"]


def test_generated_code_is_not_stale(tmp_path: Path):
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^proto:.*\n\t(.+)$", makefile, flags=re.M).group(1)
    command = recipe.replace("$(PY)", sys.executable).replace("$(PROTO_SRC)", "proto/seedfleet/v1/actor_learner.proto")
    command = command.replace("--python_out=.", f"--python_out={tmp_path}")
    command = command.replace("--pyi_out=.", f"--pyi_out={tmp_path}")
    command = command.replace("--grpc_python_out=.", f"--grpc_python_out={tmp_path}")
    subprocess.run(command, shell=True, cwd=ROOT, check=True)
    for name in GENERATED:
        fresh = (tmp_path / "seedfleet" / "v1" / name).read_text()
        committed = (ROOT / "seedfleet" / "v1" / name).read_text()
        assert fresh == committed, f"seedfleet/v1/{name} is stale: run `make proto`"
