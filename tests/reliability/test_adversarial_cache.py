"""The caches against another local user and against damage: what is on disk is never
trusted beyond what we can check.

Another user's files are real files owned by another uid where this process may chown (it runs
as root on the CI machines); elsewhere `tilelang.cache.files.owner_of` is told which inodes
belong to someone else, and every filesystem call is still the real one. The rules under test
(tilelang/cache/files.py) are shared by the kernel cache, the failed-source directory and the
autotuner's cache: private directories (this user's, 0700, created so), entries read only from
regular files of bounded size opened without following links, atomic writes that replace a
planted link rather than follow it, a size cap with least-recently-used eviction, and a damaged
entry is a miss with a warning."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner
from tilelang.autotuner import cache as tcache
from tilelang.cache import files
from tilelang.env import env
from tilelang.runtime import cache

OTHER_UID = 54321
REAL_CHOWN = hasattr(os, "geteuid") and os.geteuid() == 0
KEY = "ab" * 32


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def foreign(monkeypatch):
    """`foreign(path)`: from now on `path` (the link itself, for a link) belongs to another
    user. As root: chown to another uid. Otherwise: the ownership boundary says so."""
    marked = set()
    real_owner = files.owner_of
    monkeypatch.setattr(files, "owner_of",
                        lambda st: OTHER_UID if (st.st_dev, st.st_ino) in marked
                        else real_owner(st))

    def mark(path):
        if REAL_CHOWN:
            os.lchown(path, OTHER_UID, OTHER_UID)
        else:
            st = os.lstat(path)
            marked.add((st.st_dev, st.st_ino))
    return mark


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def tmp_dir(tmp_path, monkeypatch):
    """A private stand-in for /tmp, where the failed-source directory is made."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _warned(w, text) -> bool:
    return any(text in str(x.message) for x in w)


# ---- private directories ------------------------------------------------------------------------
def test_private_dir_creates_missing_parents_0700(tmp_path, umask_022):
    d = tmp_path / "a" / "b" / "c"
    assert files.private_dir(d) == d
    for p in (tmp_path / "a", tmp_path / "a" / "b", d):
        assert _mode(p) == 0o700, p


def test_private_dir_narrows_a_directory_others_can_read(tmp_path):
    d = tmp_path / "old-cache"
    d.mkdir()
    os.chmod(d, 0o755)
    files.private_dir(d)
    assert _mode(d) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702, 0o720, 0o1777])
def test_private_dir_refuses_what_others_can_write(tmp_path, mode):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, mode)
    with pytest.raises(files.UnsafePath, match="writable by other users"):
        files.private_dir(d)
    assert _mode(d) == mode  # refused, not "repaired" for whoever can write there


def test_private_dir_refuses_another_users_directory(tmp_path, foreign):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    foreign(d)
    with pytest.raises(files.UnsafePath, match=f"owned by uid {OTHER_UID}, not by you"):
        files.private_dir(d)


def test_private_dir_never_chmods_through_another_users_link(tmp_path, foreign):
    """The attack: a link at our predictable path to a directory of ours, so that we chmod
    (or fill) it. Refused, and the directory keeps its mode."""
    victim = tmp_path / "victim"
    victim.mkdir()
    os.chmod(victim, 0o755)
    link = tmp_path / "tilelang-1000"
    link.symlink_to(victim)
    foreign(link)
    with pytest.raises(files.UnsafePath, match="a symbolic link owned by uid"):
        files.private_dir(link)
    assert _mode(victim) == 0o755 and list(victim.iterdir()) == []


