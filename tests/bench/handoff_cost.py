"""What moving a batch to a worker process costs, against the work it would move.

``python tests/bench/handoff_cost.py [--rounds 7]``

A worker process (multiprocessing, spawned once, not timed) receives the same batch over a
pipe ``--rounds`` times per way, rebuilds it, and answers with the CPU seconds its side
took. Per way, medians over the rounds of: the sender's CPU ms, the worker's CPU ms, and
the round trip in wall ms (noisy on a shared machine). The ways:

- ``pickle frames``: the list of Kafka values (``bytes``) pickled, sent, unpickled: what a
  reader could hand over without touching the records;
- ``frames as Arrow IPC``: the values copied into one Arrow binary array (the copy the
  decoder makes first anyway, ``frame_arrays.frames_array``), written as an IPC stream,
  sent, read zero-copy from the received bytes;
- ``frames in shared memory, new segment``: the same array's buffers copied into a new
  ``multiprocessing.shared_memory`` segment per batch; the worker maps it and builds the
  array over it without a copy; the sender unlinks it after the answer;
- ``frames in shared memory, reused segment``: the same with one segment created once (an
  arena): only the copy into it and the small message remain;
- ``decoded table as Arrow IPC``: the batch's decoded table (``columns.decode_batch``) the
  other way round, for a design that decodes in one process and encodes in another.

For scale it also prints the CPU ms of ``columns.decode_batch`` of the batch and of
``parquet_io.to_parquet_bytes`` of its table, measured in this process.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import pickle
import time
from multiprocessing import shared_memory

import pyarrow as pa
import pyarrow.ipc as ipc
from cores_data import batches, loadavg, median  # tests/bench, the script's directory

from garmexport.wire import columns, frame_arrays
from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes


def ipc_bytes(table_or_batch) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table_or_batch.schema) as writer:
        writer.write(table_or_batch)
    return sink.getvalue().to_pybytes()


def worker(conn) -> None:
    """Receive (way, payload) messages, rebuild the batch, answer with own CPU seconds."""
    segments: dict[str, shared_memory.SharedMemory] = {}
    while True:
        kind = conn.recv()
        if kind is None:
            break
        c0 = time.process_time()
        if kind in ("pickle", "ipc", "table"):
            data = conn.recv_bytes()
            if kind == "pickle":
                rows = len(pickle.loads(data))
            else:
                rows = ipc.open_stream(pa.py_buffer(data)).read_all().num_rows
        else:  # shared memory: (name, rows, offsets bytes, data bytes)
            name, rows, offsets_size, data_size = conn.recv()
            shm = segments.get(name) or shared_memory.SharedMemory(name=name)
            buf = pa.py_buffer(shm.buf)
            array = pa.Array.from_buffers(pa.binary(), rows, [
                None, buf.slice(0, offsets_size), buf.slice(offsets_size, data_size)])
            rows = len(array)
            del array, buf
            if kind == "shm_new":
                shm.close()
            else:
                segments[name] = shm
        conn.send((rows, time.process_time() - c0))
    for shm in segments.values():
        shm.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--bad-share", type=float, default=0.002)
    args = parser.parse_args(argv)
    [batch] = batches(1, args.bad_share)
    values = batch.values
    table = columns.decode_batch(batch.event_type, values, 0, batch.offsets)[0]
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=worker, args=(there,), daemon=True)
    proc.start()
    arena = shared_memory.SharedMemory(create=True, size=4 * batch.nbytes + (1 << 20))

    def send(kind: str) -> None:
        if kind == "pickle":
            here.send(kind)
            here.send_bytes(pickle.dumps(values, protocol=5))
        elif kind == "ipc":
            frames = frame_arrays.frames_array(values)
            here.send(kind)
            here.send_bytes(ipc_bytes(pa.record_batch([frames], names=["frame"])))
        elif kind == "table":
            here.send(kind)
            here.send_bytes(ipc_bytes(table))
        else:
            frames = frame_arrays.frames_array(values)
            _, offsets, data = frames.buffers()
            shm = arena if kind == "shm_reused" else shared_memory.SharedMemory(
                create=True, size=offsets.size + data.size)
            shm.buf[:offsets.size] = memoryview(offsets).cast("B")
            shm.buf[offsets.size:offsets.size + data.size] = memoryview(data).cast("B")
            here.send(kind)
            here.send((shm.name, len(frames), offsets.size, data.size))
            return shm
        return None

    def release(shm):
        """The worker's answer; then a per-batch segment is closed and unlinked."""
        answer = here.recv()
        if shm is not None and shm is not arena:
            shm.close()
            shm.unlink()
        return answer

    ways = {"pickle": "pickle frames (list of bytes)",
            "ipc": "frames as Arrow IPC (incl. the copy into one array)",
            "shm_new": "frames in shared memory, new segment per batch",
            "shm_reused": "frames in shared memory, reused segment",
            "table": "decoded table as Arrow IPC"}
    print(f"batch: {len(values)} {batch.event_type.output} records, {batch.nbytes / 1e6:.2f} MB "
          f"of frames; decoded table {table.nbytes / 1e6:.2f} MB; load average: {loadavg()}")
    scale = []
    for _ in range(args.rounds):
        c0 = time.process_time()
        columns.decode_batch(batch.event_type, values, 0, batch.offsets)
        c1 = time.process_time()
        to_parquet_bytes([table], FileFacts("b", "b", 0, 0, 0, 0), "zstd")
        scale.append((c1 - c0, time.process_time() - c1))
    copy = []
    for _ in range(args.rounds):
        c0 = time.process_time()
        frame_arrays.frames_array(values)
        copy.append(time.process_time() - c0)
    print(f"for scale, CPU ms per batch: decode_batch {median([a for a, _ in scale]) * 1e3:.2f}, "
          f"to_parquet_bytes of its table {median([b for _, b in scale]) * 1e3:.2f}, "
          f"frames_array (the decoder's first copy) {median(copy) * 1e3:.2f}")
    print(f"{'way':52} {'sender CPU ms':>14} {'worker CPU ms':>14} {'round trip ms':>14}")
    try:
        for kind, title in ways.items():
            release(send(kind))  # warm: first segment, first pickle
            sender, receiver, trip = [], [], []
            for _ in range(args.rounds):
                w0, c0 = time.perf_counter(), time.process_time()
                shm = send(kind)
                c1 = time.process_time()
                rows, worker_cpu = release(shm)
                trip.append(time.perf_counter() - w0)
                assert rows in (len(values), table.num_rows), rows
                sender.append(c1 - c0)
                receiver.append(worker_cpu)
            print(f"{title:52} {median(sender) * 1e3:14.2f} {median(receiver) * 1e3:14.2f} "
                  f"{median(trip) * 1e3:14.2f}", flush=True)
    finally:
        here.send(None)
        proc.join(10)
        arena.close()
        arena.unlink()
    print(f"medians of {args.rounds} rounds; load average after: {loadavg()}")


if __name__ == "__main__":
    main()
