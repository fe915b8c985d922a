#!/usr/bin/env python3
"""Request latency as seen on the wire, from a packet capture (issue 4).

    scripts/wire_latency.py CAPTURE.pcap --port PORT [--command SET]
                            [--json OUT.json]

A benchmark client's latency figures can only be checked by something that
times *the same requests* without being part of either client. A capture
on loopback does: every request and reply crosses `lo` once, stamped by the
kernel (use `tcpdump --time-stamp-precision=nano`). This script reads the
capture (classic pcap, micro- or nanosecond, either byte order; Ethernet,
Linux cooked v1/v2, raw IP or BSD loopback framing; IPv4 and IPv6) with no
dependency beyond Python 3, and for every TCP connection to PORT:

1. reassembles both byte streams by TCP sequence number, each byte stamped
   with the time of the first packet that carried it: a request split over
   several segments starts at its first segment; retransmitted bytes keep
   their first time; segments without payload (pure ACKs, SYN, FIN) carry
   no bytes and are ignored; out-of-order segments wait for the gap;
2. splits the client's stream into RESP commands and the server's into RESP
   replies (RESP2 and RESP3 types); the n-th reply answers the n-th command
   (Redis answers in order);
3. groups the commands into the batches a closed-loop client sends: a
   command starts a new batch when every earlier command was fully answered
   before its first byte left, so `-P 16` pipelines are one batch each and
   unpipelined commands are batches of one;
4. gives every command of a batch the batch's wire latency: from the first
   byte of the batch's first command to the first byte of its first reply.
   That is the interval redis-benchmark 7 and cairn-bench time (the start
   of a pipeline's write to the first readiness with its reply), less what
   only the client sees: the part of the write syscall before the segment
   reaches `lo`, and, after the reply's segment, the wake-up, the return
   from epoll and the handling of the other connections ready in the same
   poll round.

Only batches made entirely of `--command` (default: the most frequent
command) are measured, so connection set-up (redis-benchmark's CONFIG GET,
cairn-bench's INFO, HELLO, AUTH, SELECT, ...) is left out and listed by name
among the excluded commands. Commands answered by an error reply are
counted as errors and left out of the percentiles, as cairn-bench does.

The result (stdout, and JSON with --json): requests measured, batches,
their sizes, the client's turn-around (from the last byte of a batch's
replies to the first byte of its connection's next batch: how long the
reply waited in the client, its handling and the next write), p50/p99/p99.9/max/mean in microseconds (exact nearest-rank
percentiles of the nanosecond values; `*_rb` the same on redis-benchmark's
HDR grid, 8 us buckets up to 16 ms, for comparing with its figures), and
every reason a byte or command was not measured (truncated by the snap
length, a gap in the capture, unanswered at the end).
"""
import argparse
import bisect
import collections
import json
import math
import struct
import sys

# pcap link types this reader understands.
LINK_NULL = 0
LINK_ETHERNET = 1
LINK_RAW = 101
LINK_LOOP = 108
LINK_SLL = 113
LINK_IPV4 = 228
LINK_IPV6 = 229
LINK_SLL2 = 276

TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04

SEQ_MOD = 1 << 32
# Bound on out-of-order segments held per direction while waiting for a
# gap to fill; beyond it the gap is declared lost.
MAX_PENDING = 4096


class PcapError(Exception):
    pass


def read_pcap(data):
    """Yields (ts_ns, linktype, frame, orig_len) for each record of a
    classic pcap file given as bytes. A truncated last record (a capture
    stopped mid-write) ends the iteration."""
    if len(data) < 24:
        raise PcapError("not a pcap file: shorter than its header")
    magic = data[:4]
    table = {
        b"\xd4\xc3\xb2\xa1": ("<", 1000),
        b"\xa1\xb2\xc3\xd4": (">", 1000),
        b"\x4d\x3c\xb2\xa1": ("<", 1),
        b"\xa1\xb2\x3c\x4d": (">", 1),
    }
    if magic not in table:
        if magic == b"\x0a\x0d\x0d\x0a":
            raise PcapError("pcapng is not supported: capture with tcpdump -w (pcap)")
        raise PcapError(f"not a pcap file (magic {magic.hex()})")
    endian, scale = table[magic]
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    rec = struct.Struct(endian + "IIII")
    mv = memoryview(data)
    pos = 24
    n = len(data)
    while pos + 16 <= n:
        sec, frac, caplen, orig = rec.unpack_from(data, pos)
        pos += 16
        if pos + caplen > n:
            return
        yield sec * 1_000_000_000 + frac * scale, linktype, mv[pos:pos + caplen], orig
        pos += caplen


