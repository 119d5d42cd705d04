"""The upb check finds exactly the payloads upb rejects one by one, wherever they sit.

The check parses ranges of payloads as one wrapper message and narrows failing ranges; the
judge is ``message.FromString`` of each payload alone, which these tests apply to every
payload to get the expected verdicts and error texts.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.wire import upb_check
from garmexport.wire.events import HEADER, REGISTRY
from garmexport.wire.frames import Reason
from tests import strategies as gs
from tests.hypothesis_profiles import examples

FS = REGISTRY[1]
FIRST, PARTS = upb_check._FIRST_RANGE, upb_check._PARTS


def one_by_one(message, payloads: list[bytes]) -> list[tuple[int, str]]:
    found = []
    for i, payload in enumerate(payloads):
        try:
            message.FromString(payload)
        except DecodeError as exc:
            found.append((i, str(exc)))
    return found


def check(message, payloads: list[bytes]) -> list[tuple[int, str]]:
    got = upb_check.find_bad(message, pa.array(payloads, pa.binary()), Reason.BAD_BODY)
    assert all(f.reason is Reason.BAD_BODY for _, f in got)
    return [(i, f.detail) for i, f in got]


def goods(n: int) -> list[bytes]:
    return [FS.message(uri=f"hdfs://x/{i}", hdfs_user="u" * (i % 7)).SerializeToString()
            for i in range(n)]


BAD = gs.KNOWN_BAD_PAYLOADS[1]


@pytest.mark.parametrize("n, at", [
    (1, [0]), (2, [1]), (PARTS, [0, PARTS - 1]), (PARTS + 1, [PARTS]),
    (FIRST, [0]), (FIRST, [FIRST - 1]), (FIRST + 1, [FIRST]), (3 * FIRST + 5, [FIRST - 1, FIRST]),
    (3 * FIRST + 5, [0, 1, 2, 3 * FIRST + 4]), (2 * FIRST, list(range(FIRST - 40, FIRST + 40))),
    (5000, [33, 34, 1000, 4999]),
])  # fmt: skip
def test_bad_payloads_at_the_edges_of_ranges_and_parts_are_found(n, at):
    payloads = goods(n)
    for i in at:
        payloads[i] = gs.KNOWN_BAD_PAYLOADS[i % len(gs.KNOWN_BAD_PAYLOADS)]
    expected = one_by_one(FS.message, payloads)
    assert [i for i, _ in expected] == at
    assert check(FS.message, payloads) == expected


@pytest.mark.parametrize("n", [1, PARTS, FIRST + 3, 3 * FIRST])
def test_a_batch_of_bad_payloads_only_is_all_found(n):
    payloads = [gs.KNOWN_BAD_PAYLOADS[i % len(gs.KNOWN_BAD_PAYLOADS)] for i in range(n)]
    expected = one_by_one(FS.message, payloads)
    assert len(expected) == n
    assert check(FS.message, payloads) == expected


@pytest.mark.parametrize("n", [0, 1, FIRST, 3 * FIRST + 1])
def test_good_payloads_have_no_failures(n):
    assert check(FS.message, goods(n)) == []


def test_a_sliced_array_is_checked_from_its_own_start():
    payloads = goods(2 * FIRST)
    payloads[FIRST + 7] = BAD
    array = pa.array(payloads, pa.binary()).slice(FIRST)
    got = upb_check.find_bad(FS.message, array, Reason.BAD_HEADER)
    assert [(i, f.reason) for i, f in got] == [(7, Reason.BAD_HEADER)]


@settings(max_examples=examples(50), deadline=None)
@given(data=st.data())
def test_the_check_agrees_with_upb_payload_by_payload(data):
    message = data.draw(st.sampled_from([FS.message, HEADER]))
    n = data.draw(st.integers(1, 3 * FIRST))
    bad_at = data.draw(st.sets(st.integers(0, n - 1), max_size=12))
    bad = data.draw(st.lists(gs.bad_payloads(message), min_size=len(bad_at),
                             max_size=len(bad_at)))
    good = b"" if message is HEADER else goods(1)[0]
    payloads = [good] * n
    for i, payload in zip(sorted(bad_at), bad):
        payloads[i] = payload
    assert check(message, payloads) == one_by_one(message, payloads)
