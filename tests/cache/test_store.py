"""The stage cache store: entries on real disk, checked before reuse, evicted least recently
used first, shared between real processes; nothing outside its root is ever reached."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from curate.cache.names import FORMAT
from curate.cache.store import CacheSpec, StageCache, stored_bytes

KEY = "0123456789abcdef" * 2
REPO = Path(__file__).resolve().parents[2]


def spec_at(tmp_path: Path, budget: int = 10**9, **kw: object) -> CacheSpec:
    return CacheSpec(tmp_path / "ds" / ".cache" / "stages", budget, fsync=False, **kw)  # type: ignore[arg-type]


def key(i: int) -> str:
    return f"{i:032x}"


def put(
    cache: StageCache, k: str, payload: bytes = b"rows" * 100, meta: dict | None = None
) -> bool:
    with cache.writer(k) as w:
        w.path("rows.arrow").write_bytes(payload)
        w.path("rejected.arrow").write_bytes(payload[::-1])
        return w.commit(meta if meta is not None else {"chunks": 2})


def entry_dir(spec: CacheSpec, k: str) -> Path:
    return spec.root / k[:2] / k


def temps(spec: CacheSpec) -> list[str]:
    return sorted(p.name for p in spec.root.iterdir() if p.name.startswith(".tmp-"))


# -- roundtrip and layout ----------------------------------------------------------------
def test_roundtrip_and_layout(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    assert cache.get(KEY) is None
    assert put(cache, KEY, b"abc" * 1000, {"chunks": 3, "counts": {"in": 5}})
    entry = cache.get(KEY)
    assert entry is not None and entry.key == KEY
    assert entry.meta == {"chunks": 3, "counts": {"in": 5}}
    assert entry.file("rows.arrow").read_bytes() == b"abc" * 1000  # type: ignore[union-attr]
    assert entry.file("missing.arrow") is None
    folder = entry_dir(spec, KEY)
    assert entry.path == folder
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "rejected.arrow", "rows.arrow"]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["format"] == FORMAT and meta["key"] == KEY and meta["created"]
    assert meta["files"]["rows.arrow"]["size"] == 3000
    assert len(meta["files"]["rows.arrow"]["xxh3_128"]) == 32
    assert temps(spec) == []
    assert cache.size() == stored_bytes(spec.root) > 6000
    cache.close()


def test_abort_and_exception_leave_nothing(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    w = cache.writer(KEY)
    w.path("rows.arrow").write_bytes(b"x")
    w.abort()
    with pytest.raises(RuntimeError), cache.writer(KEY) as w2:
        w2.path("rows.arrow").write_bytes(b"x")
        raise RuntimeError("stage failed")
    with pytest.raises(TypeError), cache.writer(KEY) as w3:  # meta that is not JSON
        w3.path("rows.arrow").write_bytes(b"x")
        w3.commit({"bad": object()})
    assert cache.get(KEY) is None
    assert temps(spec) == [] and not (spec.root / KEY[:2] / KEY).exists()


def test_pickled_cache_opens_its_own_descriptors(tmp_path: Path) -> None:
    cache = StageCache(spec_at(tmp_path))
    put(cache, KEY)
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.get(KEY) is not None and copy.spec == cache.spec


# -- damaged entries are recomputed, never trusted ---------------------------------------
def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGE = {
    "flipped byte": lambda d: _flip(d / "rows.arrow"),
    "truncated": lambda d: os.truncate(d / "rows.arrow", 10),
    "grown": lambda d: (d / "rows.arrow").open("ab").write(b"!"),
    "file deleted": lambda d: (d / "rejected.arrow").unlink(),
    "file replaced by a folder": lambda d: (
        (d / "rejected.arrow").unlink(),
        (d / "rejected.arrow").mkdir(),
    ),
    "extra file": lambda d: (d / "planted.arrow").write_bytes(b"x"),
    "checksum edited": lambda d: (d / "meta.json").write_text(
        (d / "meta.json").read_text().replace('"xxh3_128": "', '"xxh3_128": "0', 1)[:-1] + "}"
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_removed_and_recomputed(tmp_path: Path, damage: str) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    put(cache, KEY, b"first" * 200)
    DAMAGE[damage](entry_dir(spec, KEY))
    assert cache.get(KEY) is None
    assert not entry_dir(spec, KEY).exists()  # removed, so the recomputed entry can land
    assert temps(spec) == []
    assert put(cache, KEY, b"second" * 200)
    entry = cache.get(KEY)
    assert entry is not None and entry.file("rows.arrow").read_bytes() == b"second" * 200  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "meta",
    [
        "not json",
        "",
        json.dumps({"format": "other", "key": KEY, "files": {}, "meta": {}}),
        json.dumps({"format": FORMAT, "key": key(7), "files": {}, "meta": {}}),  # another key
        json.dumps(
            {
                "format": FORMAT,
                "key": KEY,
                "files": {"../../x": {"size": 1, "xxh3_128": "0"}},
                "meta": {},
            }
        ),
        json.dumps({"format": FORMAT, "key": KEY, "files": [], "meta": {}}),
    ],
    ids=["garbage", "empty", "other-format", "other-key", "escaping-name", "files-list"],
)
def test_an_entry_without_our_meta_is_never_used_nor_deleted(tmp_path: Path, meta: str) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    put(cache, KEY)
    folder = entry_dir(spec, KEY)
    (folder / "meta.json").write_text(meta)
    (tmp_path / "x").write_text("outside")
    assert cache.get(KEY) is None  # recomputed, not trusted
    assert not put(cache, KEY)  # the folder is not provably ours: our entry is dropped
    assert cache.clear() == 0 or folder.exists()
    assert folder.is_dir() and (folder / "rows.arrow").exists() and (tmp_path / "x").exists()
    assert temps(spec) == []


def test_a_folder_without_meta_is_not_used(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    folder = entry_dir(spec, KEY)
    folder.mkdir(parents=True)
    (folder / "rows.arrow").write_bytes(b"half")
    cache = StageCache(spec)
    assert cache.get(KEY) is None
    cache.clear()
    assert (folder / "rows.arrow").read_bytes() == b"half"


# -- nothing outside the root ------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    ["../" + KEY, KEY + "/..", "..", "", "ABCDEF0123456789", "0123abc", "f" * 65, KEY + "\n", 12],
)
def test_keys_that_are_not_hex_are_refused(tmp_path: Path, bad: object) -> None:
    cache = StageCache(spec_at(tmp_path))
    with pytest.raises(ValueError):
        cache.get(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        cache.writer(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["../x", "a/b", "/etc/passwd", ".hidden", "meta.json", "", "a\0b"])
def test_file_names_that_could_escape_are_refused(tmp_path: Path, bad: str) -> None:
    spec = spec_at(tmp_path)
    with StageCache(spec).writer(KEY) as w, pytest.raises(ValueError):
        w.path(bad)


def test_a_file_planted_by_an_odd_name_fails_the_commit(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    with cache.writer(KEY) as w:
        w.path("rows.arrow").write_bytes(b"x")
        os.symlink(tmp_path / "elsewhere", w.path("rows.arrow").parent / "link")
        with pytest.raises(OSError):
            w.commit({})
    assert cache.get(KEY) is None and temps(spec) == []


def test_links_in_the_cache_are_never_followed(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    put(cache, KEY)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    shard = spec.root / KEY[:2]
    os.rename(shard, tmp_path / "moved")
    os.symlink(tmp_path / "moved", shard)
    assert cache.get(KEY) is None  # a link at the shard: not entered
    os.unlink(shard)
    os.symlink(outside, shard)
    cache.clear()
    assert (outside / "keep").read_text() == "mine" and shard.is_symlink()
    # a link at .cache: the root is refused, nothing is made through it
    other = tmp_path / "other"
    (other / "ds").mkdir(parents=True)
    os.symlink(outside, other / "ds" / ".cache")
    with pytest.raises(OSError):
        StageCache(CacheSpec(other / "ds" / ".cache" / "stages", 10**9)).get(KEY)
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert stored_bytes(other / "ds" / ".cache" / "stages") == 0


# -- LRU eviction --------------------------------------------------------------------------
def test_eviction_removes_least_recently_used_first_down_to_the_budget(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    keys = [key(i) for i in range(4)]
    for i, k in enumerate(keys):
        put(cache, k, bytes([i]) * 1000)
        t = 1_000_000 + 1000 * i  # committed in this order, long ago
        os.utime(entry_dir(spec, k) / "meta.json", (t, t))
    sizes = {k: stored_bytes(entry_dir(spec, k)) for k in keys}
    assert cache.get(keys[0]) is not None  # used now: the most recent
    budget = sizes[keys[0]] + sizes[keys[3]]
    assert StageCache(spec_at(tmp_path, budget=budget)).evict() == 0  # `cache` holds it
    cache.close()
    small = StageCache(spec_at(tmp_path, budget=budget))
    freed = small.evict()
    assert freed == sizes[keys[1]] + sizes[keys[2]]
    assert [small.get(k) is not None for k in keys] == [True, False, False, True]
    assert small.size() <= budget
    assert small.evict() == 0  # already within budget


def test_clear_and_dry_run(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    for i in range(3):
        put(cache, key(i))
    (spec.root / "README").write_text("a file someone put here")
    (spec.root / "zz").mkdir()
    would = cache.clear(dry_run=True)
    assert would == sum(stored_bytes(entry_dir(spec, key(i))) for i in range(3))
    assert all(cache.get(key(i)) is not None for i in range(3))
    cache.close()
    assert cache.clear() == would
    assert all(cache.get(key(i)) is None for i in range(3))
    assert sorted(p.name for p in spec.root.iterdir()) == [".lock", "README", "zz"]


# -- file modes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("file_mode", "dir_mode", "umask"),
    [(0o600, 0o700, 0o000), (0o640, 0o750, 0o077), (0o660, 0o770, 0o022)],
)
def test_entries_get_the_recipe_modes_whatever_the_umask(
    tmp_path: Path, file_mode: int, dir_mode: int, umask: int
) -> None:
    spec = spec_at(tmp_path, file_mode=file_mode, dir_mode=dir_mode)
    old = os.umask(umask)
    try:
        cache = StageCache(spec)
        with cache.writer(KEY) as w:
            assert os.stat(w.path("x").parent).st_mode & 0o777 == 0o700  # private while written
            w.path("rows.arrow").write_bytes(b"x")
            fd = os.open(w.path("other.arrow"), os.O_CREAT | os.O_WRONLY, 0o666)
            os.close(fd)
            w.commit({})
    finally:
        os.umask(old)
    folder = entry_dir(spec, KEY)
    for p in [spec.root.parent, spec.root, folder.parent, folder]:
        assert p.stat().st_mode & 0o777 == dir_mode, p
    for p in [spec.root / ".lock", *folder.iterdir()]:
        assert p.stat().st_mode & 0o777 == file_mode, p


# -- processes ---------------------------------------------------------------------------------
def _race_writer(
    spec: CacheSpec,
    n: int,
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue,
) -> None:
    cache = StageCache(spec)
    with cache.using(), cache.writer(KEY) as w:
        w.path("rows.arrow").write_bytes(bytes([n]) * 200_000)
        w.path("rejected.arrow").write_bytes(bytes([n]) * 1000)
        barrier.wait()
        out.put((n, w.commit({"writer": n})))


def test_concurrent_writers_of_one_key_one_wins(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    ctx = multiprocessing.get_context("fork")  # real processes; spawn only adds imports
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_race_writer, args=(spec, n, barrier, out)) for n in range(4)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    winners = [n for n, landed in results.items() if landed]
    assert len(winners) == 1
    entry = StageCache(spec).get(KEY)
    assert entry is not None and entry.meta == {"writer": winners[0]}
    assert entry.file("rows.arrow").read_bytes() == bytes([winners[0]]) * 200_000  # type: ignore[union-attr]
    assert temps(spec) == []


_WRITER = """
import sys, time
from pathlib import Path
from curate.cache.store import CacheSpec, StageCache
root, key, stop = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cache = StageCache(CacheSpec(root, 10**9, fsync=True))
with cache.using(), cache.writer(key) as w:
    w.path("rows.arrow").write_bytes(b"r" * 100_000)
    if stop == "writing":
        Path(sys.argv[4]).write_text("ready")
        time.sleep(60)
    w.path("rejected.arrow").write_bytes(b"j" * 100)
    w.commit({"done": True})