def ip_payload(linktype, frame):
    """The IP packet inside a link-layer frame, or None."""
    if linktype == LINK_ETHERNET:
        if len(frame) < 14:
            return None
        etype = struct.unpack_from(">H", frame, 12)[0]
        off = 14
        while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
            etype = struct.unpack_from(">H", frame, off + 2)[0]
            off += 4
        return frame[off:] if etype in (0x0800, 0x86DD) else None
    if linktype in (LINK_RAW, LINK_IPV4, LINK_IPV6):
        return frame
    if linktype in (LINK_NULL, LINK_LOOP):
        return frame[4:]
    if linktype == LINK_SLL:
        if len(frame) < 16:
            return None
        etype = struct.unpack_from(">H", frame, 14)[0]
        return frame[16:] if etype in (0x0800, 0x86DD) else None
    if linktype == LINK_SLL2:
        if len(frame) < 20:
            return None
        etype = struct.unpack_from(">H", frame, 0)[0]
        return frame[20:] if etype in (0x0800, 0x86DD) else None
    return None


def tcp_segment(linktype, frame, orig_len):
    """Decodes one frame into (src, sport, dst, dport, seq, flags, payload,
    missing): `missing` is how many payload bytes the snap length cut
    off. None for anything that is not TCP over IPv4/IPv6."""
    ip = ip_payload(linktype, frame)
    if ip is None or len(ip) < 1:
        return None
    # Bytes of the frame before the IP header (to relate orig_len to it).
    link_hdr = len(frame) - len(ip)
    version = ip[0] >> 4
    if version == 4:
        if len(ip) < 20:
            return None
        ihl = (ip[0] & 15) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        if ip[9] != 6 or ihl < 20 or len(ip) < ihl + 20:
            return None
        frag = struct.unpack_from(">H", ip, 6)[0]
        if frag & 0x1FFF:
            return None  # not the first fragment: no TCP header
        src, dst = bytes(ip[12:16]), bytes(ip[16:20])
        l4 = ihl
        ip_len = total if total else orig_len - link_hdr  # 0 with TSO
    elif version == 6:
        if len(ip) < 40 or ip[6] != 6:
            return None  # extension headers are not expected on lo
        src, dst = bytes(ip[8:24]), bytes(ip[24:40])
        l4 = 40
        ip_len = 40 + struct.unpack_from(">H", ip, 4)[0]
    else:
        return None
    if len(ip) < l4 + 20:
        return None
    sport, dport, seq = struct.unpack_from(">HHI", ip, l4)
    doff = (ip[l4 + 12] >> 4) * 4
    flags = ip[l4 + 13]
    start = l4 + doff
    if len(ip) < start:
        return None
    # The payload's real length: the IP length less the headers (the
    # frame may be padded, and the capture may be cut by the snap length).
    plen = max(0, ip_len - start)
    payload = bytes(ip[start:start + plen])
    missing = plen - len(payload)
    return src, sport, dst, dport, seq, flags, payload, missing


