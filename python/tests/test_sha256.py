"""Expected SHA-256 values from Python (sha256=, as the CLI's --sha256 and
--sha256-file): the right value loads, a wrong one raises IntegrityError
with RL_E_CHECKSUM and the library's message (file and both values), and a
malformed value or sums file is ArgumentError before anything is read;
every load on every backend."""
import ctypes
import hashlib
import os
import re
import warnings

import numpy as np
import pytest

import stfile
from conftest import BACKENDS

import ringload
import ringload.numpy as rnp
from ringload import _lib

WRONG = "ab" * 32


@pytest.fixture
def ckpt(tmp_path):
    """A one-file checkpoint and its SHA-256."""
    path = tmp_path / "model.safetensors"
    stfile.write(path, {
        "a": ("F32", (1000,), np.arange(1000, dtype="<f4").tobytes()),
        "b": ("I16", (7, 3), np.arange(21, dtype="<i2").tobytes()),
    })
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def two_files(tmp_path):
    """A directory checkpoint of two files and their SHA-256 by name."""
    d = tmp_path / "ckpt"
    d.mkdir()
    sums = {}
    for i in range(2):
        p = d / f"part{i}.safetensors"
        stfile.write(p, {f"t{i}": ("F32", (64,), np.full(64, i, "<f4").tobytes())})
        sums[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return str(d), sums


def _checksum_error(excinfo, path, want):
    e = excinfo.value
    assert isinstance(e, ringload.IntegrityError)
    assert e.code == _lib.RL_E_CHECKSUM and e.code_name == "RL_E_CHECKSUM"
    assert str(e) == f"{path}: SHA-256 mismatch: expected {want}, got " + \
        hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_with_the_right_sha256_loads_and_a_wrong_one_raises_checksum(ckpt, backend):
    path, sha = ckpt
    name = os.path.basename(path)
    for given in (sha, sha.upper(), {name: sha}, {path: sha}):
        out = ringload.load(path, backend=backend, sha256=given)[0]
        assert out["a"].tolist() == list(range(1000))
    for given in (WRONG, {name: WRONG}):
        with pytest.raises(ringload.IntegrityError) as ei:
            ringload.load(path, backend=backend, sha256=given)
        _checksum_error(ei, path, WRONG)


def test_numpy_load_file_checks_sha256(ckpt):
    path, sha = ckpt
    assert rnp.load_file(path, sha256=sha)["b"].shape == (7, 3)
    with pytest.raises(ringload.IntegrityError) as ei:
        rnp.load_file(path, sha256=WRONG)
    _checksum_error(ei, path, WRONG)


def test_torch_load_file_checks_sha256(ckpt, torch):
    import ringload.torch as rt
    path, sha = ckpt
    assert rt.load_file(path, sha256={os.path.basename(path): sha})["a"][999] == 999
    with pytest.raises(ringload.IntegrityError) as ei:
        rt.load_file(path, device="cpu", sha256=WRONG)
    _checksum_error(ei, path, WRONG)


@pytest.mark.parametrize("bad", ["xyz", "ab" * 31 + "a", "g" * 64, "ab" * 33, 12, None])
def test_sha256_value_not_64_hex_digits_is_argument_error_naming_it(ckpt, bad):
    path, _ = ckpt
    with pytest.raises(ringload.ArgumentError) as ei:
        rnp.load_file(path, sha256={"model.safetensors": bad})
    assert ei.value.code == _lib.RL_E_INVALID_ARG
    assert str(ei.value) == (f"sha256: model.safetensors: expected SHA-256 {bad!r} is "
                             "not 64 hex digits")


def test_sha256_of_a_file_not_in_the_checkpoint_is_argument_error(ckpt):
    path, sha = ckpt
    with pytest.raises(ringload.ArgumentError, match=r"sha256: other.safetensors: not a "
                       r"file of the checkpoint \(its files: .*model.safetensors\)"):
        rnp.load_file(path, sha256={"other.safetensors": sha})
    with pytest.raises(ringload.ArgumentError, match="not list"):
        rnp.load_file(path, sha256=[sha])


def test_two_values_for_one_file_in_a_dict_are_argument_error(ckpt):
    """Two spellings of one file with different values name both (regression:
    the last won, so a wrong value loaded beside a right one); the same value
    twice is no conflict."""
    path, sha = ckpt
    spelled = os.path.join(os.path.dirname(path), ".", "model.safetensors")
    with pytest.raises(ringload.ArgumentError, match=f"sha256: {re.escape(spelled)} has "
                       "another value from the one given for model.safetensors"):
        rnp.load_file(path, sha256={"model.safetensors": WRONG, spelled: sha})
    assert sorted(rnp.load_file(path, sha256={"model.safetensors": sha, spelled: sha})) == \
        ["a", "b"]


def test_a_bytes_checkpoint_path_takes_every_sha256_form(ckpt, tmp_path):
    """safe_open and load of a bytes path with a dict or a sums file
    (regression: TypeError joining the bytes directory to a str name)."""
    path, sha = ckpt
    (tmp_path / "SUMS").write_text(f"{sha}  model.safetensors\n")
    for given in ({"model.safetensors": sha}, str(tmp_path / "SUMS")):
        with ringload.safe_open(os.fsencode(path), "numpy", sha256=given) as f:
            assert f.get_tensor("b").shape == (7, 3)
        assert sorted(rnp.load_file(os.fsencode(path), sha256=given)) == ["a", "b"]


def test_one_hex_value_for_a_checkpoint_of_two_files_is_argument_error(two_files):
    d, sums = two_files
    with pytest.raises(ringload.ArgumentError, match="one value for a checkpoint of 2 files"):
        rnp.load_file(d, sha256=sums["part0.safetensors"])
    out = rnp.load_file(d, sha256=sums)
    assert sorted(out) == ["t0", "t1"]
    with pytest.raises(ringload.IntegrityError, match="part1.safetensors: SHA-256 mismatch"):
        rnp.load_file(d, sha256=dict(sums, **{"part1.safetensors": WRONG}))


def test_sha256sums_file_checks_the_files_it_names(two_files, tmp_path):
    d, sums = two_files
    good = tmp_path / "SHA256SUMS"
    good.write_bytes(("# a comment line, as sha256sum -c allows\n"
                      f"{sums['part0.safetensors']}  ./part0.safetensors\r\n"
                      f"{sums['part1.safetensors']} *part1.safetensors\n"
                      f"{WRONG}  config.json\n\n").encode())
    assert sorted(rnp.load_file(d, sha256=good)) == ["t0", "t1"]
    assert sorted(ringload.load(d, sha256=str(good))[0]) == ["t0", "t1"]
    bad = tmp_path / "BAD"
    bad.write_text(f"{sums['part0.safetensors']}  part0.safetensors\n"
                   f"{WRONG}  part1.safetensors\n")
    with pytest.raises(ringload.IntegrityError) as ei:
        rnp.load_file(d, sha256=bad)
    _checksum_error(ei, os.path.join(d, "part1.safetensors"), WRONG)


def test_escaped_sums_names_are_unescaped_as_sha256sum_writes_them(tmp_path):
    """sha256sum writes '\\' before a line whose name has a backslash or a
    newline, and escapes them (regression: one such line refused the whole
    file); the other lines still count."""
    lines = []
    for name, written in (("b\\s.safetensors", "\\b\\\\s.safetensors"),
                          ("n\nl.safetensors", "\\n\\nl.safetensors"),
                          ("plain.safetensors", "plain.safetensors")):
        p = tmp_path / "ck" / name
        p.parent.mkdir(exist_ok=True)
        stfile.write(p, {name[0]: ("U8", (2,), bytes(2))})
        sha = hashlib.sha256(p.read_bytes()).hexdigest()
        lines.append(written[:written.index(name[0])] + sha + "  "
                     + written[written.index(name[0]):] + "\n")
    (tmp_path / "ck" / "SUMS").write_text("".join(lines))
    out = ringload.load(str(tmp_path / "ck"), sha256=tmp_path / "ck" / "SUMS")[0]
    assert sorted(out) == ["b", "n", "p"]
    (tmp_path / "ck" / "SUMS").write_text(f"\\{WRONG}  b\\\\s.safetensors\n")
    with pytest.warns(UserWarning, match="plain.safetensors: no line in"):
        with pytest.raises(ringload.IntegrityError, match="b\\\\s.safetensors: SHA-256 "
                           "mismatch"):
            ringload.load(str(tmp_path / "ck"), sha256=tmp_path / "ck" / "SUMS")


@pytest.mark.parametrize("text, why", [
    ("nonsense\n", "2: not '<64 hex digits>  <file name>'"),
    (WRONG + " part0.safetensors\n", "2: not '<64 hex digits>  <file name>'"),
    ("\\" + WRONG + "  part\\xname\n", "2: a bad escape in the name (sha256sum escapes only "
     "\\\\, \\n and \\r)"),
])
def test_malformed_sha256sums_line_is_argument_error_naming_file_and_line(
        two_files, tmp_path, text, why):
    d, sums = two_files
    f = tmp_path / "SUMS"
    f.write_text(f"{sums['part0.safetensors']}  part0.safetensors\n" + text)
    with pytest.raises(ringload.ArgumentError) as ei:
        rnp.load_file(d, sha256=f)
    assert str(ei.value) == f"sha256: {f}:{why}" + (
        " (sha256sum's format)" if "hex digits" in why else "")


def test_sums_match_files_by_identity_as_the_cli(tmp_path):
    """A checkpoint reached through a symlinked directory matches a sums file
    naming it by the real one (regression: lexical paths, ArgumentError); a
    sums file kept elsewhere falls back to the checkpoint's directory only for
    a name that is nothing beside it (a dangling symlink is something); a NUL
    in a line is an error naming it, and one CR goes, not two (the CLI's
    rules, test_cli_integrity)."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "link").symlink_to("ck")
    p = tmp_path / "ck" / "a.safetensors"
    stfile.write(p, {"t": ("U8", (3,), bytes(3))})
    line = hashlib.sha256(p.read_bytes()).hexdigest() + "  a.safetensors\n"
    for sums in (tmp_path / "ck" / "SUMS", tmp_path / "other" / "SUMS"):
        sums.write_text(line)
    assert list(ringload.load(str(tmp_path / "link"), sha256=tmp_path / "ck" / "SUMS")[0]) == ["t"]
    with ringload.safe_open(str(tmp_path / "link" / "a.safetensors"), "np",
                            sha256=tmp_path / "ck" / "SUMS") as f:
        assert f.keys() == ["t"]
    elsewhere = tmp_path / "other" / "SUMS"
    assert list(ringload.load(str(tmp_path / "ck"), sha256=elsewhere)[0]) == ["t"]
    (tmp_path / "other" / "a.safetensors").symlink_to("gone")
    with pytest.warns(UserWarning, match="a.safetensors is no file of the checkpoint"):
        with pytest.raises(ringload.ArgumentError, match="names none of the checkpoint"):
            ringload.load(str(tmp_path / "ck"), sha256=elsewhere)
    sums = tmp_path / "ck" / "SUMS"
    sums.write_bytes(line.encode() + line[:-9].encode() + b"\0nsors\n")
    with pytest.raises(ringload.ArgumentError, match=f"{re.escape(str(sums))}:2: a NUL byte "
                       "in the line"):
        ringload.load(str(p), sha256=sums)
    sums.write_bytes(line[:-1].encode() + b"\r\r\n")
    with pytest.raises(ringload.ArgumentError, match="names none of the checkpoint"):
        ringload.load(str(p), sha256=sums)


def test_sha256sums_naming_no_file_or_missing_is_an_error(ckpt, tmp_path):
    path, _ = ckpt
    f = tmp_path / "SUMS"
    f.write_text(f"{WRONG}  config.json\n")
    with pytest.raises(ringload.ArgumentError, match="names none of the checkpoint's files"):
        rnp.load_file(path, sha256=f)
    with pytest.raises(FileNotFoundError, match="sha256: .*absent: No such file"):
        rnp.load_file(path, sha256=str(tmp_path / "absent"))
    os.mkfifo(tmp_path / "fifo")  # refused without opening it (which would block)
    for not_regular in (tmp_path, tmp_path / "fifo"):
        with pytest.raises(ringload.ArgumentError, match="not a regular file"):
            rnp.load_file(path, sha256=not_regular)


def test_safe_open_hashes_a_file_once_before_its_first_tensor(ckpt, monkeypatch):
    """keys() and metadata() hash nothing (regression: every file was hashed
    whole at open, minutes for a large model); the first get_tensor or
    get_slice of a file hashes it, once; a mismatch raises from every read
    of that file."""
    path, sha = ckpt
    hashed = []
    verify = ringload._sha256.verify_file
    monkeypatch.setattr(ringload._sha256, "verify_file",
                        lambda p, want: (hashed.append(p), verify(p, want)))
    with ringload.safe_open(path, "np", sha256=sha) as f:
        assert f.keys() == ["a", "b"] and f.metadata() is None and hashed == []
        assert f.get_tensor("b").shape == (7, 3) and hashed == [path]
        assert f.get_slice("a")[2:4].tolist() == [2, 3] and hashed == [path]
    with ringload.safe_open(path, "np", sha256={"model.safetensors": WRONG}) as f:
        assert f.keys() == ["a", "b"]
        for read in (lambda: f.get_tensor("a"), lambda: f.get_slice("b"),
                     lambda: f.get_tensor("a"), f.get_tensors):
            with pytest.raises(ringload.IntegrityError) as ei:
                read()
            _checksum_error(ei, path, WRONG)


def test_sums_names_are_exact_relative_to_the_sums_file(tmp_path):
    """A sums file beside model.safetensors and text_encoder/: each line
    names exactly the file at its path from the sums file's directory, in
    any order (regression: names matched by their end and the last match
    won, so model.safetensors' value was checked against
    text_encoder/model.safetensors), for loads and safe_open alike."""
    shas = {}
    for sub in ("", "text_encoder/"):
        p = tmp_path / f"{sub}model.safetensors"
        p.parent.mkdir(exist_ok=True)
        stfile.write(p, {sub or "root": ("U8", (len(sub) + 3,), bytes(len(sub) + 3))})
        shas[sub] = hashlib.sha256(p.read_bytes()).hexdigest()
    sums = tmp_path / "SHA256SUMS"
    path = str(tmp_path / "text_encoder" / "model.safetensors")
    lines = [f"{shas['']}  model.safetensors\n",
             f"{shas['text_encoder/']}  ./text_encoder/model.safetensors\n"]
    for order in (lines, lines[::-1]):
        sums.write_text("".join(order))
        with pytest.warns(UserWarning, match="model.safetensors is no file of the checkpoint"):
            assert list(ringload.load(path, sha256=sums)[0]) == ["text_encoder/"]
        with pytest.warns(UserWarning, match="no file of the checkpoint"):
            with ringload.safe_open(path, "np", sha256=sums) as f:
                assert f.keys() == ["text_encoder/"]
    sums.write_text(f"{shas['']}  {tmp_path / 'text_encoder' / '..' / 'model.safetensors'}\n")
    assert list(ringload.load(str(tmp_path / "model.safetensors"), sha256=sums)[0]) == ["root"]
    sums.write_text(lines[0] + f"{WRONG}  model.safetensors\n")
    with pytest.raises(ringload.ArgumentError, match="SHA256SUMS:2: model.safetensors has "
                       "another value on line 1"):
        ringload.load(str(tmp_path / "model.safetensors"), sha256=sums)


def test_a_file_no_sums_line_names_is_warned_of(two_files, tmp_path):
    d, sums = two_files
    (tmp_path / "SUMS").write_text(f"{sums['part0.safetensors']}  ckpt/part0.safetensors\n")
    with pytest.warns(UserWarning, match="part1.safetensors: no line in .*SUMS: its SHA-256 "
                      "is not checked"):
        assert sorted(ringload.load(d, sha256=tmp_path / "SUMS")[0]) == ["t0", "t1"]


def test_sha256_warnings_point_at_the_users_call(two_files, tmp_path, torch):
    """Each entry point's warnings name this file and the calling line, not
    a line of ringload (regression: a fixed stacklevel pointed inside the
    package for some, where Python shows a warning once per process)."""
    d, sums = two_files
    (tmp_path / "SUMS").write_text(f"{sums['part0.safetensors']}  ckpt/part0.safetensors\n")
    calls = (lambda: ringload.load(d, sha256=tmp_path / "SUMS"),
             lambda: rnp.load_file(d, sha256=tmp_path / "SUMS"),
             lambda: ringload.safe_open(d, "np", sha256=tmp_path / "SUMS"),
             lambda: ringload.load(d, framework="pt", sha256=tmp_path / "SUMS"))
    for call in calls:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            call()
        assert got and all(w.filename == __file__ for w in got), \
            [(w.filename, w.lineno) for w in got]


def test_a_name_that_is_the_tail_of_another_without_a_slash_names_nothing(tmp_path):
    """model.safetensors is not xmodel.safetensors (its end, but not after
    a '/'), for sha256= and safe_open."""
    path = tmp_path / "xmodel.safetensors"
    stfile.write(path, {"a": ("U8", (3,), bytes(3))})
    for call in (lambda: ringload.load(str(path), sha256={"model.safetensors": WRONG}),
                 lambda: ringload.safe_open(str(path), "np",
                                            sha256={"model.safetensors": WRONG})):
        with pytest.raises(ringload.ArgumentError, match="sha256: model.safetensors: not a file "
                           "of the checkpoint"):
            call()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_files_path_names_it_alone_not_a_file_it_ends(tmp_path, monkeypatch, backend):
    """ck/m.safetensors, given by name and matched to its file, does not
    also name ck/sub/ck/m.safetensors, whose path ends with it (the library
    called it ambiguous, "give the path", a value Python had matched to
    exactly one file); a wrong value for it still fails its file only."""
    monkeypatch.chdir(tmp_path)
    os.makedirs("ck/sub/ck")
    stfile.write("ck/m.safetensors", {"a": ("U8", (3,), b"abc")})
    stfile.write("ck/sub/ck/m.safetensors", {"b": ("U8", (3,), b"xyz")})
    with open("ck/model.safetensors.index.json", "w") as f:
        f.write('{"weight_map": {"a": "m.safetensors", "b": "sub/ck/m.safetensors"}}')
    good = hashlib.sha256(open("ck/m.safetensors", "rb").read()).hexdigest()
    out = ringload.load("ck", backend=backend, sha256={"m.safetensors": good})[0]
    assert bytes(out["a"]) == b"abc" and bytes(out["b"]) == b"xyz"
    with ringload.safe_open("ck", "np", sha256={"m.safetensors": good}) as f:
        assert bytes(f.get_tensor("b")) == b"xyz"
    with pytest.raises(ringload.IntegrityError) as ei:
        ringload.load("ck", backend=backend, sha256={"m.safetensors": WRONG})
    _checksum_error(ei, "ck/m.safetensors", WRONG)


def test_expected_value_wrong_in_its_last_byte_raises(ckpt):
    """A comparison that stops short of the last byte would pass it."""
    path, sha = ckpt
    last = sha[:-2] + ("00" if sha[-2:] != "00" else "01")
    with pytest.raises(ringload.IntegrityError) as ei:
        ringload.load(path, sha256=last)
    _checksum_error(ei, path, last)
    with pytest.raises(ringload.IntegrityError) as ei:
        ringload.safe_open(path, "np", sha256=last).get_tensor("a")
    _checksum_error(ei, path, last)


def test_sha256_forms_read_from_files_and_an_empty_dict(ckpt):
    path, sha = ckpt
    for given in (sha + "\n", sha.encode(), (" " + sha.upper() + "\r\n").encode()):
        assert sorted(rnp.load_file(path, sha256=given)) == ["a", "b"]
    with pytest.raises(ringload.ArgumentError, match="an empty dict expects nothing"):
        rnp.load_file(path, sha256={})


def test_partial_load_with_sha256_is_checksum_error_before_reading(two_files):
    d, sums = two_files
    spec = {"tensors": ["t0"]}
    with pytest.raises(ringload.IntegrityError, match="cannot be checked: this load "
                       "reads only part"):
        # a box of t0 reads part of part0; the whole t0 reads all of it
        ringload.load(d, sharding={"targets": [{"name": "x", "source": "t0",
                                                "slice": [[0, 8]]}],
                                   "tensors": ["x"]},
                      sha256={"part0.safetensors": sums["part0.safetensors"]})
    assert list(ringload.load(d, sharding=spec, sha256={
        "part0.safetensors": sums["part0.safetensors"]})[0]) == ["t0"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_load_checks_sha256(ckpt, torch, backend):
    """A streaming load hashes the files it streams (it refused sha256=
    with a StateError): the right value loads, a wrong one fails naming
    the file."""
    path, sha = ckpt
    opts = {"staging_budget": 1 << 16, "workers": 2}
    out = ringload.load(path, framework="pt", backend=backend, options=opts, sha256=sha)[0]
    assert out["a"].tolist() == list(range(1000))
    with pytest.raises(ringload.IntegrityError) as ei:
        ringload.load(path, framework="pt", backend=backend, options=opts, sha256=WRONG)
    _checksum_error(ei, path, WRONG)


def _hf_snapshot(tmp_path, path, blob):
    """A Hugging Face cache holding path's bytes as blobs/<blob>, and the
    snapshot file linking to it."""
    (tmp_path / "hf" / "blobs").mkdir(parents=True)
    (tmp_path / "hf" / "snapshots" / "r").mkdir(parents=True)
    (tmp_path / "hf" / "blobs" / blob).write_bytes(open(path, "rb").read())
    snap = tmp_path / "hf" / "snapshots" / "r" / "model.safetensors"
    snap.symlink_to(f"../../blobs/{blob}")
    return str(snap)


def test_safe_open_checks_a_hugging_face_blob_name(ckpt, tmp_path):
    """safe_open reads files in part, where the library cannot check the
    blob's name: it hashes the file before its first tensor (regression: a
    blob with a flipped byte loaded without a word)."""
    path, sha = ckpt
    snap = _hf_snapshot(tmp_path / "good", path, sha)
    with ringload.safe_open(snap, "np") as f:
        assert f.get_tensor("b").shape == (7, 3)
    snap = _hf_snapshot(tmp_path / "bad", path, WRONG)
    with pytest.raises(ringload.IntegrityError) as ei:
        ringload.safe_open(snap, "np").get_tensor("b")
    _checksum_error(ei, snap, WRONG)


def test_a_hugging_face_blob_a_load_cannot_check_is_warned_of(ckpt, tmp_path, torch):
    """A sharded load reads part of a file: the blob's name goes
    unchecked, with a warning naming the file, as the CLI's (regression: a
    blob with a flipped byte loaded without a word). A streaming load
    hashes: it fails naming the file."""
    path, _ = ckpt
    snap = _hf_snapshot(tmp_path, path, WRONG)
    with pytest.raises(ringload.IntegrityError) as ei:
        ringload.load(snap, framework="pt", options={"staging_budget": 1 << 20})
    _checksum_error(ei, snap, WRONG)
    with pytest.warns(UserWarning, match="not checked: this load reads only part of the file"):
        assert list(ringload.load(snap, sharding={"tensors": ["b"]})[0]) == ["b"]
    with pytest.raises(ringload.IntegrityError):
        ringload.load(snap)


@pytest.mark.parametrize("text", [
    "nonsense\n",
    WRONG + " part0.safetensors\n",
    "\\" + WRONG + "  part\\xname\n",
    "# only a comment\n" + WRONG + "  a\0b\n",
])
def test_sums_files_are_parsed_by_the_library_as_the_cli_parses_them(
        two_files, tmp_path, text, monkeypatch):
    """One SHA256SUMS parser and one set of rules: Python resolves sums
    files through the library (rl_expect_sums, as the CLI), and a bad line
    gets the CLI's own message, word for word."""
    import subprocess
    from conftest import build_dir
    d, _ = two_files
    f = tmp_path / "SUMS"
    f.write_bytes(text.encode())
    opened = []
    sums_open = _lib.rl_expect_sums
    monkeypatch.setattr(_lib, "rl_expect_sums", lambda h, p, plan: (opened.append(p),
                                                                   sums_open(h, p, plan))[1])
    with pytest.raises(ringload.ArgumentError) as ei:
        rnp.load_file(d, sha256=f)
    assert opened == [os.fsencode(f)]
    cli = subprocess.run([os.path.join(build_dir(), "ringload"), "load", d,
                          "--sha256-file", str(f)], capture_output=True, text=True)
    assert cli.returncode == 1
    assert str(ei.value).removeprefix("sha256: ") in cli.stderr, cli.stderr


