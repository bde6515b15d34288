#!/usr/bin/env python3
"""Reads one partition whole with raw Fetch requests and throws the bytes
away: a consumer that costs almost nothing, so what is measured is the
server's send path (Kafka's perf tools and kcat decode every record, and are
the bottleneck on loopback).

    raw_fetch.py HOST:PORT TOPIC [PARTITION_MAX_BYTES]

Prints MiB/s of record batches received (MiB as ConsumerPerformance counts).
Fetch v4: records as stored, the offset to ask next read from the last whole
batch's header."""
import socket
import struct
import sys
import time


def fetch_request(correlation_id, topic, offset, partition_max_bytes):
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 500, 1, 64 << 20, 0)  # replica, max wait, min bytes, max bytes, isolation
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iiqi", 1, 0, offset, partition_max_bytes)
    header = struct.pack(">hhih", 1, 4, correlation_id, 8) + b"raw_fetch"[:8]
    return struct.pack(">i", len(header) + len(body)) + header + body


def read_exact(sock, view):
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError("the server closed the connection")
        got += n


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    topic = sys.argv[2]
    partition_max_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 20
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = bytearray(80 << 20)
    size = memoryview(bytearray(4))
    offset, received, correlation_id = 0, 0, 0
    start = time.perf_counter()
    while True:
        correlation_id += 1
        sock.sendall(fetch_request(correlation_id, topic, offset, partition_max_bytes))
        read_exact(sock, size)
        (length,) = struct.unpack(">i", size)
        frame = memoryview(buffer)[:length]
        read_exact(sock, frame)
        # correlation id, throttle, 1 topic (name), 1 partition: index, error, hw, lso, aborted, records
        at = 4 + 4 + 4
        (name_len,) = struct.unpack_from(">h", frame, at)
        at += 2 + name_len + 4
        _, error, high, _, aborted = struct.unpack_from(">ihqqi", frame, at)
        at += 4 + 2 + 8 + 8 + 4 + max(aborted, 0) * 16
        if error != 0:
            sys.exit(f"fetch at {offset}: error {error}")
        (records_len,) = struct.unpack_from(">i", frame, at)
        at += 4
        end, whole = at + max(records_len, 0), at
        while whole + 12 <= end:
            base, batch_len = struct.unpack_from(">qi", frame, whole)
            if whole + 12 + batch_len > end:
                break
            (last_delta,) = struct.unpack_from(">i", frame, whole + 23)
            offset = base + last_delta + 1
            whole += 12 + batch_len
        received += whole - at
        if offset >= high:
            break
    elapsed = time.perf_counter() - start
    print(f"{received / 1048576 / elapsed:.1f}")


if __name__ == "__main__":
    main()