class Stream:
    """One direction of a TCP connection: the bytes in order, and the time
    each run of bytes was first seen."""

    def __init__(self):
        self.next = None  # next expected sequence number
        self.data = bytearray()
        self.offs = []  # stream offset where each stamped run starts
        self.times = []  # its capture time (ns)
        self.pending = {}  # seq -> (payload, ts) of out-of-order segments
        self.retransmitted = 0  # bytes seen again
        self.cut = None  # stream offset of the first byte not captured
        self.cut_why = None

    def syn(self, seq):
        self.next = (seq + 1) % SEQ_MOD

    def segment(self, seq, payload, ts, missing):
        if self.cut is not None or not payload and not missing:
            return
        if self.next is None:
            self.next = seq  # capture began mid-connection
        off = (seq - self.next) % SEQ_MOD
        if off >= SEQ_MOD // 2:
            off -= SEQ_MOD
        if off > 0:
            if missing:
                self._stop("snaplen")
                return
            if len(self.pending) >= MAX_PENDING:
                self._stop("gap")
                return
            if seq not in self.pending or len(self.pending[seq][0]) < len(payload):
                self.pending[seq] = (payload, ts)
            return
        self._append(payload, -off, ts, missing)
        self._drain()

    def _append(self, payload, skip, ts, missing):
        """Appends payload[skip:] (bytes before `skip` were seen already);
        `missing` bytes of it after the payload were not captured."""
        if skip >= len(payload) + missing:
            self.retransmitted += len(payload)
            return
        self.retransmitted += min(skip, len(payload))
        if skip >= len(payload):
            # Only uncaptured bytes are new.
            self._stop("snaplen")
            return
        new = payload[skip:]
        self.offs.append(len(self.data))
        self.times.append(ts)
        self.data += new
        self.next = (self.next + len(new)) % SEQ_MOD
        if missing:
            self._stop("snaplen")

    def _drain(self):
        while self.pending and self.cut is None:
            ready = None
            for s in self.pending:
                off = (s - self.next) % SEQ_MOD
                if off == 0 or off >= SEQ_MOD // 2:
                    ready = s
                    break
            if ready is None:
                return
            payload, ts = self.pending.pop(ready)
            off = (ready - self.next) % SEQ_MOD
            skip = 0 if off == 0 else SEQ_MOD - off
            self._append(payload, skip, ts, 0)

    def _stop(self, why):
        if self.cut is None:
            self.cut = len(self.data)
            self.cut_why = why
        self.pending.clear()

    def finish(self):
        if self.pending and self.cut is None:
            self._stop("gap")

    def time_at(self, offset):
        """Capture time of the byte at stream offset `offset`."""
        return self.times[bisect.bisect_right(self.offs, offset) - 1]


class Incomplete(Exception):
    """The message runs past the end of the captured stream."""


class Malformed(Exception):
    pass


def _line(buf, pos):
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    return end


def parse_command(buf, pos):
    """One client command at `pos`: (end, NAME). RESP arrays of bulk
    strings, or an inline command line."""
    if pos >= len(buf):
        raise Incomplete
    if buf[pos] != 0x2A:  # inline command
        end = buf.find(b"\n", pos)
        if end < 0:
            raise Incomplete
        words = bytes(buf[pos:end]).strip().split()
        return end + 1, (words[0].decode("latin-1").upper() if words else "")
    e = _line(buf, pos)
    try:
        n = int(buf[pos + 1:e])
    except ValueError:
        raise Malformed(f"bad array header at {pos}") from None
    p = e + 2
    name = ""
    for i in range(max(n, 0)):
        if p >= len(buf):
            raise Incomplete
        if buf[p] != 0x24:
            raise Malformed(f"command element is not a bulk string at {p}")
        e = _line(buf, p)
        try:
            ln = int(buf[p + 1:e])
        except ValueError:
            raise Malformed(f"bad bulk length at {p}") from None
        if ln < 0:
            raise Malformed(f"negative bulk length in a command at {p}")
        s = e + 2
        if s + ln + 2 > len(buf):
            raise Incomplete
        if i == 0:
            name = bytes(buf[s:s + ln]).decode("latin-1").upper()
        p = s + ln + 2
    return p, name


def parse_reply(buf, pos, depth=0):
    """One reply at `pos`: (end, is_error). RESP2 and RESP3 types; a RESP3
    attribute is part of the reply that follows it."""
    if depth > 64:
        raise Malformed("replies nested too deep")
    if pos >= len(buf):
        raise Incomplete
    t = buf[pos]
    e = _line(buf, pos)
    if t in b"+-:_#,(":  # simple string, error, integer, null, bool, double, big
        return e + 2, t == 0x2D
    if t in b"$!=":  # bulk string, bulk error, verbatim
        try:
            ln = int(buf[pos + 1:e])
        except ValueError:
            raise Malformed(f"bad bulk length at {pos}") from None
        if ln < 0:
            return e + 2, False
        end = e + 2 + ln + 2
        if end > len(buf):
            raise Incomplete
        return end, t == 0x21
    if t in b"*~>%|":  # array, set, push, map, attribute
        try:
            n = int(buf[pos + 1:e])
        except ValueError:
            raise Malformed(f"bad aggregate length at {pos}") from None
        p = e + 2
        if n > 0:
            for _ in range(n * 2 if t in b"%|" else n):
                p, _err = parse_reply(buf, p, depth + 1)
        if t == 0x7C:  # attribute: the reply itself follows
            return parse_reply(buf, p, depth + 1)
        return p, False
    raise Malformed(f"unknown reply type {chr(t)!r} at {pos}")


