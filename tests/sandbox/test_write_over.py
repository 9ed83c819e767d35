"""The runner writes a state back over the state file in place (``restore``): the file then holds
exactly the bytes of the state put back, whatever it held, and stays the same file."""

import os
import random

from coworkenv.sandbox._runner import READ_BLOCK, _write_over


def _cases(rng: random.Random):
    for _ in range(200):
        size = rng.choice([0, 1, READ_BLOCK - 1, READ_BLOCK, 3 * READ_BLOCK + 7, 70 * READ_BLOCK, 200 * READ_BLOCK])
        old = bytearray(rng.randbytes(size))
        new = bytearray(old)
        for _ in range(rng.randint(0, 6)):  # a few pages changed, as a call leaves them
            if new:
                at = rng.randrange(len(new))
                new[at:at + rng.randint(1, 3 * READ_BLOCK)] = rng.randbytes(min(len(new) - at, rng.randint(1, 3 * READ_BLOCK)))
        shape = rng.random()
        if shape < 0.2:
            new = new[:rng.randint(0, len(new))]  # shorter
        elif shape < 0.4:
            new += rng.randbytes(rng.randint(1, 5 * READ_BLOCK))  # longer
        elif shape < 0.5:
            new = bytearray(rng.randbytes(rng.randint(0, 80 * READ_BLOCK)))  # another file altogether
        yield bytes(old), bytes(new)


def test_the_file_holds_exactly_the_bytes_asked_for_and_stays_the_same_file(tmp_path):
    path, source = tmp_path / "state.db", tmp_path / "kept.db"
    for old, new in _cases(random.Random(7)):
        path.write_bytes(old)
        source.write_bytes(new)
        inode = os.stat(path).st_ino
        _write_over(str(path), str(source))
        assert path.read_bytes() == new, (len(old), len(new))
        assert os.stat(path).st_ino == inode