"""


def _spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_WRITER), *args],
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        start_new_session=True,  # CURATE_KILL_AT kills the whole process group: only its own
    )


def _wait_for(path: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize("where", ["writing", "cache_write", "cache_commit"])
def test_a_killed_writer_leaves_nothing_visible(tmp_path: Path, where: str) -> None:
    spec = spec_at(tmp_path)
    ready = tmp_path / "ready"
    env = {"CURATE_PHASE_LOG": str(tmp_path / "phases"), "CURATE_KILL_AT": f"{where}:1"}
    proc = _spawn([str(spec.root), KEY, where, str(ready)], None if where == "writing" else env)
    if where == "writing":
        _wait_for(ready)
        os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(60) == -signal.SIGKILL
    cache = StageCache(spec)
    if where == "cache_commit":  # killed after the rename: a whole entry
        entry = cache.get(KEY)
        assert entry is not None and entry.meta == {"done": True}
        return
    assert len(temps(spec)) == 1  # the killed writer's folder, never read
    assert cache.get(KEY) is None
    cache.close()
    with cache.using():  # nobody else holds the cache: the first run sweeps the leftover
        assert temps(spec) == []
        assert put(cache, KEY, b"next")
        assert cache.get(KEY) is not None


_HOLDER = """
import sys, time
from pathlib import Path
from curate.cache.store import CacheSpec, StageCache
cache = StageCache(CacheSpec(Path(sys.argv[1]), 10**9, fsync=False))
with cache.using():
    entry = cache.get(sys.argv[2])
    ready = Path(sys.argv[3])
    ready.with_suffix(".tmp").write_text("reading" if entry else "missing")
    ready.with_suffix(".tmp").rename(ready)  # never seen half-written
    time.sleep(900)  # killed by the test; a loaded machine may take minutes to get there