def split(stream, parse):
    """Messages of a stream: [(start, end, value)], and why it stopped
    early (None when every captured byte was parsed)."""
    out = []
    pos = 0
    buf = stream.data
    limit = len(buf)
    while pos < limit:
        try:
            end, v = parse(buf, pos)
        except Incomplete:
            return out, stream.cut_why or "incomplete at the end"
        except Malformed as e:
            return out, f"malformed: {e}"
        out.append((pos, end, v))
        pos = end
    return out, stream.cut_why


class Conn:
    def __init__(self, key):
        self.key = key
        self.c2s = Stream()
        self.s2c = Stream()


def connections(packets, port):
    """Groups segments to or from `port` into connections, in order of
    their first packet. A SYN on a 4-tuple seen before starts a new
    connection (the port was reused)."""
    live = {}
    done = []
    truncated = 0
    for ts, link, frame, orig in packets:
        seg = tcp_segment(link, frame, orig)
        if seg is None:
            continue
        src, sport, dst, dport, seq, flags, payload, missing = seg
        if dport == port:
            key, to_server = (src, sport, dst, dport), True
        elif sport == port:
            key, to_server = (dst, dport, src, sport), False
        else:
            continue
        if missing:
            truncated += 1
        c = live.get(key)
        fresh_syn = flags & TCP_SYN and not flags & 0x10 and to_server
        if c is None or (fresh_syn and (c.c2s.data or c.s2c.data)):
            c = Conn(key)
            live[key] = c
            done.append(c)
        st = c.c2s if to_server else c.s2c
        if flags & TCP_SYN:
            st.syn(seq)
            continue
        if flags & TCP_RST:
            continue
        st.segment(seq, payload, ts, missing)
    for c in done:
        c.c2s.finish()
        c.s2c.finish()
    return done, truncated


def percentile(sorted_pairs, total, q):
    """Nearest-rank percentile of weighted values: the smallest value at
    or below which at least q of the weight lies."""
    rank = max(1, math.ceil(q * total))
    acc = 0
    for v, w in sorted_pairs:
        acc += w
        if acc >= rank:
            return v
    return sorted_pairs[-1][0]


def rb_grid(us):
    """A latency in µs as redis-benchmark 7 prints it: the top of its HDR
    bucket (`hdr_init(10, 3000000, 3)`: 8 µs buckets up to 16,384 µs,
    doubling above), as cairn-bench's `at_rb_resolution`."""
    width = 8.0
    while us >= 2048.0 * width and width < 1e12:
        width *= 2.0
    return math.floor(us / width) * width + width - 1.0


class Capture:
    """Every connection to the server port, split into commands and
    replies."""

    def __init__(self, packets, port):
        self.port = port
        conns, self.truncated = connections(packets, port)
        self.connections = len(conns)
        self.names = collections.Counter()
        self.problems = collections.Counter()
        self.retransmitted = 0
        self.conns = []
        for c in conns:
            reqs, why_c = split(c.c2s, parse_command)
            reps, why_s = split(c.s2c, parse_reply)
            if why_c:
                self.problems[f"client stream stopped: {why_c}"] += 1
            if why_s:
                self.problems[f"server stream stopped: {why_s}"] += 1
            self.retransmitted += c.c2s.retransmitted + c.s2c.retransmitted
            self.names.update(r[2] for r in reqs)
            self.conns.append((c, reqs, reps))