def test_safe_open_hashes_with_the_librarys_sha256(ckpt, monkeypatch):
    """One SHA-256: safe_open's whole-file hash is rl_sha256_file's (no
    hashlib in the package), equal to hashlib's on the same bytes, and the
    incremental API gives the same digest in pieces."""
    path, sha = ckpt
    calls = []
    sha_file = _lib.rl_sha256_file
    monkeypatch.setattr(_lib, "rl_sha256_file", lambda p, out: (calls.append(p),
                                                               sha_file(p, out))[1])
    with ringload.safe_open(path, "np", sha256=sha) as f:
        assert f.get_tensor("b").shape == (7, 3)
    assert calls == [os.fsencode(path)]
    assert "hashlib" not in vars(ringload._sha256)
    data = open(path, "rb").read()
    h = _lib.rl_sha256_create()
    try:
        for i in range(0, len(data), 777):
            assert _lib.rl_sha256_update(h, data[i:i + 777], len(data[i:i + 777])) == 0
        out = (ctypes.c_uint8 * 32)()
        assert _lib.rl_sha256_final(h, out) == 0
    finally:
        _lib.rl_sha256_destroy(h)
    assert bytes(out).hex() == sha
    with pytest.raises(FileNotFoundError, match="absent: No such file"):
        ringload._sha256.verify_file(path + ".absent", sha)


