"""Source trees of commits, for running two commits' curate side by side (PYTHONPATH=<tree>).

A commit is exported with `git archive` once into <trees>/<sha> (no .git: nothing to
prune if a run is stopped, and no worktree entry in the shared repository); a path is
used as it is, uncommitted changes included.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("CURATE_IDENTITY_CACHE", Path.home() / ".cache" / "curate-identity"))
"""Shared by every checkout on this machine: trees/<sha> here, and the identity check's
outputs (so a base commit is exported and built once, whichever worktree asks)."""


def rev_parse(rev: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"not a commit: {rev} ({done.stderr.strip()})")
    return done.stdout.strip()


def export(sha: str, trees: Path) -> Path:
    """The commit's files (git archive), extracted once into trees/<sha>.

    Extracted beside it and renamed into place, so two runs exporting the same commit at
    once (the identity check and compare_commits) never see a half-written tree.
    """
    tree = trees / sha
    if (tree / ".exported").exists():
        return tree
    trees.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=trees))
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", sha],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(partial, filter="data")
        (partial / ".exported").write_text(sha + "\n")
        if tree.exists() and not (tree / ".exported").exists():  # an export stopped half-way
            stale = trees / f".stale-{sha[:12]}-{os.getpid()}"
            tree.rename(stale)
            shutil.rmtree(stale)
        with contextlib.suppress(OSError):  # fails when another run renamed its copy first
            partial.rename(tree)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return tree


def resolve_head(head: str | None, trees: Path) -> tuple[Path, str]:
    if head is None:
        return REPO, f"this checkout ({describe_checkout(REPO)})"
    if Path(head).is_dir():
        path = Path(head).resolve()
        return path, f"{path} ({describe_checkout(path)})"
    sha = rev_parse(head)
    return export(sha, trees), f"{head} = {sha[:12]}"


def describe_checkout(path: Path) -> str:
    rev = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if not rev:
        return "not a git checkout"
    dirty = subprocess.run(
        ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{rev}{' with uncommitted changes' if dirty else ''}"