def measure(cap, command=None):
    """The wire latency of every batch of `command` (default: the most
    frequent command) in a capture, with the counts of everything left
    out."""
    if command is None:
        command = cap.names.most_common(1)[0][0] if cap.names else ""
    command = command.upper()
    samples = []  # (latency ns, requests)
    # Per batch after the first of its connection: from the end of the
    # previous batch's last reply to this batch's first byte (the client's
    # turn-around: the reply waiting in it, its handling, the next write).
    gaps = []
    sizes = collections.Counter()
    excluded = collections.Counter()
    unanswered = 0
    errors = 0
    extra_replies = 0
    for c, reqs, reps in cap.conns:
        extra_replies += max(0, len(reps) - len(reqs))
        answered = min(len(reqs), len(reps))
        prev_batch_end = None
        i = 0
        while i < answered:
            # The batch that starts with command i: every later command
            # whose first byte left before the previous reply was complete.
            j = i + 1
            while j < answered:
                sent = c.c2s.time_at(reqs[j][0])
                prev_done = c.s2c.time_at(reps[j - 1][1] - 1)
                if sent >= prev_done:
                    break
                j += 1
            batch = range(i, j)
            if all(reqs[k][2] == command for k in batch):
                start = c.c2s.time_at(reqs[i][0])
                if prev_batch_end is not None:
                    gaps.append(start - prev_batch_end)
                prev_batch_end = c.s2c.time_at(reps[j - 1][1] - 1)
                first = c.s2c.time_at(reps[i][0])
                errs = sum(1 for k in batch if reps[k][2])
                errors += errs
                if len(batch) > errs:
                    samples.append((first - start, len(batch) - errs))
                sizes[len(batch)] += 1
            else:
                prev_batch_end = None
                for k in batch:
                    excluded[reqs[k][2]] += 1
            i = j
        for k in range(answered, len(reqs)):
            if reqs[k][2] == command:
                unanswered += 1
            else:
                excluded[reqs[k][2]] += 1
    samples.sort()
    total = sum(w for _, w in samples)
    res = {
        "port": cap.port,
        "command": command,
        "connections": cap.connections,
        "requests": total,
        "batches": sum(sizes.values()),
        "batch_sizes": {str(k): v for k, v in sorted(sizes.items())},
        "errors": errors,
        "unanswered": unanswered,
        "extra_replies": extra_replies,
        "excluded": dict(sorted(excluded.items())),
        "truncated_segments": cap.truncated,
        "retransmitted_bytes": cap.retransmitted,
        "problems": dict(cap.problems),
    }
    if total:
        us = [(v / 1000.0, w) for v, w in samples]
        for name, q in (("p50", 0.50), ("p99", 0.99), ("p999", 0.999)):
            v = percentile(us, total, q)
            res[f"{name}_us"] = v
            res[f"{name}_us_rb"] = rb_grid(v)
        res["max_us"] = us[-1][0]
        res["min_us"] = us[0][0]
        res["mean_us"] = sum(v * w for v, w in us) / total
    if gaps:
        gaps.sort()
        res["turnaround_p50_us"] = gaps[(len(gaps) - 1) // 2] / 1000.0
        res["turnaround_mean_us"] = sum(gaps) / len(gaps) / 1000.0
    return res


def analyse(packets, port, commands=(None,)):
    """`measure` for each of `commands` over one capture."""
    cap = Capture(packets, port)
    return [measure(cap, c) for c in commands]


def render(r):
    lines = [
        f"{r['command']} on port {r['port']}: {r['requests']:,} requests in "
        f"{r['batches']:,} batches over {r['connections']} connections"
    ]
    if r["requests"]:
        lines.append(
            "  wire latency us: p50 {p50_us:.1f}  p99 {p99_us:.1f}  p99.9 {p999_us:.1f}"
            "  max {max_us:.1f}  mean {mean_us:.1f}  (redis-benchmark grid: p50 {p50_us_rb:.0f}"
            "  p99 {p99_us_rb:.0f})".format(**r)
        )
    if "turnaround_mean_us" in r:
        lines.append(
            "  client turn-around us (last reply byte to next batch): p50 "
            "{turnaround_p50_us:.1f}  mean {turnaround_mean_us:.1f}".format(**r)
        )
    lines.append(f"  batch sizes: {r['batch_sizes']}")
    lines.append(
        f"  left out: excluded {r['excluded']}, errors {r['errors']}, unanswered "
        f"{r['unanswered']}, extra replies {r['extra_replies']}"
    )
    lines.append(
        f"  capture: {r['truncated_segments']} segments cut by the snap length, "
        f"{r['retransmitted_bytes']} bytes retransmitted, problems {r['problems'] or 'none'}"
    )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", help="a pcap file (tcpdump -w)")
    ap.add_argument("--port", type=int, required=True, help="the server's TCP port")
    ap.add_argument(
        "--command",
        action="append",
        help="the command whose batches are measured (repeat for several; "
        "default: the most frequent one)",
    )
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    with open(a.capture, "rb") as f:
        data = f.read()
    try:
        results = analyse(read_pcap(data), a.port, a.command or [None])
    except PcapError as e:
        print(f"{a.capture}: {e}", file=sys.stderr)
        return 2
    for r in results:
        print(render(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
