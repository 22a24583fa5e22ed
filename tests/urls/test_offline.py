"""url_filter never reaches the network nor writes a cache: tldextract reads only the
public-suffix snapshot bundled in its wheel. Checked in a fresh process with an audit hook
that records (and refuses) every socket operation that reaches out (a name look-up, a
connection, a datagram) and a HOME of its own; the same harness
sees a default tldextract try to fetch the list, so the check can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

SCRIPT = r"""
import json, sys
events = []
REACH = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
         "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg"}
def hook(name, args):  # urllib3's import opens and binds a socket on ::1: not a reach out
    if name in REACH:
        events.append(name)
        raise OSError("network refused by the test")
sys.addaudithook(hook)
if sys.argv[1] == "default":
    import tldextract
    parts = tldextract.TLDExtract()("https://a.b.example.co.uk/x")
else:
    import pyarrow as pa
    from curate.io.batches import ID
    from curate.stages.base import StageContext
    from curate.stages.url_filter import UrlFilter, UrlFilterParams
    params = UrlFilterParams(block=[{"name": "bad", "path": "bad.txt"}])
    stage = UrlFilter(params, StageContext(base_dir=sys.argv[2]))
    stage.setup()
    batch = pa.record_batch({ID: ["1", "2"], "text": ["a", "b"],
                             "url": ["https://a.b.example.co.uk/x", "https://ok.org/"]})
    result = stage.process(batch)
    assert result.batch.column(ID).to_pylist() == ["2"], result.batch
    stage.software(), stage.describe()
print(json.dumps(events))
"""


def run(mode: str, tmp_path: Path) -> tuple[list[str], list[Path]]:
    home = tmp_path / mode / "home"
    home.mkdir(parents=True)
    (tmp_path / "bad.txt").write_text("example.co.uk\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TLDEXTRACT")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1]), list(home.rglob("*"))


def test_url_filter_makes_no_network_attempt_and_writes_no_cache(tmp_path: Path) -> None:
    events, written = run("curate", tmp_path)
    assert events == [] and written == []


def test_the_check_sees_a_default_tldextract_reach_out(tmp_path: Path) -> None:
    events, _ = run("default", tmp_path)
    assert any(e in ("socket.getaddrinfo", "socket.connect") for e in events), events