def _flipped_blob(tmp_path):
    """A Hugging Face cache whose blob is named for its bytes but holds one
    flipped byte in a tensor, fully in the page cache (as right after a
    download): (snapshot file, snapshot directory, blob's path)."""
    path = tmp_path / "orig.safetensors"
    stfile.write(path, {
        "a": ("F32", (1024,), np.arange(1024, dtype="<f4").tobytes()),
        "b": ("I16", (7, 3), np.arange(21, dtype="<i2").tobytes()),
    })
    data = bytearray(path.read_bytes())
    sha = hashlib.sha256(data).hexdigest()
    data[-5] ^= 0x10
    (tmp_path / "hf" / "blobs").mkdir(parents=True)
    (tmp_path / "hf" / "snapshots" / "r").mkdir(parents=True)
    blob = tmp_path / "hf" / "blobs" / sha
    blob.write_bytes(bytes(data))
    snap = tmp_path / "hf" / "snapshots" / "r" / "model.safetensors"
    snap.symlink_to(f"../../blobs/{sha}")
    n = len(data)
    assert _lib.rl_file_cached_bytes(os.fsencode(blob), 0, n) == n, "not cached"
    return str(snap), os.path.dirname(snap), str(blob)


def _hf_readers(torch_mod):
    """(id, reader(path)) of every Python reader and its backend and copy
    forms; reader reads every tensor."""
    def whole_np(**kw):
        return lambda p: rnp.load_file(p, **kw)

    def dropin(fw):
        def read(p):
            with ringload.safe_open(p, fw) as f:
                return {k: f.get_tensor(k) for k in f.keys()}
        return read

    out = [(f"numpy.load_file({kw})", whole_np(**kw)) for kw in
           ({}, {"backend": "mmap"}, {"backend": "auto"}, {"backend": "pread"},
            {"copy": True}, {"stats": {}})]
    out += [(f"load({fw})", lambda p, fw=fw: ringload.load(p, framework=fw))
            for fw in ("np", "pt")]
    out += [(f"load({fw}, copy)", lambda p, fw=fw: ringload.load(p, framework=fw, copy=True))
            for fw in ("np", "pt")]
    out += [(f"safe_open({fw})", dropin(fw)) for fw in ("np", "pt")]
    if torch_mod is not None:
        import ringload.torch as rt
        out += [(f"torch.load_file({kw})", lambda p, kw=kw: rt.load_file(p, **kw))
                for kw in ({}, {"backend": "mmap"}, {"backend": "auto"},
                           {"backend": "pread"}, {"copy": True}, {"stats": {}},
                           {"device": "cpu"})]
    return [(i, r) for i, r in out if torch_mod is not None or "pt" not in i]


