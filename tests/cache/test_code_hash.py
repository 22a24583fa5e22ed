"""A stage's code hash follows its code: an edit to normalize.py changes normalize's hash and no
other stage's; the same code gives the same hash in any process and from any folder; a user
stage's hash follows its file and the modules of its package it imports.

Each hash is taken in a fresh process with a copy of the code on PYTHONPATH, as a later run
would see an edited checkout (hashes are cached per process).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import curate
from curate.cache.code import code_hash, stage_code_hashes
from curate.stages.registry import BUILTIN, resolve

_SCRIPT = """
import json, sys
import curate
from curate.cache.code import code_hash
from curate.stages.registry import BUILTIN, resolve
assert curate.__file__.startswith(sys.argv[1]), curate.__file__
names = sys.argv[2:] or list(BUILTIN)
print(json.dumps({name: code_hash(resolve(name)) for name in names}))
"""


def _hashes(path: Path, *names: str) -> dict[str, str]:
    """Code hashes of stages (built-in names or dotted paths), in a new process on `path`."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(path), *names],
        env=env, cwd=path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, str] = json.loads(out.stdout)
    return result


def _copy_curate(folder: Path) -> Path:
    shutil.copytree(
        Path(curate.__file__).parent,
        folder / "curate",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return folder


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.fixture(scope="module")
def untouched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _hashes(_copy_curate(tmp_path_factory.mktemp("untouched")))


def test_the_same_code_hashes_the_same_in_any_process_and_folder(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    here = {name: code_hash(resolve(name)) for name in BUILTIN}
    assert untouched == here  # another process, another folder: module names and bytes only
    assert _hashes(_copy_curate(tmp_path)) == untouched
    assert len(set(here.values())) == len(BUILTIN)
    assert all(len(h) == 64 for h in here.values())


def test_editing_normalize_changes_normalize_and_no_other_stage(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    root = _copy_curate(tmp_path)
    # a real edit: the default Unicode form's constant moves to a module-level name
    _edit(
        root / "curate" / "stages" / "normalize.py",
        "from curate.arrow_text import utf8_slices\n",
        "from curate.arrow_text import utf8_slices\n\n_EDITED = 1  # a bug fix would go here\n",
    )
    edited = _hashes(root)
    changed = {name for name in BUILTIN if edited[name] != untouched[name]}
    assert changed == {"normalize"}  # no built-in stage imports normalize


def test_editing_a_library_module_changes_exactly_the_stages_that_import_it(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    root = _copy_curate(tmp_path)
    # imported by minhash_dedup and by no other stage
    lsh = root / "curate" / "minhash" / "lsh.py"
    lsh.write_text(lsh.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    # imported by tokenize, so by chat_template too (it imports tokenize)
    policy = root / "curate" / "tokenizers" / "policy.py"
    policy.write_text(policy.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edited = _hashes(root)
    changed = {name for name in BUILTIN if edited[name] != untouched[name]}
    assert changed == {"minhash_dedup", "tokenize", "chat_template"}


def test_editing_the_stage_base_changes_every_stage(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    root = _copy_curate(tmp_path)
    base = root / "curate" / "stages" / "base.py"
    base.write_text(base.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edited = _hashes(root)
    assert all(edited[name] != untouched[name] for name in BUILTIN)


_USER_STAGE = """
from __future__ import annotations

from typing import TYPE_CHECKING

from curate.stages.base import MapStage

if TYPE_CHECKING:
    from mylab import typing_only

LIMIT = {limit}


class Upper(MapStage):
    name = "upper"

    def process(self, batch):
        from .helpers import upper  # inside a function, relative: still counted

        return upper(batch, self.text_field)
"""


def test_a_user_stage_follows_its_file_and_its_package_modules(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    pkg = tmp_path / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "stage.py").write_text(textwrap.dedent(_USER_STAGE.format(limit=1)))
    (pkg / "helpers.py").write_text("def upper(batch, field):\n    return batch\n")
    (pkg / "typing_only.py").write_text("X = 1\n")
    (pkg / "unrelated.py").write_text("Y = 1\n")
    (tmp_path / "curate").symlink_to(Path(curate.__file__).parent)

    def user_hash() -> str:
        return _hashes(tmp_path, "mylab.stage:Upper")["mylab.stage:Upper"]

    first = user_hash()
    assert user_hash() == first
    (pkg / "unrelated.py").write_text("Y = 2\n")
    (pkg / "typing_only.py").write_text("X = 2\n")  # imported for type checking only
    assert user_hash() == first
    (pkg / "stage.py").write_text(textwrap.dedent(_USER_STAGE.format(limit=2)))
    second = user_hash()
    assert second != first
    (pkg / "helpers.py").write_text("def upper(batch, field):\n    return batch  # fixed\n")
    assert user_hash() not in {first, second}


def test_stage_code_hashes_are_per_stage_in_order() -> None:
    from curate.stages.exact_dedup import ExactDedup
    from curate.stages.normalize import Normalize

    stages = [
        Normalize(Normalize.Params()),
        ExactDedup(ExactDedup.Params()),
        Normalize(Normalize.Params(form="NFKC")),
    ]
    hashes = stage_code_hashes(stages)
    assert hashes == [code_hash(Normalize), code_hash(ExactDedup), code_hash(Normalize)]
    assert hashes[0] != hashes[1]


_RUN = """
import sys
from curate.cli import main
sys.exit(main())
"""


def _small_project(project: Path) -> Path:
    """Nine short documents and a normalize + exact_dedup recipe over them, in `project`."""
    (project / "data").mkdir(parents=True)
    (project / "data" / "a.jsonl").write_text(
        "".join(json.dumps({"id": str(i), "text": f"doc {i % 3}"}) + "\n" for i in range(9))
    )
    recipe = project / "recipe.yaml"
    recipe.write_text(
        "name: t\ninputs: [data/*.jsonl]\nid_field: id\n"
        "stages: [{normalize: {}}, {exact_dedup: {}}]\n"
        "output: {root: out, fsync: false}\nengine: {workers: 1}\n"
    )
    return recipe


def test_an_edit_to_a_built_in_stage_rebuilds_and_the_manifest_names_each_stages_code(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    """curate's version number is the same before and after a bug fix: the code hash in the
    fingerprint is what rebuilds, and each stage record says which code made it."""
    root = _copy_curate(tmp_path / "code")
    project = tmp_path / "project"
    recipe = _small_project(project)

    def run() -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(root)}
        subprocess.run(
            [sys.executable, "-c", _RUN, "run", "--quiet", str(recipe)],
            env=env, cwd=project, check=True, capture_output=True,
        )  # fmt: skip
        latest = (project / "out" / "t" / "LATEST").read_text().strip()
        manifest = json.loads((project / "out" / "t" / latest / "manifest.json").read_text())
        return {s["name"]: s["software"]["code_sha256"] for s in manifest["stages"]}

    first = run()
    assert first == {n: untouched[n] for n in ("normalize", "exact_dedup")}
    assert run() == first and not (project / "out" / "t" / "v2").exists()  # up to date
    _edit(
        root / "curate" / "stages" / "normalize.py",
        "from curate.arrow_text import utf8_slices\n",
        "from curate.arrow_text import utf8_slices\n\n_EDITED = 1  # a bug fix would go here\n",
    )
    second = run()
    assert (project / "out" / "t" / "v2").is_dir()
    assert second["exact_dedup"] == first["exact_dedup"]
    assert second["normalize"] != first["normalize"]


_REMEMBERED = """
import json, sys
from curate.cache import code
from curate.stages.registry import BUILTIN, resolve
code.remember_imports(open(sys.argv[1]).read())
if sys.argv[2] == "no-parse":
    def refuse(*args, **kwargs):
        raise AssertionError("parsed a source the memo holds")
    code._parsed_imports = refuse
print(json.dumps({name: code.code_hash(resolve(name)) for name in BUILTIN}))
"""


def _remembered_hashes(path: Path, memo: Path, mode: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run(
        [sys.executable, "-c", _REMEMBERED, str(memo), mode],
        env=env, cwd=path, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, str] = json.loads(out.stdout)
    return result


def _memo_of(path: Path, memo: Path) -> None:
    script = (
        "import sys\nfrom curate.cache import code\nfrom curate.stages.registry import "
        "BUILTIN, resolve\n[code.code_hash(resolve(n)) for n in BUILTIN]\n"
        "open(sys.argv[1], 'w').write(code.imports_to_keep())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(path)}
    subprocess.run([sys.executable, "-c", script, str(memo)], env=env, cwd=path, check=True)


def test_remembered_imports_skip_every_parse_and_hash_the_same(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    """Parsing is what hashing costs: with the imports an earlier run found, no source is
    parsed, and every hash is the one a run without them computes."""
    root = _copy_curate(tmp_path / "code")
    memo = tmp_path / "code-imports.json"
    _memo_of(root, memo)
    good = json.loads(memo.read_text())
    damaged = {**good, "imports": {k: [] for k in good["imports"]}}  # sum of the old lists
    assert _remembered_hashes(root, memo, "no-parse") == untouched
    for junk in ("", "not json", '{"format": "0:0.0", "imports": {}}', "[1, 2]",
                 json.dumps(damaged), json.dumps({**good, "sha256": "0" * 64})):  # fmt: skip
        memo.write_text(junk)  # ignored: parsed again, same hashes
        assert _remembered_hashes(root, memo, "parse") == untouched


def test_a_remembered_import_list_serves_only_the_source_it_was_found_in(
    untouched: dict[str, str], tmp_path: Path
) -> None:
    """normalize.py edited to import minhash's lsh: its remembered imports (of the old bytes)
    must not be used, or lsh would be missing from normalize's hash and an edit to lsh would
    serve normalize's stale entries."""
    root = _copy_curate(tmp_path / "code")
    memo = tmp_path / "code-imports.json"
    _memo_of(root, memo)
    _edit(
        root / "curate" / "stages" / "normalize.py",
        "from curate.arrow_text import utf8_slices\n",
        "from curate.arrow_text import utf8_slices\nfrom curate.minhash import lsh  # noqa\n",
    )
    fresh = _hashes(root)
    assert fresh["normalize"] != untouched["normalize"]
    assert _remembered_hashes(root, memo, "parse") == fresh
    lsh = root / "curate" / "minhash" / "lsh.py"
    lsh.write_text(lsh.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edited = _remembered_hashes(root, memo, "parse")
    assert edited["normalize"] != fresh["normalize"]  # lsh is in normalize's closure now


def test_a_build_keeps_the_imports_its_hashes_found_and_an_up_to_date_run_parses_nothing(
    tmp_path: Path,
) -> None:
    """`curate run` saves the memo in the dataset's .cache after a build; the next, up-to-date
    run (what a trainer's `prepare()` costs) hashes every stage without parsing a source."""
    recipe = _built_project(tmp_path)
    memo = recipe.parent / "out" / "t" / ".cache" / "code-imports.json"
    assert json.loads(memo.read_text())["imports"]
    before = memo.stat().st_mtime_ns
    prepare = (
        "import sys\nimport curate\nfrom curate.cache import code\n"
        "def refuse(*a, **k):\n    raise AssertionError('parsed')\n"
        "code._parsed_imports = refuse\n"
        "v = curate.prepare(sys.argv[1])\nprint(v.path.name)\n"
    )
    assert _python(prepare, recipe).strip() == "v1"
    assert memo.stat().st_mtime_ns == before  # an up-to-date run writes nothing


def _built_project(tmp_path: Path) -> Path:
    """`_small_project` in tmp_path/project, built once by `curate run`: its recipe."""
    project = tmp_path / "project"
    recipe = _small_project(project)
    subprocess.run([sys.executable, "-c", _RUN, "run", "--quiet", str(recipe)],
                   cwd=project, check=True, capture_output=True)  # fmt: skip
    return recipe


def _python(script: str, recipe: Path) -> str:
    """What `script` prints, run in a fresh interpreter with the recipe as its argument."""
    out = subprocess.run([sys.executable, "-c", script, str(recipe)], cwd=recipe.parent,
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_a_process_that_prepares_again_and_again_reads_the_memo_once(tmp_path: Path) -> None:
    """A trainer's or a notebook's process calls `prepare()` before every launch. The code
    hashes are computed once per process, so only the first call needs what earlier runs
    parsed; reading and checking the memo on every call cost each up-to-date `prepare()`
    half a millisecond (issue 25 pt 4)."""
    recipe = _built_project(tmp_path)
    script = (
        "import json, sys\nimport curate\nfrom curate.cache import code\n"
        "reads = []\nremember = code.remember_imports\n"
        "code.remember_imports = lambda text: (reads.append(text is not None), remember(text))\n"
        "calls = []\n"
        "for _ in range(3):\n"
        "    before = len(reads)\n"
        "    assert curate.prepare(sys.argv[1]).up_to_date\n"
        "    calls.append(len(reads) - before)\n"
        "print(json.dumps(calls))\n"
    )
    assert json.loads(_python(script, recipe)) == [1, 0, 0]


def test_a_memo_not_read_yet_is_kept_by_the_next_build(tmp_path: Path) -> None:
    """A process whose hashes never needed the dataset's memo (computed before it was
    named) still keeps the memo's other entries when a build saves it again: they serve
    other recipes of the same folder."""
    script = (
        "import json\nfrom curate.cache import code\n"
        "from curate.stages.registry import resolve\n"
        "code.code_hash(resolve('normalize'))\n"
        "body = {'f' * 40: ['curate.other']}\n"
        "text = json.dumps({'format': code._memo_format(), 'sha256': code._body_sum(body), "
        "'imports': body})\n"
        "code.remember_imports_from('elsewhere', lambda: text)\n"
        "kept = json.loads(code.imports_to_keep())['imports']\n"
        "print(json.dumps(['f' * 40 in kept, len(kept) > 1]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == [True, True]
