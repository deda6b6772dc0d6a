"""The plain-records path of the results reader (:func:`vistabench.data.coco_stream.flat_columns`):
identical columns to the typed records' decoding wherever it applies, and None (the records decode
the chunk, and report its errors) wherever the chunk is anything else."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from vistabench.data.coco import read_result_columns
from vistabench.data.coco_stream import _decoder, flat_columns, struct_columns

PLAIN = [
    b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]',
    # json.dumps' separators, two objects
    b'[{"image_id": 1, "category_id": 2, "bbox": [1.5, 2.25, 3.0, 4.0], "score": 0.5}, '
    b'{"image_id": 10, "category_id": 20, "bbox": [10.5, 20.25, 30.0, 40.0], "score": 0.75}]',
    # another key order, negative ids, -0.0; integer numbers where floats are read; 23 significant digits
    b'[{"score":0.5,"bbox":[1.5,2.25,3.0,4.0],"category_id":-2,"image_id":-1},'
    b'{"score":0.1,"bbox":[-0.0,2.5,3.0,4.0],"category_id":2,"image_id":1}]',
    b'[{"image_id":1,"category_id":2,"bbox":[1,2,3,4],"score":1}]',
    b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.12345678901234567890123}]',
    # whitespace and newlines between and inside the objects (json.dump with indent)
    b'[\n {\n  "image_id": 3,\n  "category_id": 4,\n  "bbox": [\n   1.0,\n   2.0,\n   3.0,\n   4.0\n  ],\n'
    b'  "score": 0.25\n },\n {\n  "image_id": 5,\n  "category_id": 6,\n  "bbox": [\n   1.0,\n   2.0,\n'
    b'   3.0,\n   4.0\n  ],\n  "score": 0.125\n }\n]',
]

NOT_PLAIN = [  # (chunk, whether the records' decoding accepts it)
    (b'[{"image_id":1.0,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":5e-05}]', True),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0],"score":0.5}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5,"x":1}]', True),
    (b'[{"image_id":1,"category_id":2,"bbox":null,"score":0.5}]', True),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":01.5}]', False),
    (b'[{"image_id":1 2,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', False),
    (b'[{"image _id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5},'
     b'{"category_id":2,"image_id":1,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', True),
    # one chunk, two layouts (a decimal point in one score, not in the other)
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5},'
     b'{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":1}]', True),
    (b'[{"image_id":9007199254740993,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', True),
    (b'[{"image_id":-,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":.5}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5},]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}'
     b'{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":1-1}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":"0.5"}]', False),
    (b'[{"image_id":1,"category_id":2,"bbox":[1.5,2.25,3.0,4.0],"score":0.5\x0c}]', False),
]


def _records(data: bytes) -> dict:
    return struct_columns(_decoder(False).decode(data), False)


@pytest.mark.parametrize("data", PLAIN)
def test_plain_chunks_give_the_records_columns_bit_for_bit(data):
    got, want = flat_columns(data), _records(data)
    assert got is not None
    for k in ("image_id", "category_id", "score", "bbox"):
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        assert got[k].tobytes() == want[k].tobytes(), k  # -0.0 and every last bit included
    assert got["seg"] is None and got["missing"] == []


@pytest.mark.parametrize("data,accepted", NOT_PLAIN)
def test_anything_else_is_left_to_the_records(data, accepted):
    assert flat_columns(data) is None
    if accepted:
        _records(data)
    else:
        with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
            _records(data)


def test_random_numbers_read_identically_either_way(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    n = 3000
    vals = np.concatenate([rng.random((n, 5)) * 10.0 ** rng.integers(-3, 4, (n, 1)), rng.random((n, 5))])
    dets = [{"image_id": int(i % 97), "category_id": int(i % 13), "bbox": [float(x) for x in v[:4]],
             "score": float(v[4])} for i, v in enumerate(vals) if "e" not in repr(v.tolist()).lower()]
    p = tmp_path / "results.json"
    p.write_text(json.dumps(dets))
    fast = read_result_columns(p, chunk_bytes=4096, two_processes=False)
    import vistabench.data.coco_stream as stream

    monkeypatch.setattr(stream, "flat_columns", lambda data: None)
    slow = read_result_columns(p, chunk_bytes=4096, two_processes=False)
    assert len(fast["score"]) == len(dets) > 1000
    for k in ("image_id", "category_id", "bbox", "score", "area"):
        assert fast[k].tobytes() == slow[k].tobytes(), k