def test_private_dir_follows_our_own_link_to_our_own_directory(tmp_path):
    real = tmp_path / "big-disk" / "cache"
    real.mkdir(parents=True, mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(real)
    assert files.private_dir(link) == link


def test_private_dir_refuses_our_link_to_another_users_directory(tmp_path, foreign):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    foreign(theirs)
    link = tmp_path / "cache"
    link.symlink_to(theirs)
    with pytest.raises(files.UnsafePath, match="a directory owned by uid"):
        files.private_dir(link)


@pytest.mark.parametrize("kind", ["file", "link to a file"])
def test_private_dir_refuses_a_non_directory(tmp_path, kind):
    f = tmp_path / "f"
    f.write_text("x")
    path = f
    if kind != "file":
        path = tmp_path / "link"
        path.symlink_to(f)
    with pytest.raises(files.UnsafePath, match="is not a directory"):
        files.private_dir(path)


def test_private_dir_does_not_create_through_a_dangling_link(tmp_path):
    target = tmp_path / "elsewhere" / "new"
    link = tmp_path / "tilelang-1000"
    link.symlink_to(target)
    with pytest.raises(OSError):
        files.private_dir(link / "failed")
    assert not (tmp_path / "elsewhere").exists()


# ---- reading entries --------------------------------------------------------------------------
def _fifo(path):
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind,reason", [
    ("fifo", "is not a regular file"),
    ("link", "is a symbolic link"),
    ("link to /dev/zero", "is a symbolic link"),
    ("directory", "is not a regular file"),
    ("huge", "more than the 1024 an entry may have"),
])
def test_read_entry_reads_only_small_regular_files(tmp_path, kind, reason):
    path = tmp_path / "entry"
    if kind == "fifo":
        _fifo(path)  # a writer never comes: reading it would block forever
    elif kind == "link":
        (tmp_path / "real").write_bytes(b"data")
        path.symlink_to(tmp_path / "real")
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as f:
            f.truncate(1 << 40)  # sparse: a terabyte that takes no disk
    with pytest.raises(files.DamagedEntry, match=reason):
        files.read_entry(path, 1024)


def test_read_entry_refuses_another_users_file(tmp_path, foreign):
    path = tmp_path / "entry"
    path.write_bytes(b"data")
    foreign(path)
    with pytest.raises(files.DamagedEntry, match="a file owned by uid"):
        files.read_entry(path, 1024)


def test_read_entry_reads_a_regular_file_and_reports_a_missing_one(tmp_path):
    path = tmp_path / "entry"
    assert files.read_entry(path, 1024) is None
    path.write_bytes(b"x" * 1024)
    assert files.read_entry(path, 1024) == b"x" * 1024


def test_ownership_stub_is_the_only_boundary(tmp_path, monkeypatch):
    """Where chown is impossible the tests tell `owner_of` which files are foreign; that
    boundary alone decides (here forced even when chown would work)."""
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    monkeypatch.setattr(files, "owner_of", lambda st: OTHER_UID)
    with pytest.raises(files.UnsafePath, match=f"owned by uid {OTHER_UID}"):
        files.private_dir(d)
    (d / "e").write_bytes(b"x")
    with pytest.raises(files.DamagedEntry, match=f"owned by uid {OTHER_UID}"):
        files.read_entry(d / "e", 10)


# ---- writing entries --------------------------------------------------------------------------
def test_write_atomic_replaces_a_planted_link_and_leaves_its_target_alone(tmp_path):
    d = files.private_dir(tmp_path / "d")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (d / "name.cu").symlink_to(victim)
    files.write_atomic(d, "name.cu", b"new contents")
    assert victim.read_text() == "precious"
    assert not (d / "name.cu").is_symlink() and (d / "name.cu").read_bytes() == b"new contents"
    assert _mode(d / "name.cu") == 0o600
    assert sorted(p.name for p in d.iterdir()) == ["name.cu"]  # no temporary left


def test_write_atomic_leaves_nothing_behind_when_it_fails(tmp_path, monkeypatch):
    d = files.private_dir(tmp_path / "d")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        files.write_atomic(d, "entry", b"data")
    assert list(d.iterdir()) == []


# ---- failed sources ---------------------------------------------------------------------------
def test_failed_sources_without_the_cache_go_to_a_private_tmp_dir(tmp_dir, monkeypatch,
                                                                   umask_022):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    path = cache.write_failed_source("k_1.cu", "int broken(")
    base = tmp_dir / f"tilelang-{os.getuid()}"
    assert path == base / "failed" / "k_1.cu" and path.read_text() == "int broken("
    assert _mode(base) == 0o700 and _mode(base / "failed") == 0o700 and _mode(path) == 0o600


def test_failed_sources_avoid_a_directory_planted_by_another_user(tmp_dir, monkeypatch,
                                                                  foreign):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    planted = tmp_dir / f"tilelang-{os.getuid()}"
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)
    foreign(planted)
    path = cache.write_failed_source("k_2.cu", "source")
    assert planted not in path.parents and path.read_text() == "source"
    assert _mode(path.parent) == 0o700  # a fresh private directory instead
    assert list(planted.iterdir()) == []


def test_failed_sources_never_follow_a_planted_link(tmp_dir, monkeypatch, foreign):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    victim = tmp_dir.parent / "home-dir"
    victim.mkdir()
    os.chmod(victim, 0o755)
    link = tmp_dir / f"tilelang-{os.getuid()}"
    link.symlink_to(victim)
    foreign(link)
    path = cache.write_failed_source("k_3.cu", "source")
    assert victim not in path.parents and _mode(victim) == 0o755
    assert list(victim.iterdir()) == []


