"""A real recipe with the pii stage, run by the CLI with the network blocked: no connection
is attempted, and no detected value appears in anything the run wrote or printed.

One run (two worker processes, `-vv` logging, rejected/ output, every action) is scanned
for each planted value in its original form, lowercased, NFKC-normalised and as its
digits alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import pytest
import yaml
from conftest import write_jsonl

pytest.importorskip("presidio_analyzer")

VALUES = {
    "EMAIL_ADDRESS": ["jane.doe+news@mail.example.co.uk", "ÖMER.KAYA@corp.example.org"],
    "PHONE_NUMBER": ["+44 20 7946 0958", "(415) 555-2671", "+49 30 901820"],
    "IP_ADDRESS": ["203.0.113.77", "2001:db8:85a3::8a2e:370:7334"],
    "IBAN_CODE": ["DE89 3704 0044 0532 0130 00", "GB29NWBK60161331926819"],
    "CREDIT_CARD": ["4111-1111-1111-1111"],
}

BLOCK = textwrap.dedent(
    """
    import socket, sys
    LOG = sys.argv[1]
    def _blocked(*args, **kwargs):
        with open(LOG, "a") as f:
            f.write(repr(args[:2]) + "\\n")
        raise OSError("network blocked by the test")
    socket.socket.connect = _blocked
    socket.socket.connect_ex = _blocked
    socket.create_connection = _blocked
    socket.getaddrinfo = _blocked
    sys.argv = ["curate", "-vv", "run", sys.argv[2]]
    from curate.cli import main
    main()
    """
)


def forms(value: str) -> set[str]:
    out = {value, value.lower(), unicodedata.normalize("NFKC", value)}
    digits = "".join(c for c in value if c.isdigit())
    if len(digits) >= 7:
        out.add(digits)
    return out


def test_offline_run_leaks_nothing(tmp_path: Path) -> None:
    docs = [
        {
            "id": "mail",
            "text": f"Write to {VALUES['EMAIL_ADDRESS'][0]} or {VALUES['EMAIL_ADDRESS'][1]}.",
        },
        {"id": "call", "text": "Phones: " + "; ".join(VALUES["PHONE_NUMBER"]) + "."},
        {"id": "net", "text": "Hosts " + " and ".join(VALUES["IP_ADDRESS"]) + " are ours."},
        {"id": "bank", "text": "Pay to " + " or ".join(VALUES["IBAN_CODE"]) + " by Friday."},
        {"id": "card", "text": f"Card {VALUES['CREDIT_CARD'][0]} expires 12/29."},
        {"id": "plain", "text": "Nothing personal in this sentence."},
    ]
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:3])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[3:])
    recipe = {
        "name": "pii",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "stages": [{"pii": {"entities": {
            "EMAIL_ADDRESS": "hash", "PHONE_NUMBER": "mask", "IP_ADDRESS": "redact",
            "IBAN_CODE": "redact", "CREDIT_CARD": "drop_document"}}}],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 2},
    }  # fmt: skip
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TLDEXTRACT")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), CURATE_CACHE=str(home / "cc"),
               CURATE_PII_KEY="a-test-key-of-32-bytes-0123456789")  # fmt: skip
    attempts = tmp_path / "attempts.log"
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK, str(attempts), str(tmp_path / "recipe.yaml")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not attempts.exists(), attempts.read_text()
    # Built once, in the driver before it forked the two workers, which inherit it
    # (fork_setup.set_up_before_fork); each worker building its own would log it again.
    assert len(re.findall(r"pii: analyzer built in process \d+", proc.stderr)) == 1
    assert not (home / ".cache" / "python-tldextract").exists()

    version = tmp_path / "out" / "pii" / "v1"
    manifest = json.loads((version / "manifest.json").read_text())
    stage = manifest["stages"][0]
    assert stage["removed"] == {"pii:CREDIT_CARD": 1}
    counters = stage["counters"]
    assert counters["values/EMAIL_ADDRESS/hash"] == 2
    assert counters["values/PHONE_NUMBER/mask"] == 3
    assert counters["values/IP_ADDRESS/redact"] == 2
    assert counters["values/IBAN_CODE/redact"] == 2
    assert counters["documents/changed"] == 4
    assert "pii_key_id" in stage["software"]

    printed = proc.stdout + proc.stderr
    written = [p for root in (tmp_path / "out", home) for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".arrow" and "rejected" in p.parts for p in written)
    for entity, values in VALUES.items():
        for value in values:
            for form in forms(value):
                assert form not in printed, (entity, form)
                for path in written:
                    assert form.encode() not in path.read_bytes(), (entity, form, path)
