"""The contenders of the normalize + exact dedup benchmark, and how to run each.

Each contender gets a scratch folder that is emptied before every run (so no cache
or earlier output is reused), a command to run in its own process, and a way to
read back and digest what it wrote. The semantics are the same for all: NFC only,
then drop a document whose normalized UTF-8 text equals an earlier one's, keeping
the first in file order, then line order.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks import outputs
from benchmarks.corpus import CorpusInfo

CURATE_DATASET = "bench"


@dataclass
class Contender:
    """A peer implemented in benchmarks/peers/<module>.py, run by this interpreter."""

    name: str
    module: str
    scratch_arg: bool = False

    def folder(self, work: Path) -> Path:
        return work / "runs" / self.name.replace(" ", "-").replace(":", "")

    def prepare(self, work: Path) -> None:
        shutil.rmtree(self.folder(work), ignore_errors=True)
        self.folder(work).mkdir(parents=True)

    def command(self, corpus: CorpusInfo, work: Path) -> list[str]:
        folder = self.folder(work)
        args = [str(corpus.folder), str(folder / "out")]
        if self.scratch_arg:
            args.append(str(folder / "scratch"))
        return [sys.executable, "-m", f"benchmarks.peers.{self.module}", *args]

    def env(self, work: Path) -> dict[str, str]:
        return {**contender_env(), "HF_HOME": str(work / "hf-home")}

    def digest(self, work: Path) -> outputs.Digest:
        return outputs.read_folder(self.folder(work) / "out")


@dataclass
class Curate(Contender):
    """curate through its CLI, ``curate run recipe.yaml``, as a user would run it."""

    executable: str = "curate"
    fsync: bool = True
    workers: int = 2

    def recipe(self, corpus: CorpusInfo, work: Path) -> str:
        # The lead's contract for this benchmark: every cleanup but NFC off, exact
        # dedup with defaults, Arrow shards of 256 MB, no rejected-rows output.
        return f"""\
name: {CURATE_DATASET}
inputs: ["{corpus.folder}/*.jsonl"]
text_field: text
id_field: id
stages:
  - normalize: {{form: NFC, strip: false, collapse_spaces: false, max_newlines: 0, \
newlines: false, remove_control: false}}
  - exact_dedup: {{}}
output:
  root: {self.folder(work) / "out"}
  shard_size: 256MB
  rejected: false
  fsync: {"true" if self.fsync else "false"}
engine:
  kind: local
  workers: {self.workers}
"""

    def command(self, corpus: CorpusInfo, work: Path) -> list[str]:
        path = self.folder(work) / "recipe.yaml"
        path.write_text(self.recipe(corpus, work))
        return [self.executable, "run", str(path)]

    def env(self, work: Path) -> dict[str, str]:
        return contender_env()

    def shards(self, work: Path) -> list[Path]:
        return outputs.curate_shards(self.folder(work) / "out", CURATE_DATASET)

    def digest(self, work: Path) -> outputs.Digest:
        return outputs.read_curate(self.folder(work) / "out", CURATE_DATASET)


def curate_folder(executable: str) -> Path:
    """The folder holding the curate package that this CLI imports."""
    interpreter = Path(shutil.which(executable) or executable).read_text().splitlines()[0][2:]
    probe = "import curate, os; print(os.path.dirname(os.path.dirname(curate.__file__)))"
    done = subprocess.run(
        [interpreter, "-c", probe], capture_output=True, text=True, check=True, cwd="/"
    )
    return Path(done.stdout.strip())


def contender_env() -> dict[str, str]:
    """This environment, but letting Python cache bytecode as an installed tool would.

    Sessions here export PYTHONDONTWRITEBYTECODE=1; with it, a curate run from a
    source checkout would compile every module in every worker on every run, while
    the peers load bytecode pip compiled at install time.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def precompile(folders: list[Path]) -> None:
    """Write bytecode for source checkouts, as installing a package would (with
    `contender_env`, the runs then read it instead of compiling every module each time)."""
    for folder in folders:
        compileall.compile_dir(folder, quiet=1, workers=2)


def default_curate_executable() -> str:
    beside = Path(sys.executable).parent / "curate"
    return str(beside) if beside.exists() else "curate"


def all_contenders(curate_executable: str) -> list[Contender]:
    return [
        Curate("curate", "", executable=curate_executable, fsync=True),
        Curate("curate (fsync: false)", "", executable=curate_executable, fsync=False),
        Contender("floor", "floor"),
        Contender("HF datasets", "hf_datasets", scratch_arg=True),
        Contender("datatrove", "datatrove_peer", scratch_arg=True),
    ]