def test_a_planted_link_in_failed_is_replaced(tmp_dir, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    d = cache.failed_source_dir()
    victim = tmp_dir.parent / "bashrc"
    victim.write_text("original")
    (d / "k_4.cu").symlink_to(victim)
    cache.write_failed_source("k_4.cu", "generated")
    assert victim.read_text() == "original" and (d / "k_4.cu").read_text() == "generated"


def test_failed_sources_keep_the_newest_256(tmp_dir, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    d = cache.failed_source_dir()
    for i in range(260):
        (d / f"old_{i:03d}.cu").write_text("x")
        os.utime(d / f"old_{i:03d}.cu", (1000 + i, 1000 + i))
    cache.write_failed_source("newest.cu", "y")
    names = sorted(p.name for p in d.iterdir())
    assert "newest.cu" in names and len(names) <= 256 and "old_000.cu" not in names


def test_a_compile_error_with_the_cache_disabled_writes_the_source_privately(tmp_dir,
                                                                             monkeypatch):
    from tilelang.runtime import CudaCompileError, compile_cuda

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    source = 'extern "C" __global__ void broken(int* p) { p[0] = undeclared; }\n'
    with pytest.raises(CudaCompileError) as info:
        compile_cuda(source, "sm_80", name="broken")
    path = info.value.source_path
    assert path.startswith(str(tmp_dir / f"tilelang-{os.getuid()}" / "failed"))
    assert open(path).read() == source and _mode(path) == 0o600
    assert f"full source written to {path}" in str(info.value)


# ---- the kernel cache -------------------------------------------------------------------------
def _entry(key=KEY, cubin=b"cubin-bytes"):
    return cache.encode(key, cubin, "log", "nvrtc-test")


def _plant(private_cache, data, key=KEY):
    path = cache.entry_path(private_cache, key)
    files.private_dir(path.parent)
    if isinstance(data, bytes):
        path.write_bytes(data)
    return path


def _load_warns(key, text):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert cache.load(key) is None
    assert _warned(w, text), [str(x.message) for x in w]


def test_kernel_cache_store_and_load(private_cache):
    assert cache.store(KEY, b"cubin-bytes", "log", "nvrtc-test") is not None
    assert cache.load(KEY) == {"cubin": b"cubin-bytes", "log": "log", "compiler": "nvrtc-test"}


@pytest.mark.parametrize("damage,reason", [
    ("fifo", "is not a regular file"),
    ("link to a good entry", "is a symbolic link"),
    ("link to /dev/zero", "is a symbolic link"),
    ("directory", "is not a regular file"),
    ("huge", "an entry may have"),
    ("nested header", "the header is not JSON"),
    ("list header", "missing or mistyped fields"),
    ("string header", "missing or mistyped fields"),
    ("size as text", "missing or mistyped fields"),
    ("log not text", "missing or mistyped fields"),
    ("no compiler", "missing or mistyped fields"),
    ("other key", "belongs to another key"),
    ("cubin changed", "does not match its checksum"),
    ("no magic", "no entry header"),
    ("header cut off", "the header is cut off"),
])
def test_damaged_kernel_cache_entry_is_a_miss_with_a_warning(private_cache, damage, reason):
    good = json.loads(_entry()[len(cache.MAGIC):].split(b"\n", 1)[0])

    def header(h):
        return cache.MAGIC + json.dumps(h).encode() + b"\n" + b"cubin-bytes"

    path = _plant(private_cache, None)
    if damage == "fifo":
        _fifo(path)
    elif damage == "link to a good entry":
        other = path.parent / "other.cubin"
        other.write_bytes(_entry())
        path.symlink_to(other)
    elif damage == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif damage == "directory":
        path.mkdir()
    elif damage == "huge":
        with open(path, "wb") as f:
            f.truncate(cache.MAX_ENTRY_BYTES + 1)
    else:
        data = {
            "nested header": cache.MAGIC + b"[" * 100_000 + b"]" * 100_000 + b"\nx",
            "list header": header([good]),
            "string header": header("key"),
            "size as text": header(dict(good, size=str(good["size"]))),
            "log not text": header(dict(good, log=5)),
            "no compiler": header({k: v for k, v in good.items() if k != "compiler"}),
            "other key": _entry("cd" * 32),
            "cubin changed": _entry()[:-1] + b"X",
            "no magic": b"TLCUBIN0\n" + _entry()[len(cache.MAGIC):],
            "header cut off": _entry()[:40],
        }[damage]
        path.write_bytes(data)
    _load_warns(KEY, reason)


def test_a_damaged_entry_is_overwritten_by_the_next_store(private_cache):
    path = _plant(private_cache, None)
    path.symlink_to("/dev/zero")
    assert cache.store(KEY, b"fresh", "", "") == path
    assert not path.is_symlink() and cache.load(KEY)["cubin"] == b"fresh"


@pytest.mark.parametrize("plant", ["foreign directory", "foreign link", "world-writable",
                                   "group-writable"])
def test_kernel_cache_root_another_user_controls_is_not_used(private_cache, foreign, plant,
                                                             tmp_path):
    if plant == "foreign link":
        mine = tmp_path / "mine"
        mine.mkdir(mode=0o700)
        private_cache.symlink_to(mine)
        foreign(private_cache)
    else:
        private_cache.mkdir(mode=0o700)
        if plant == "foreign directory":
            foreign(private_cache)
        else:
            os.chmod(private_cache, 0o777 if plant == "world-writable" else 0o770)
    cache._warned.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert cache.store(KEY, b"x") is None and cache.load(KEY) is None
    assert _warned(w, "the kernel cache directory is not used")
    written = [p for p in private_cache.rglob("*.cubin")]
    assert written == []


def test_a_shard_others_can_write_to_is_not_read(private_cache):
    assert cache.store(KEY, b"cubin-bytes") is not None
    os.chmod(cache.entry_path(private_cache, KEY).parent, 0o777)
    cache._warned.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert cache.load(KEY) is None
    assert _warned(w, "writable by other users")


def test_fifo_entry_does_not_hang_a_compile(private_cache):
    """A FIFO planted at the entry of a kernel about to be compiled: the compile goes on
    (reading it would block until a writer comes: here, never)."""
    from tilelang.runtime import compile_cuda

    source = 'extern "C" __global__ void tiny(int* p) { p[threadIdx.x] = 7; }\n'
    first = compile_cuda(source, "sm_80")
    path = cache.entry_path(private_cache, first.key)
    path.unlink()
    _fifo(path)
    done = {}
    t = threading.Thread(target=lambda: done.update(r=compile_cuda(source, "sm_80")),
                         daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.start()
        t.join(60)
    assert "r" in done and done["r"].cubin == first.cubin and not done["r"].cache_hit
    assert stat.S_ISREG(os.lstat(path).st_mode)  # replaced by a real entry


@pytest.mark.parametrize("value", ["", "   "])
def test_empty_cache_dir_setting_is_the_default_not_the_current_directory(
        monkeypatch, tmp_path, value):
    monkeypatch.setenv("TILELANG_CACHE_DIR", value)
    monkeypatch.chdir(tmp_path)
    assert env.cache_dir == env.cache_dir.home() / ".tilelang" / "cache"
    assert env.cache_dir.is_absolute() and tcache.cache_dir().is_absolute()


def _shard_keys(n, shard="ab"):
    return [shard + f"{i:062x}" for i in range(n)]


def test_cache_evicts_the_least_recently_used_entries_of_a_full_shard(private_cache,
                                                                      monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_MAX_ENTRIES", str(4 * cache.SHARDS))  # 4 a shard
    keys = _shard_keys(5)
    for i, k in enumerate(keys[:4]):
        cache.store(k, b"cubin")
        os.utime(cache.entry_path(private_cache, k), (100 + i, 100 + i))
    assert cache.load(keys[0]) is not None  # a hit: the oldest is now the most recent
    cache.store(keys[4], b"cubin")
    kept = {k for k in keys if cache.entry_path(private_cache, k).exists()}
    assert kept == {keys[0], keys[3], keys[4]}  # down to 90% of the quota, oldest first


def test_cache_evicts_by_size(private_cache, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_MAX_SIZE", str(10_000 * cache.SHARDS))  # 10 kB a shard
    keys = _shard_keys(6)
    for i, k in enumerate(keys):
        cache.store(k, os.urandom(3000))
        os.utime(cache.entry_path(private_cache, k), (100 + i, 100 + i))
    shard = cache.entry_path(private_cache, keys[0]).parent
    total = sum(p.stat().st_size for p in shard.glob("*.cubin"))
    assert total <= 10_000 and cache.entry_path(private_cache, keys[-1]).exists()
    assert not cache.entry_path(private_cache, keys[0]).exists()


@pytest.mark.parametrize("text,value", [("4G", 4 << 30), ("100M", 100 << 20), ("512k", 512 << 10),
                                        ("1.5K", 1536), ("12345", 12345), ("2GB", 2 << 30),
                                        (" 1t ", 1 << 40)])
def test_size_settings(monkeypatch, text, value):
    monkeypatch.setenv("TL_TEST_SIZE", text)
    assert files.size_setting("TL_TEST_SIZE", 7) == value


@pytest.mark.parametrize("text", ["junk", "0", "-5", "1Q", "G"])
def test_bad_size_settings_are_refused(monkeypatch, text):
    monkeypatch.setenv("TL_TEST_SIZE", text)
    with pytest.raises(ValueError, match="TL_TEST_SIZE"):
        files.size_setting("TL_TEST_SIZE", 7)


def test_clear_removes_every_entry_and_follows_no_link(private_cache, tmp_path):
    for i in range(600):  # spread over many shards (written directly: no fsync per entry)
        path = cache.entry_path(private_cache, f"{i:064x}"[::-1])
        files.private_dir(path.parent)
        path.write_bytes(b"c")
    shard = cache.entry_path(private_cache, f"{1:064x}"[::-1]).parent
    (shard / ".leftover.tmp").write_bytes(b"half written")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.cubin").write_bytes(b"not ours to delete")
    (private_cache / "zz").symlink_to(victim)
    cache.failed_source_dir()
    cache.clear()
    left = [p for p in private_cache.glob("*/*.cubin") if not p.parent.is_symlink()]
    assert left == [] and not (shard / ".leftover.tmp").exists()
    assert (victim / "keep.cubin").exists() and (private_cache / "failed").is_dir()


# ---- the autotuner's cache ----------------------------------------------------------------------
@pytest.fixture
def tuning(private_cache):
    AutoTuner._memory_cache.clear()
    yield private_cache / "autotune"
    AutoTuner._memory_cache.clear()


def _factory(built):
    @tilelang.jit(out_idx=[-1], target="cpu")
    def fill(n, block=32):
        built.append(block)

        @T.prim_func
        def main(C: T.Tensor((n,), "int32")):
            with T.Kernel(n // block, threads=32) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = block

        return main

    return fill


CONFIGS = [{"block": 16}, {"block": 32}]


def _tune(built, configs=CONFIGS):
    return tilelang.autotune(configs=configs, warmup=0.1, rep=0.5)(_factory(built))(64)


def _stored(tuning) -> tuple:
    (path,) = tuning.glob("*.json")
    return path, json.loads(path.read_text())


def test_tuning_cache_directories_are_private(tuning, private_cache, umask_022):
    _tune([])
    assert _mode(private_cache) == 0o700 and _mode(tuning) == 0o700
    path, _ = _stored(tuning)
    assert _mode(path) == 0o600


def test_a_planted_configuration_outside_the_candidates_is_never_run(tuning, capsys):
    built = []
    _tune(built)
    path, data = _stored(tuning)
    data["best"]["config"] = {"block": 64}  # never among the candidates
    path.write_text(json.dumps(data))
    AutoTuner._memory_cache.clear()
    built.clear()
    kernel = _tune(built)
    assert 64 not in built and sorted(built) == [16, 32]  # tuned again from the candidates
    assert kernel.config in CONFIGS
    assert "not among the candidates" in capsys.readouterr().out


def test_a_stored_winner_among_the_candidates_is_a_hit(tuning):
    built = []
    first = _tune(built)
    AutoTuner._memory_cache.clear()
    built.clear()
    again = _tune(built, configs=list(reversed(CONFIGS)) + [{"block": 8}])
    assert built == [first.config["block"]] and again.config == first.config


@pytest.mark.parametrize("plant", ["foreign", "world-writable", "foreign root"])
def test_tuning_cache_another_user_controls_is_not_used(tuning, private_cache, foreign, plant):
    private_cache.mkdir(mode=0o700)
    tuning.mkdir(mode=0o700)
    if plant == "foreign":
        foreign(tuning)
    elif plant == "foreign root":
        foreign(private_cache)
    else:
        os.chmod(tuning, 0o777)
    planted = tuning / "planted.json"
    planted.write_text("{}")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kernel = _tune([])
    assert kernel.config in CONFIGS
    assert _warned(w, "the autotuning cache is not used")
    assert [p.name for p in tuning.glob("*.json")] == ["planted.json"]  # nothing written


def _damaged(data, kind):
    best = data["best"]
    return {
        "best is a list": lambda: dict(data, best=[best]),
        "no best": lambda: {k: v for k, v in data.items() if k != "best"},
        "config is a list": lambda: dict(data, best=dict(best, config=[16])),
        "latency is text": lambda: dict(data, best=dict(best, latency="fast")),
        "latency is null": lambda: dict(data, best=dict(best, latency=None)),
        "latency is NaN": lambda: dict(data, best=dict(best, latency=float("nan"))),
        "latency is true": lambda: dict(data, best=dict(best, latency=True)),
        "ref latency is text": lambda: dict(data, best=dict(best, ref_latency="x")),
        "records not a list": lambda: dict(data, records={"0": {}}),
        "record not an object": lambda: dict(data, records=["ok"]),
        "record latency text": lambda: dict(data, records=[dict(data["records"][0],
                                                                 latency="1 ms")]),
        "record status a number": lambda: dict(data, records=[dict(data["records"][0],
                                                                    status=1)]),
        "top level list": lambda: [data],
        "other format": lambda: dict(data, format=99),
        "other key": lambda: dict(data, key="0" * 64),
    }[kind]()


DAMAGE = [("best is a list", "'best' is not an object"), ("no best", "'best' is not an object"),
          ("config is a list", "'config' object"), ("latency is text", "not a finite number"),
          ("latency is null", "not a finite number"), ("latency is NaN", "not a finite number"),
          ("latency is true", "not a finite number"),
          ("ref latency is text", "not a finite number"),
          ("records not a list", "'records' is not a list"),
          ("record not an object", "a record is not an object"),
          ("record latency text", "a record is not an object"),
          ("record status a number", "a record is not an object"),
          ("top level list", "not a JSON object"), ("other format", "format 99"),
          ("other key", "written for another key")]


@pytest.mark.parametrize("kind,reason", DAMAGE, ids=[k for k, _ in DAMAGE])
def test_damaged_tuning_entry_is_a_miss_with_a_warning(tuning, kind, reason):
    _tune([])
    path, data = _stored(tuning)
    path.write_text(json.dumps(_damaged(data, kind)))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert tcache.load(data["key"]) is None
    assert _warned(w, "damaged autotuning cache entry") and _warned(w, reason), \
        [str(x.message) for x in w]


@pytest.mark.parametrize("kind,reason", [("nested JSON", "is not JSON"),
                                         ("not JSON", "is not JSON"),
                                         ("fifo", "is not a regular file"),
                                         ("link", "is a symbolic link"),
                                         ("huge", "an entry may have")])
def test_unreadable_tuning_entry_is_a_miss_with_a_warning(tuning, kind, reason):
    _tune([])
    path, data = _stored(tuning)
    path.unlink()
    if kind == "nested JSON":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "not JSON":
        path.write_text("{'best': 1}")
    elif kind == "fifo":
        _fifo(path)
    elif kind == "link":
        other = tuning / "elsewhere.txt"
        other.write_text(json.dumps(data))
        path.symlink_to(other)
    else:
        with open(path, "wb") as f:
            f.truncate(tcache.MAX_ENTRY_BYTES + 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert tcache.load(data["key"]) is None
    assert _warned(w, reason), [str(x.message) for x in w]


def test_a_damaged_tuning_entry_is_tuned_again_and_rewritten(tuning):
    built = []
    _tune(built)
    path, data = _stored(tuning)
    path.write_text(json.dumps(dict(data, best=[1, 2])))
    AutoTuner._memory_cache.clear()
    built.clear()
    with pytest.warns(RuntimeWarning, match="damaged autotuning cache entry"):
        kernel = _tune(built)
    assert sorted(built) == [16, 32] and kernel.config in CONFIGS
    assert isinstance(_stored(tuning)[1]["best"], dict)  # rewritten whole
    AutoTuner._memory_cache.clear()
    built.clear()
    _tune(built)
    assert len(built) == 1  # and a hit again


def test_clear_tuning_results_deletes_only_entries(tuning, tmp_path):
    _tune([])
    (tuning / "notes.txt").write_text("mine")
    assert tcache.clear() == 1
    assert [p.name for p in tuning.iterdir()] == ["notes.txt"]


def test_clear_tuning_results_leaves_another_users_directory_alone(tuning, foreign):
    _tune([])
    foreign(tuning)
    assert tcache.clear() == 0 and len(list(tuning.glob("*.json"))) == 1
