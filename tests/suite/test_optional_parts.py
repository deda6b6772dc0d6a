"""Protocol parts other than config and run are optional and checked when declared; the docs'
minimal protocol, saved as a file of the suite, gets a generated `run` verb and breaks no command."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from vistabench.errors import InputError
from vistabench.suite import Protocol

COIN = textwrap.dedent('''
    import dataclasses
    from dataclasses import dataclass

    import numpy as np

    from vistabench.config import RunConfig, option
    from vistabench.store import Record
    from vistabench.suite import Protocol, declare


    @dataclass(frozen=True, kw_only=True)
    class CoinConfig(RunConfig):
        protocol = "coin"
        bias: float = option(0.5, low=0, high=1, help="probability of heads")
        flips: int = option(100, low=1, help="flips per run")
        seed: int = option(0, low=0, help="seed")


    def run(config, *, store=None, work_dir=None):
        heads = np.random.default_rng(config.seed).random(config.flips) < config.bias
        record = Record(protocol="coin", dataset="coin", method=f"bias-{config.bias}", seed=config.seed,
                        split_hash=None, settings=config.to_dict(), metrics={"heads": float(heads.mean())})
        return [dataclasses.replace(record, id=store.add(record)) if store is not None else record]


    declare(Protocol(name="coin", title="Coin", question="is the coin fair?", order=90,
                     run=f"{__name__}:run", config=f"{__name__}:CoinConfig"))
''')

# run the CLI with the coin file added to the installed suite package's search path
DRIVER = textwrap.dedent('''
    import sys
    import vistabench.suite as suite
    suite.__path__.append(sys.argv[1])
    from vistabench.cli import main
    sys.exit(main(sys.argv[2:]))
''')


@pytest.fixture()
def coin_suite(tmp_path):
    folder = tmp_path / "extra_suite"
    folder.mkdir()
    (folder / "coin.py").write_text(COIN)
    return folder


def _cli(folder, *args):
    return subprocess.run([sys.executable, "-c", DRIVER, str(folder), *args], capture_output=True, text=True,
                          timeout=120)


def test_minimal_protocol_gets_a_generated_run_verb(coin_suite, tmp_path):
    out = _cli(coin_suite, "coin", "run", "--bias", "0.9", "--seed", "1", "--store", str(tmp_path / "s.sqlite"),
               "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["protocol"] == "coin" and record["metrics"]["heads"] > 0.7 and record["id"] is not None
    printed = _cli(coin_suite, "coin", "run", "--bias", "0.2", "--print-config", "--json")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["bias"] == 0.2
    bad = _cli(coin_suite, "coin", "run", "--bias", "2")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--bias" in bad.stderr


def test_other_commands_skip_a_protocol_without_those_parts(coin_suite, tmp_path):
    assert _cli(coin_suite, "--help").returncode == 0
    assert _cli(coin_suite, "longtail", "--help").returncode == 0
    store = str(tmp_path / "s.sqlite")
    assert _cli(coin_suite, "coin", "run", "--store", store).returncode == 0
    report = _cli(coin_suite, "report", "--store", store, "--out", str(tmp_path / "rep"), "--json")
    assert report.returncode == 0, report.stderr
    no_table = _cli(coin_suite, "coin", "table", "--store", store)
    assert no_table.returncode == 2  # no such verb: argparse's one line
    demo = _cli(coin_suite, "demo", "--only", "coin", "--out", str(tmp_path / "d"))
    assert demo.returncode == 2 and "declares no demo" in demo.stderr


@pytest.mark.parametrize("kwargs, message", [
    ({"split": ""}, "part 'split' must be a 'module:attribute' reference or left out"),
    ({"table": "vistabench.report.longtail"}, "part 'table' must name an attribute"),
    ({"cli": "not a module"}, "part 'cli' must be a 'module' reference"),
    ({"run": None}, "part 'run' must be a 'module:attribute' reference, got None"),
    ({"name": "Coin Flip"}, "Protocol.name: expected a lower-case identifier"),
])
def test_declaration_checked_where_it_is_made(kwargs, message):
    base = {"name": "coin", "title": "Coin", "question": "?", "order": 1, "run": "m:run", "config": "m:Config"}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Protocol(**{**base, **kwargs})


def test_absent_part_names_protocol_and_part():
    decl = Protocol(name="coin", title="Coin", question="?", order=1, run="m:run", config="m:Config")
    assert not decl.has("table") and decl.references() == {"run": "m:run", "config": "m:Config"}
    with pytest.raises(InputError, match="protocol 'coin' has no 'table' part"):
        decl.part("table")