def test_a_cached_hugging_face_blob_with_a_flipped_byte_is_refused_by_every_reader(
        tmp_path):
    """Regression (issue 32 item 1): a blob named for other bytes, wholly
    in the page cache, loaded without a word through load_file's mapped
    path; every reader, on the snapshot file and on its directory, must
    refuse it naming the snapshot file."""
    try:
        import torch as torch_mod
    except ImportError:
        torch_mod = None
    snap, snapdir, blob = _flipped_blob(tmp_path)
    want = os.path.basename(blob)
    loaded = []
    for name, read in _hf_readers(torch_mod):
        for form in (snap, snapdir):
            _lib.rl_file_cached_bytes(os.fsencode(blob), 0, os.path.getsize(blob))
            try:
                read(form)
                loaded.append(f"{name} on {form}")
            except ringload.IntegrityError as e:
                assert e.code == _lib.RL_E_CHECKSUM, (name, form, str(e))
                assert str(e).startswith(f"{snap}: SHA-256 mismatch: expected {want}"), \
                    (name, form, str(e))
    assert not loaded, "loaded a blob with a flipped byte: " + "; ".join(loaded)


@pytest.mark.parametrize("key", [0, None, 1.5, ("model.safetensors",)])
def test_a_sha256_key_that_is_no_file_name_is_a_type_error_naming_it(ckpt, key):
    """Regression (issue 32 item 5): an int or None key raised a bare
    TypeError from os.fsdecode, naming nothing."""
    path, sha = ckpt
    for call in (lambda: rnp.load_file(path, sha256={key: sha}),
                 lambda: ringload.safe_open(path, "np", sha256={key: sha})):
        with pytest.raises(ringload.ArgumentTypeError) as e:
            call()
        assert isinstance(e.value, TypeError)
        assert str(e.value) == (f"sha256: key {key!r}: a file name (str, bytes or "
                                f"os.PathLike), not {type(key).__name__}")


