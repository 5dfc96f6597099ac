"""What a kept run ran with, stated against today's defaults.

A variant's variant.json names the flags it was given beyond the defaults of its day, and
those defaults move. The run's own config.json (seedfleet/settings.py) holds every flag as
it resolved, so the report compares that with what the same case resolves to today
(`seedfleet run ... --print-config`) and names the difference as flags: a record that stays
right whatever the defaults become.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from seedfleet.settings import flag_words, read_config

# Flags that name the run rather than what it learns with: every seed and log dir differs, a
# resumed stretch drops --fresh, and `seedfleet run` puts its learner on a free loopback port.
PER_RUN = frozenset({"seed", "logdir", "fresh", "address"})

# Flags added after config.json records began, and what a run ran with before each existed: a
# record without the flag states that value (acting was asynchronous before --sync-acting, and
# SAC's actor stepped beside its critics before --actor-after-critics).
BEFORE_THE_FLAG = {"sync_acting": False, "actor_after_critics": False}

Defaults = Callable[[Sequence[str]], dict]  # a case's `seedfleet run` command -> its flags' values today


def todays_defaults(command: Sequence[str]) -> dict:
    """Every flag's value for `command` (a `seedfleet run` command line, from the Python
    executable on) as it resolves today."""
    out = subprocess.run([*command, "--print-config"], capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout)


def newer_flags_given(record: dict, defaults: dict, given: Sequence[str]) -> list[str]:
    """The words of `given` (a variant's flags) that set flags newer than the record: what
    the record cannot say, and the variant's own file does."""
    absent = {key for key in defaults if key not in record and key not in PER_RUN}
    words: list[str] = []
    taking = False
    for word in given:
        if word.startswith("--"):
            taking = word[2:].replace("-", "_") in absent or word[5:].replace("-", "_") in absent  # --no-x
        if taking:
            words.append(word)
    return words


def differences(stretches: list[dict], defaults: dict, given: Sequence[str] = ()) -> str:
    """What a run's stretches held beyond `defaults`: the flags (`--flag value`) or "today's
    defaults"; stretches that differ from each other are joined by "then". A flag only one
    side has (added or removed since) says nothing about the other, and is left out, unless
    the variant's flags (`given`) set it: those are added as given, or it is one whose value
    before it existed is known (BEFORE_THE_FLAG)."""
    parts = []
    for stretch in stretches:
        record = {**{k: v for k, v in BEFORE_THE_FLAG.items() if k in defaults}, **stretch["flags"]}
        changed = {k: v for k, v in record.items() if k not in PER_RUN and defaults.get(k, v) != v}
        words = [*flag_words(changed), *newer_flags_given(record, defaults, given)]
        parts.append(f"`{' '.join(words)}`" if words else "today's defaults")
    return " then ".join(dict.fromkeys(parts))


def configs_markdown(runs: list[tuple[str, Path, Sequence[str]]], command: Sequence[str],
                     defaults: Defaults) -> list[str]:
    """A line per run with a config.json (`runs`: label, log dir and the variant's flags): what
    it ran with against today's defaults of its algorithm. Runs from before config.json get
    none; their variant.json says what they were given. `defaults` is asked once per algorithm,
    and only when some run has a record."""
    recorded = [(label, stretches, given) for label, logdir, given in runs if (stretches := read_config(logdir))]
    if not recorded:
        return []
    asked: dict[tuple[str, ...], dict] = {}

    def ask(words: Sequence[str]) -> dict:
        if tuple(words) not in asked:
            asked[tuple(words)] = defaults(words)
        return asked[tuple(words)]

    def today(stretches: list[dict]) -> dict:
        """Today's defaults of the algorithm the run trained with (a variant may change --algo);
        --algo itself stays in the line when it is not the case's."""
        algo, case = stretches[-1]["flags"].get("algo"), ask(command)
        if not algo or case.get("algo", algo) == algo:
            return case
        return {**ask([*command, "--algo", algo]), "algo": case["algo"]}

    return ["", "Against today's defaults, by each run's config.json:", "",
            *(f"- {label}: {differences(stretches, today(stretches), given)}" for label, stretches, given in recorded)]
