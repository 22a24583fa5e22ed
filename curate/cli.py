"""The `curate` command. Thin: parses options, calls the API, renders results and errors.

A `CurateError` (a problem the user can fix) is printed as its message alone, with no
traceback, and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import gc as garbage_collector
import logging
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from curate.errors import CurateError

F = TypeVar("F", bound=Callable[..., Any])


def _user_errors(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CurateError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def _interrupt_once(signum: int, frame: Any) -> None:
    """The first Ctrl-C stops the run, which terminates its workers and exits; a second one
    must not interrupt that (it printed a traceback), so from now on Ctrl-C is ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@click.group()
@click.version_option(package_name="curate")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def main(verbose: int) -> None:
    """curate: raw text in, training-ready versioned Arrow datasets out."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.argument("recipe", type=click.Path(path_type=Path))
@click.option("--workers", type=click.IntRange(min=1), help="Override engine.workers.")
@click.option(
    "--engine", "engine_kind", type=click.Choice(["local", "ray"]), help="Override engine.kind."
)
@click.option("--address", help="Ray cluster address (auto, host:port); implies --engine ray.")
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
@click.option(
    "--verify",
    "verify_mode",
    type=click.Choice(["sizes", "full"]),
    default="sizes",
    show_default=True,
    help="How a published version is checked before it is called up to date: every file's "
    "size, or also every byte's sha256 (as `curate verify`). A damaged one is built anew.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Build nothing: say what differs from the newest version (inputs and how each change "
    "was recognised, recipe keys, library versions, stage code) and whether a run would build.",
)
@_user_errors
def run(
    recipe: Path,
    workers: int | None,
    engine_kind: str | None,
    address: str | None,
    quiet: bool,
    verify_mode: str,
    explain: bool,
) -> None:
    """Build the dataset RECIPE describes, or say it is up to date."""
    if explain:
        from curate.explain_recipe import explain as explain_recipe
        from curate.recipe import Recipe

        click.echo(explain_recipe(Recipe.load(recipe)))
        return
    from curate.progress import StderrProgress
    from curate.runner import no_progress
    from curate.runner import run as run_recipe
    from curate.summary import render_summary

    target: Any = recipe
    if engine_kind or address:  # where a run happens is not part of what it makes
        from curate.recipe import Recipe

        loaded = Recipe.load(recipe)
        change: dict[str, Any] = {"kind": engine_kind or ("ray" if address else None)}
        change["address"] = address
        engine = loaded.engine.model_copy(update={k: v for k, v in change.items() if v})
        target = loaded.model_copy(update={"engine": engine})
    previous, interrupted = signal.signal(signal.SIGINT, _interrupt_once), False
    try:
        version = run_recipe(
            target,
            progress=no_progress if quiet else StderrProgress(),
            workers=workers,
            verify=verify_mode,  # type: ignore[arg-type]  # click checked the choice
        )
    except KeyboardInterrupt:  # click would print a bare "Aborted!"
        interrupted = True
        click.echo(
            "\ninterrupted: completed partitions are kept; run the same recipe again to resume",
            err=True,
        )
        garbage_collector.freeze()  # exiting: as after a build, below
        sys.exit(130)
    finally:
        if not interrupted:  # interrupted, Ctrl-C stays ignored until the process has exited
            signal.signal(signal.SIGINT, previous)
    if version.up_to_date:
        click.echo(f"{version.dataset} is up to date: {version.name} at {version.path}")
        return
    if version.rebuilt_because:
        click.echo(f"{version.rebuilt_because}; built {version.name} beside it")
    click.echo(f"wrote {version.dataset} {version.name} to {version.path}")
    click.echo(render_summary(version))
    # The process exits next; its last collection walks every object a build made (Presidio,
    # spaCy, memos): 0.85 CPU-s with one worker, for nothing. Files and Ray's shutdown are
    # closed explicitly or by atexit, which still run.
    garbage_collector.freeze()


@main.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--examples",
    "selector",
    metavar="STAGE[:REASON]",
    help="Print the removed documents kept as examples for a stage (name or position), "
    "or one of its reasons.",
)
@_user_errors
def show(path: Path, selector: str | None) -> None:
    """Summarize a version (a version folder, or a dataset folder for its LATEST)."""
    from curate.summary import render_summary
    from curate.version import open as open_version

    version = open_version(path)
    if selector is not None:
        from curate.examples.show import render, select

        click.echo(render(select(version.examples(), selector)))
        return
    click.echo(repr(version))
    click.echo(render_summary(version))


@main.command()
@click.argument("version", type=click.Path(exists=True, path_type=Path))
@click.option("--id", "doc_id", help="A document's id: found through the lineage index.")
@click.option("--row", help="SHARD:ROW, the shard by index or path: the row's documents.")
@click.option("--token", type=click.IntRange(min=0), help="With --row: the document holding it.")
@click.option("--match", help="A regular expression searched in the version's text and inputs.")
@_user_errors
def trace(
    version: Path, doc_id: str | None, row: str | None, token: int | None, match: str | None
) -> None:
    """Where a document came from (file, line, offset, input hash), what each stage did to it
    and where it is (shard, row, tokens, split). Positions and types only, never its text."""
    from curate.lineage.trace import Tracer
    from curate.version import open as open_version

    if sum(x is not None for x in (doc_id, row, match)) != 1:
        raise CurateError("trace: give one of --id, --row SHARD:ROW or --match REGEX")
    if token is not None and row is None:
        raise CurateError("trace: --token goes with --row")
    tracer = Tracer(open_version(version))
    if doc_id is not None:
        traces = tracer.by_id(doc_id)
    elif row is not None:
        shard, _, number = row.rpartition(":")
        if not shard or not number.isdigit():
            raise CurateError(f"trace: --row takes SHARD:ROW, not {row!r}")
        traces = tracer.by_row(shard, int(number), token)
    else:
        assert match is not None
        traces = tracer.by_match(match)
    if not traces:
        raise CurateError(f"trace: no document of {tracer.version.path} matches")
    click.echo("\n\n".join(str(t) for t in traces))


@main.command()
@click.argument("dataset", type=click.Path(exists=True, path_type=Path))
@click.option("--ids", "ids_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A file of document ids, one per line.")  # fmt: skip
@click.option("--source", help="A glob of input names or paths: every document read from them.")
@click.option("--match", help="A regular expression: every document whose text it finds.")
@click.option("--reason", help="Why (kept in the manifest; never the text). Required.")
@click.option("--where", is_flag=True, help="List what still holds forgotten documents.")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes for the run.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@_user_errors
def forget(
    dataset: Path,
    ids_file: Path | None,
    source: str | None,
    match: str | None,
    reason: str | None,
    workers: int | None,
    quiet: bool,
    where: bool,
) -> None:
    """Publish a new version of DATASET (its recipe, or its folder) without some documents,
    and keep them out of every later run (curate.forget)."""
    if where:  # what still holds them, under the root and outside it
        from curate.forget.where import holders

        found = holders(dataset)
        click.echo("\n".join(h.line() for h in found) or "nothing holds them")
        return
    from curate.forget_command import forget as forget_documents
    from curate.forget_command import selection
    from curate.progress import StderrProgress, no_progress

    if reason is None:
        raise CurateError("forget: --reason is required (it is kept in the manifest)")
    done = forget_documents(dataset, selection(ids_file, source, match), reason,
                            progress=no_progress if quiet else StderrProgress(),
                            workers=workers)  # fmt: skip
    version = done.version
    lines = f" and {done.lines} quarantined record(s)" if done.lines else ""
    click.echo(f"forgot {done.found} documents ({done.added} new){lines}: "
               f"{version.dataset} {version.name} at {version.path}")  # fmt: skip


@main.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@_user_errors
def verify(path: Path) -> None:
    """Re-hash every file of a version and check it against its manifest and counts."""
    from curate.verify import verify as verify_folder
    from curate.version import open as open_version

    # A dataset folder means its LATEST, opened unchecked: verify reports every problem below.
    folder = path
    if not (path / "manifest.json").is_file() and not (path / "export.json").is_file():
        folder = open_version(path, check=False).path
    problems = verify_folder(folder)
    if problems:
        for problem in problems:
            click.echo(f"{folder}: {problem}", err=True)
        raise SystemExit(1)
    click.echo(f"{folder}: OK")


@main.command()
@click.argument("version", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--to", "to", required=True, type=click.Choice(["megatron", "mds", "parquet", "jsonl"]),
    help="The format: Megatron's .bin/.idx, MosaicML MDS, Parquet or JSONL.",
)  # fmt: skip
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--dtype", type=click.Choice(["auto", "uint16", "int32"]), default="auto", show_default=True,
    help="megatron: the ids' type; auto: uint16 when every id the tokenizer can produce is "
    "below 65,536, else int32.",
)  # fmt: skip
@_user_errors
def export(version: Path, to: str, out: Path, dtype: str) -> None:
    """Export VERSION (a version folder, or a dataset folder for its LATEST) to OUT, a new
    folder that appears complete or not at all, with an export.json `curate verify` checks."""
    from curate.export import export as run_export

    manifest = run_export(version, to, out, dtype=dtype)
    rows = sum(p.rows for p in manifest.parts)
    tokens = sum(p.tokens or 0 for p in manifest.parts)
    size = sum(f.bytes for f in manifest.files)
    what = f"{rows:,} rows" + (f", {tokens:,} {manifest.dtype} tokens" if manifest.dtype else "")
    parts = ", ".join(p.name for p in manifest.parts)
    click.echo(f"{out}: {to} export of {manifest.source.dataset} {manifest.source.version} "
               f"({parts}): {what}, {len(manifest.files)} files, {size:,} bytes")  # fmt: skip


@main.command()
@click.argument("mixture", type=click.Path(path_type=Path))
@_user_errors
def mix(mixture: Path) -> None:
    """Publish the mixture version MIXTURE (a mixture.yaml) describes: its sources' shards
    hard-linked, an index of their samples interleaved by weight, target vs achieved tokens.
    Builds missing recipe sources first; a no-op when the mixture is up to date."""
    from curate.mix.prepare import prepare as prepare_mixture

    version = prepare_mixture(mixture)
    record = version.manifest["mixture"]
    click.echo(f"{version.path}: {record['samples']:,} samples, {record['tokens']:,} tokens "
               f"(budget {record['budget']:,})")  # fmt: skip
    for s in record["sources"]:
        click.echo(f"  {s['name']}: {s['dataset']} {s['version']} {s['fingerprint'][:12]}  "
                   f"weight {s['weight']:.4g}  tokens {s['tokens']:,} of {s['target_tokens']:,.0f}"
                   f"  samples {s['samples']:,}  epochs {s['epochs']:.3f}")  # fmt: skip


@main.command()
@click.argument("root", type=click.Path(exists=True, path_type=Path))
@_user_errors
def log(root: Path) -> None:
    """List the versions under ROOT (an output root or one dataset folder)."""
    from curate.history import log_rows, render_log

    click.echo(render_log(log_rows(root), root))


@main.command()
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@_user_errors
def diff(a: Path, b: Path) -> None:
    """What differs between two versions (version folders, or dataset folders for their
    LATEST): recipe keys, inputs and how each change was recognised, library versions, stage
    code, settings, then per-stage counts."""
    from curate.history import diff as diff_versions

    click.echo(diff_versions(a, b))


@main.command()
@click.argument("root", type=click.Path(exists=True, path_type=Path))
@click.option("--keep", type=click.IntRange(min=1), help="Versions to keep.")
@click.option(
    "--cache", is_flag=True, help="Free the stage cache (.cache/stages); alone, no version goes."
)
@click.option(
    "--all", "all_datasets", is_flag=True, help="Prune every dataset under an output root."
)
@click.option("--dry-run", is_flag=True, help="Print what would be removed, remove nothing.")
@click.option(
    "--purge-forgotten",
    is_flag=True,
    help="Remove every version and cache entry of the dataset ROOT still holding a document "
    "curate forget removed.",
)
@click.option("--wait", is_flag=True, help="--purge-forgotten: wait for readers, not refuse.")
@_user_errors
def gc(
    root: Path,
    keep: int | None,
    cache: bool,
    all_datasets: bool,
    dry_run: bool,
    purge_forgotten: bool,
    wait: bool,
) -> None:
    """Remove old versions of the dataset folder ROOT, keeping the newest KEEP, LATEST and any
    held by a reader, and the staging folders of interrupted runs; with --cache, free its
    stage cache (kept while a run uses it). Only what curate made is removed (a version's own
    manifest must name it); links are never followed. An output root of several datasets
    needs --all. Exit status 1 when something was refused."""
    from curate.gc import collect, render

    if purge_forgotten:
        from curate.forget.purge import purge

        actions = purge(root, dry_run, wait)
        click.echo(render(actions, dry_run))
        if any(a.refused for a in actions):
            sys.exit(1)
        return
    actions = collect(root, keep, dry_run=dry_run, all_datasets=all_datasets, cache=cache)
    click.echo(render(actions, dry_run))
    if any(a.refused for a in actions):
        sys.exit(1)


@main.command()
@click.argument("version", type=click.Path(exists=True, path_type=Path))
@click.argument("other", required=False, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write [default: DATASET-VERSION.html here, or "
    "DATASET-A-vs-B.html for two versions].",
)
@_user_errors
def report(version: Path, other: Path | None, output: Path | None) -> None:
    """Write an HTML report of VERSION (a version folder, or a dataset folder for its LATEST):
    the funnel through the stages, what each removed and why, inputs, tokenizer, software,
    recipe. With OTHER, compare the two (counts side by side, plots overlaid). One
    self-contained file that reads nothing from the network; needs `curate[report]`."""
    from curate.report import report as make_report
    from curate.report.svg import matplotlib_or_fail
    from curate.version import open as open_version

    matplotlib_or_fail()  # before reading anything: the missing extra is the error to see
    if output is not None and not output.absolute().parent.is_dir():  # before drawing
        raise CurateError(f"cannot write the report to {output}: no folder {output.parent}")
    a = open_version(version)
    b = open_version(other) if other is not None else None
    name = f"{a.dataset}-{a.name}" + (f"-vs-{b.name}" if b is not None else "")
    written = make_report(a, b).save(output or Path(f"{name}.html"))
    click.echo(f"wrote {written}")


@main.command(name="inspect-filter")
@click.argument("recipe", type=click.Path(exists=True, path_type=Path))
@click.option("--stage", required=True, help="The filter: its name or 0-based position.")
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Documents to read, spread over the partitions.",
)
@click.option(
    "--examples",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Removed documents shown per rule.",
)
@_user_errors
def inspect_filter_cmd(recipe: Path, stage: str, sample: int, examples: int) -> None:
    """Show what a filter would remove from a sample, rule by rule; writes nothing."""
    from curate.inspect_filter import inspect_filter

    click.echo(str(inspect_filter(recipe, stage, sample=sample, examples=examples)))


@main.command(name="schemas")
@click.option("--out", type=click.Path(path_type=Path), default=Path("schemas"), show_default=True)
@click.option(
    "--readme",
    type=click.Path(path_type=Path),
    default=Path("README.md"),
    show_default=True,
    help="README whose recipe reference section to regenerate (skipped if absent).",
)
@click.option("--check", is_flag=True, help="Fail if the files on disk differ from the code.")
@_user_errors
def schemas_cmd(out: Path, readme: Path, check: bool) -> None:
    """Write (or check) the JSON schemas and README's recipe reference from the code's models."""
    from curate.reference import update_readme
    from curate.schemas import write_schemas

    stale = write_schemas(out, check=check)
    if readme.exists() and update_readme(readme, check=check):
        stale.append(str(readme))
    if check and stale:
        raise CurateError(f"stale schema files: {', '.join(stale)}; run `curate schemas`")
    click.echo("schemas are up to date" if check else f"wrote schemas to {out}")


if __name__ == "__main__":
    main()