def test_a_64_hex_name_outside_blobs_names_no_expected_value(ckpt, tmp_path):
    """Only a link into a directory named blobs is a Hugging Face blob: a
    snapshot-like symlink to other/<64 hex> or xblobs/<64 hex> (not the
    file's SHA-256) loads through every reader, unchecked (a mutant
    dropping the blobs/ test refused it, and no test saw that)."""
    path, _ = ckpt
    for parent in ("other", "xblobs"):
        d = tmp_path / parent
        (d / "store" / parent).mkdir(parents=True)
        (d / "snap").mkdir()
        (d / "store" / parent / WRONG).write_bytes(open(path, "rb").read())
        link = d / "snap" / "model.safetensors"
        link.symlink_to(f"../store/{parent}/{WRONG}")
        readers = [lambda p: rnp.load_file(p), lambda p: rnp.load_file(p, backend="pread"),
                   lambda p: ringload.load(p),
                   lambda p: ringload.safe_open(p, "np").get_tensor("b")]
        for read in readers:
            for form in (str(link), str(d / "snap")):
                read(form)
        blob = tmp_path / "real" / "blobs"
        blob.mkdir(parents=True, exist_ok=True)
        (blob / WRONG).write_bytes(open(path, "rb").read())
        link2 = tmp_path / "real" / f"snap-{parent}.safetensors"
        link2.symlink_to(f"blobs/{WRONG}")
        with pytest.raises(ringload.IntegrityError):
            rnp.load_file(str(link2))


def test_safe_open_get_tensors_checks_every_files_value(two_files):
    """get_tensors hashes each file with an expected value, not only the
    first: a wrong value for the second file of two is IntegrityError
    naming it (a mutant hashing only the first file survived)."""
    d, sums = two_files
    for wrong in ("part0.safetensors", "part1.safetensors"):
        given = dict(sums, **{wrong: WRONG})
        with ringload.safe_open(d, "np", sha256=given) as f:
            with pytest.raises(ringload.IntegrityError) as ei:
                f.get_tensors()
        _checksum_error(ei, os.path.join(d, wrong), WRONG)
    with ringload.safe_open(d, "np", sha256=sums) as f:
        assert sorted(f.get_tensors()) == ["t0", "t1"]
