"""An actor whose inference round trips the bench reads: `python -m seedfleet.bench.timed_actor FILE
CONFIG_JSON` runs `seedfleet actor` with the ActorConfig fields in CONFIG_JSON and, on
exit, writes its round trips to FILE as JSON (actor_client/round_trips.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from seedfleet.actor_client.actor import Actor, ActorConfig, main


def command(round_trips_file: Path, config: ActorConfig) -> list[str]:
    return [sys.executable, "-m", "seedfleet.bench.timed_actor", str(round_trips_file),
            json.dumps(dataclasses.asdict(config))]


if __name__ == "__main__":
    path, fields = Path(sys.argv[1]), json.loads(sys.argv[2])

    def write_round_trips(actor: Actor) -> None:
        actor.round_trips.write(path)

    sys.exit(main(ActorConfig(**fields), on_exit=write_round_trips))