"""


def test_eviction_and_clear_skip_while_a_run_holds_the_cache(tmp_path: Path) -> None:
    spec = spec_at(tmp_path, budget=1)
    writer = StageCache(spec)
    put(writer, KEY)
    put(writer, key(1))
    writer.close()
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLDER), str(spec.root), KEY, str(ready)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        _wait_for(ready)
        assert ready.read_text() == "reading"
        (spec.root / ".tmp-99999999-0123456789ab").mkdir()  # as a live writer's would be
        cache = StageCache(spec)
        assert cache.evict() == 0
        assert cache.try_clear() is None and cache.clear() == 0
        with cache.using():  # a second run shares the cache; it sweeps nothing of a live one
            assert cache.get(KEY) is not None and cache.get(key(1)) is not None
            assert temps(spec) == [".tmp-99999999-0123456789ab"]
    finally:
        holder.kill()
        holder.wait(30)
    cache = StageCache(spec)
    assert cache.evict() > 0
    assert cache.get(KEY) is None and cache.get(key(1)) is None and temps(spec) == []


def test_evict_in_a_run_that_holds_the_cache_keeps_its_hold(tmp_path: Path) -> None:
    spec = spec_at(tmp_path, budget=1)
    cache = StageCache(spec)
    with cache.using():
        put(cache, KEY)
        assert cache.evict() > 0  # only this process holds it: converted, evicted, given back
        ready = tmp_path / "ready"
        other = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import fcntl,sys,pathlib;f=open(sys.argv[1]);"
                "fcntl.flock(f,fcntl.LOCK_EX|fcntl.LOCK_NB)",
                str(spec.root / ".lock"),
            ],
        )
        assert other.wait(30) != 0  # our shared hold is back: nobody can take it exclusive
        assert not ready.exists()


def _child_idles(ready: Path) -> None:
    ready.write_text("forked")
    time.sleep(30)


def test_a_forked_process_that_never_uses_the_cache_holds_nothing(tmp_path: Path) -> None:
    """A worker pool forked while the run holds the cache must not keep the run's lock
    after the run released it (the pool outlives the pass: eviction would always skip)."""
    spec = spec_at(tmp_path, budget=1)
    cache = StageCache(spec)
    ready = tmp_path / "ready"
    with cache.using():
        put(cache, KEY)
        child = multiprocessing.get_context("fork").Process(target=_child_idles, args=(ready,))
        child.start()
        _wait_for(ready)
    try:
        assert StageCache(spec).evict() > 0  # the child is alive, and holds nothing
    finally:
        child.kill()
        child.join(30)


def _child_reads(cache: StageCache, out: multiprocessing.Queue) -> None:
    out.put(cache.get(KEY) is not None)
    time.sleep(30)


def test_a_forked_worker_takes_its_own_hold(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    ctx = multiprocessing.get_context("fork")
    with cache.using():
        put(cache, KEY)
        out = ctx.Queue()
        child = ctx.Process(target=_child_reads, args=(cache, out))
        child.start()
        assert out.get(timeout=30)
    try:  # the parent released its hold; the child still reads: eviction must wait for it
        assert StageCache(spec_at(tmp_path, budget=1)).evict() == 0
    finally:
        child.kill()
        child.join(30)
    assert StageCache(spec_at(tmp_path, budget=1)).evict() > 0


# -- checksums taken while writing -------------------------------------------------------
def test_files_written_through_open_are_hashed_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit takes the checksum of a file written through `open` from the bytes that went
    into it (no second read), and it is the file's: a later get checks it and finds it
    intact, and a flipped byte is still caught."""
    import array

    import xxhash

    from curate.cache import writer as writer_module

    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    wide = array.array("i", range(1000))  # a buffer whose items are 4 bytes: counted as bytes
    with cache.writer(KEY) as w:
        with w.open("rows.arrow") as out:
            out.write(b"head")
            out.write(memoryview(wide))
            out.write(b"")
        monkeypatch.setattr(writer_module, "file_digest", _no_read_back)
        assert w.commit({"chunks": 1})
    monkeypatch.undo()
    folder = entry_dir(spec, KEY)
    data = (folder / "rows.arrow").read_bytes()
    assert data == b"head" + wide.tobytes()
    recorded = json.loads((folder / "meta.json").read_text())["files"]["rows.arrow"]
    assert recorded == {"size": len(data), "xxh3_128": xxhash.xxh3_128(data).hexdigest()}
    assert cache.get(KEY) is not None
    _flip(folder / "rows.arrow")
    assert cache.get(KEY) is None
    cache.close()


