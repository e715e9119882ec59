#!/usr/bin/env python3
"""Each bot reads its own stats from its own address, once a second, as a bot in its container would.

Used by scripts/bench-docker-scale.ts. Reads a JSON object on stdin:
  {"agent": "172.18.0.1:8000", "seconds": 60, "fresh": false,
   "bots": [{"id": "bot_1_1_x", "pid": 1234}, ...]}
Each bot's socket is made inside its container's network namespace (setns), so the agent sees each
read come from that bot's own address, one connection per bot kept alive between reads (or a new
connection per read with "fresh"). Bot n reads at n/len(bots) of each second; a read that came late
is not made up for. Prints one JSON object:
the count of reads per answer ("200", "429", "error: ECONNRESET", ...), a sample of each kind that was
not a 200 with its body and time, the first 20 reads that failed on an open connection with what it had been through
(reads answered on it before, seconds since it was opened and since its last answer, as the reader saw them), how many
reads were sent again because the server had closed their kept-alive connection before any byte of answer (once, on a
new connection, as HTTP clients do; counted by the second answer), the times the reader's own loop ran over a second
late, and every read's time in ms (p50/p99 are the caller's to take).
"""
import asyncio
import ctypes
import json
import os
import resource
import socket
import sys
import time

CLONE_NEWNET = 0x40000000
# A read not answered within this counts as failed (a SYN the host never answers would wait 2 minutes).
TIMEOUT_S = 5.0
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def enter(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def socket_in(netns_fd, host_fd):
    """A TCP socket that belongs to the network namespace of netns_fd; this thread back in its own after."""
    enter(netns_fd)
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        enter(host_fd)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


async def answer(reader):
    """Status and body of one HTTP/1.1 answer (a Content-Length or chunks), and whether the server closes."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1]
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip().lower()
    close = fields.get("connection") == "close"
    if fields.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return status, body, close
            body += chunk[:-2]
    length = int(fields.get("content-length", "0"))
    return status, (await reader.readexactly(length) if length else b""), close


async def main():
    job = json.load(sys.stdin)
    # A socket and a namespace's file for each bot.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = job["agent"].rsplit(":", 1)
    port = int(port)
    seconds = job["seconds"]
    fresh = job.get("fresh", False)
    bots = job["bots"]
    host_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    netns = [os.open(f"/proc/{bot['pid']}/ns/net", os.O_RDONLY) for bot in bots]
    loop = asyncio.get_running_loop()
    counts = {}
    samples = {}
    failures = []
    sent_again = [0]
    times = []
    # How late the reader's own loop ran (a sleep of 50 ms that took longer): a reader late by seconds sends its next
    # read on a connection the server may have closed as idle meanwhile.
    lags = []

    async def lag_watch():
        while loop.time() < start + seconds:
            before = loop.time()
            await asyncio.sleep(0.05)
            late = loop.time() - before - 0.05
            if late > 1.0:
                lags.append({"at_s": round(before - start, 3), "late_s": round(late, 3)})
    start = loop.time() + 1.0

    async def connect(i):
        sock = socket_in(netns[i], host_fd)
        await loop.sock_connect(sock, (host, port))
        return await asyncio.open_connection(sock=sock)

    async def bot(i):
        request = (f"GET /api/bots/{bots[i]['id']}/stats HTTP/1.1\r\nHost: agent\r\n"
                   + ("Connection: close\r\n" if fresh else "") + "\r\n").encode()
        streams = None
        opened = last_answer = 0.0
        answered_on = 0
        due = start + i / len(bots)
        while due < start + seconds:
            await asyncio.sleep(max(0.0, due - loop.time()))
            began = time.perf_counter()
            # As a bot that sleeps a second between reads: one that came late reads next a second later, never twice at once.
            due = max(due + 1, loop.time() + 1 - (loop.time() - due) % 1)
            for attempt in (1, 2):
                try:
                    if streams is None:
                        streams = await asyncio.wait_for(connect(i), TIMEOUT_S)
                        opened = last_answer = loop.time()
                        answered_on = 0
                    reader, writer = streams
                    sent = loop.time()
                    writer.write(request)
                    status, body, close = await asyncio.wait_for(answer(reader), TIMEOUT_S)
                    last_answer = loop.time()
                    answered_on += 1
                    if fresh or close:
                        writer.close()
                        streams = None
                    break
                except Exception as err:  # each failure is counted by its kind, never ends the run
                    status, body = f"error: {type(err).__name__} {getattr(err, 'strerror', '') or err}", b""
                    # A kept-alive connection the server closed before any byte of the answer: the request may be
                    # sent again on a new one, as HTTP clients do (RFC 9112, section 9.3.1); once.
                    closed_idle = streams is not None and answered_on > 0 and (
                        (isinstance(err, asyncio.IncompleteReadError) and err.partial == b"")
                        or isinstance(err, (ConnectionResetError, BrokenPipeError)))
                    if streams is not None and len(failures) < 20:
                        failures.append({"bot": bots[i]["id"], "at_s": round(loop.time() - start, 3), "error": status,
                                         "answered_on_connection": answered_on, "connection_age_s": round(sent - opened, 3),
                                         "idle_s": round(sent - last_answer, 3), "sent_again": closed_idle and attempt == 1})
                    if streams is not None:
                        streams[1].close()
                        streams = None
                    if not (closed_idle and attempt == 1):
                        break
                    sent_again[0] += 1
            times.append((time.perf_counter() - began) * 1000)
            counts[status] = counts.get(status, 0) + 1
            if status != "200" and status not in samples:
                samples[status] = {"bot": bots[i]["id"], "at_s": round(loop.time() - start, 3), "body": body[:300].decode("utf-8", "replace")}
        if streams is not None:
            streams[1].close()

    await asyncio.gather(lag_watch(), *(bot(i) for i in range(len(bots))))
    json.dump({"counts": counts, "samples": samples, "failures": failures, "sent_again": sent_again[0], "lags": lags[:20], "times_ms": [round(t, 3) for t in times]}, sys.stdout)


asyncio.run(main())