def test_a_file_changed_after_it_was_written_through_open_is_read_back(tmp_path: Path) -> None:
    """What was hashed while writing is trusted only when the file still has those bytes'
    length; a file grown behind the writer's back is read again, so its checksum is the
    file's and the entry verifies."""
    spec = spec_at(tmp_path)
    cache = StageCache(spec)
    with cache.writer(KEY) as w:
        with w.open("rows.arrow") as out:
            out.write(b"rows" * 100)
        with open(w.path("rows.arrow"), "ab") as more:
            more.write(b"tail")
        assert w.commit({"chunks": 1})
    entry = cache.get(KEY)
    assert entry is not None
    assert entry.file("rows.arrow").read_bytes() == b"rows" * 100 + b"tail"  # type: ignore[union-attr]
    cache.close()


def _no_read_back(fd: int) -> tuple[int, str]:
    raise AssertionError("a file written through open() was read back to checksum it")


def test_with_fsync_meta_and_folder_are_synced_before_the_entry_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fsync` makes meta.json and the entry folder's names durable before the rename that
    shows the entry (a torn meta.json after a power loss would block the key for good);
    the data files are left to the checksum check (see curate.cache.writer)."""
    spec = CacheSpec(tmp_path / "ds" / ".cache" / "stages", 10**9, fsync=True)
    cache = StageCache(spec)
    calls: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        calls.append("fsync " + Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real_fsync(fd)

    def rename(src: str, dst: str, **kw: object) -> None:
        calls.append(f"rename {src} {dst}")
        real_rename(src, dst, **kw)  # type: ignore[arg-type]

    with cache.writer(KEY) as w:
        with w.open("rows.arrow") as out:
            out.write(b"rows" * 100)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "rename", rename)
        assert w.commit({"chunks": 1})
    monkeypatch.undo()
    shown = next(i for i, c in enumerate(calls) if c.startswith("rename") and c.endswith(KEY))
    folder = calls[shown].split()[1]
    meta_tmp = f".meta.json.tmp-{os.getpid()}"
    assert calls[:shown] == [f"fsync {meta_tmp}", f"rename {meta_tmp} meta.json", f"fsync {folder}"]
    assert cache.get(KEY) is not None
    cache.close()
