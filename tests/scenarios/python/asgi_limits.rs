//! What one hostile client may cost an ASGI worker on `protocol = "http"`: a WebSocket
//! frame that declares 1 GiB, a fragmented message that never ends, text that is not
//! UTF-8, and 30 MB of pipelined GETs from a client that reads nothing. Each client is a
//! Python script on a raw socket that samples the worker's VmRSS as it goes and prints
//! what it saw; the test holds the worker to a bound and the client to the close code.

use super::asgi::python_workers;
use super::http_pool::Server;
use crate::common::TIMEOUT;

/// The raw WebSocket client's helpers: a handshake, masked frames (mask key 0, so the
/// payload goes as written), the first close frame's code, the worker's VmRSS.
const WS_RAW: &str = r#"
import base64, os, select, socket, struct, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
MiB = 1 << 20

def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

def connect(path="/echo"):
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
              f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
              "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        got = s.recv(4096)
        assert got, head
        head += got
    assert head.startswith(b"HTTP/1.1 101"), head
    return s, head.split(b"\r\n\r\n", 1)[1]

TEXT, BINARY, CONT, CLOSE = 1, 2, 0, 8

def header(op, fin, length):
    b0 = (0x80 if fin else 0) | op
    if length < 126:
        h = struct.pack("!BB", b0, 0x80 | length)
    elif length < 65536:
        h = struct.pack("!BBH", b0, 0x80 | 126, length)
    else:
        h = struct.pack("!BBQ", b0, 0x80 | 127, length)
    return h + b"\0\0\0\0"

def frame(op, fin, payload):
    return header(op, fin, len(payload)) + payload

def frames(s, buf, deadline=10.0):
    """Yields (opcode, payload) of the server's frames until EOF or the deadline."""
    s.settimeout(deadline)
    while True:
        while len(buf) >= 2:
            op, n = buf[0] & 0x0F, buf[1] & 0x7F
            at = 2
            if n == 126:
                if len(buf) < 4: break
                n, at = struct.unpack("!H", buf[2:4])[0], 4
            elif n == 127:
                if len(buf) < 10: break
                n, at = struct.unpack("!Q", buf[2:10])[0], 10
            if len(buf) < at + n: break
            yield op, buf[at:at + n]
            buf = buf[at + n:]
        try:
            got = s.recv(1 << 16)
        except (socket.timeout, ConnectionError):
            return
        if not got:
            return
        buf += got

def close_code(s, buf=b""):
    for op, payload in frames(s, buf):
        if op == CLOSE:
            return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
    return "no close frame"

def push(s, chunks, limit):
    """Sends chunks until the server writes something back (its close) or `limit` bytes
    went; returns (bytes sent, the worker's peak VmRSS meanwhile)."""
    sent, peak = 0, rss()
    for chunk in chunks:
        if sent >= limit or select.select([s], [], [], 0)[0]:
            break
        try:
            s.sendall(chunk)
        except ConnectionError:
            break
        sent += len(chunk)
        peak = max(peak, rss())
    return sent, peak

def settled(base, bound):
    """The worker's VmRSS once it is back under base + bound (or after 5 s)."""
    deadline = time.monotonic() + 5
    while rss() > base + bound and time.monotonic() < deadline:
        time.sleep(0.05)
    return rss()
"#;

/// A binary frame that declares 1 GiB, then 64 MiB of it; then a text message of 1 MiB
/// fragments that never ends (up to 96 MiB).
const WS_TOO_BIG: &str = r#"
base = rss()
s, rest = connect()
zeros = b"\0" * MiB
sent, peak = push(s, [header(BINARY, True, 1 << 30)] + [zeros] * 64, 65 * MiB)
code = close_code(s, rest)
s.close()
print(f"huge frame: close {code}; sent {sent // MiB} MiB; rss {base // MiB} -> peak "
      f"{peak // MiB} -> {settled(base, 8 * MiB) // MiB} MiB", flush=True)

base = rss()
s, rest = connect()
a = b"a" * MiB
parts = [frame(TEXT, False, a)] + [frame(CONT, False, a)] * 95
sent, peak = push(s, parts, 96 * MiB + 1)
code = close_code(s, rest)
s.close()
print(f"endless message: close {code}; sent {sent // MiB} MiB; rss {base // MiB} -> peak "
      f"{peak // MiB} -> {settled(base, 8 * MiB) // MiB} MiB", flush=True)

# A message under the limit still echoes: a 2 MiB one, in two fragments.
s, rest = connect()
s.sendall(frame(BINARY, False, b"x" * MiB) + frame(CONT, True, b"y" * MiB))
got = next(frames(s, rest))
print("under the limit", got == (BINARY, b"x" * MiB + b"y" * MiB), flush=True)
s.close()
"#;

/// Text that is not UTF-8: in one frame, and across two fragments; and a character split
/// across fragments, which is valid.
const WS_BAD_UTF8: &str = r#"
s, rest = connect()
s.sendall(frame(TEXT, True, b"ok\xff"))
print("one frame: close", close_code(s, rest), flush=True)
s.close()
s, rest = connect()
s.sendall(frame(TEXT, False, b"abc\xe2\x82"))
s.sendall(frame(CONT, True, b"("))
print("two fragments: close", close_code(s, rest), flush=True)
s.close()
s, rest = connect()
s.sendall(frame(TEXT, False, b"caf\xc3") + frame(CONT, True, b"\xa9"))
print("split character:", next(frames(s, rest)), flush=True)
s.close()
"#;

/// Runs a client script (after [`WS_RAW`]) against the server's worker; its stdout lines.
fn run_client(server: &Server, helpers: &str, script: &str) -> Vec<String> {
    let workers = python_workers(&server.drover);
    assert_eq!(workers.len(), 1, "{workers:?}");
    let code = format!("{helpers}\n{script}");
    // Bounded: a server that stops answering must fail the test, not hang it.
    let run = std::process::Command::new("timeout")
        .args([
            "180",
            "python3",
            "-c",
            &code,
            &server.port.to_string(),
            &workers[0].to_string(),
        ])
        .output()
        .expect("run python3");
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "{out}\n{}\nlog:\n{}",
        String::from_utf8_lossy(&run.stderr),
        server.drover.log.text()
    );
    eprintln!("{out}");
    out.lines().map(str::to_owned).collect()
}

/// The figures of a `... rss A -> peak B -> C MiB` line.
fn rss_figures(line: &str) -> (u64, u64, u64) {
    let tail = line
        .split("rss ")
        .nth(1)
        .unwrap_or_else(|| panic!("{line}"));
    let n: Vec<u64> = tail
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (n[0], n[1], n[2])
}

#[test]
fn a_websocket_message_past_ws_max_size_closes_with_1009_and_the_worker_stays_small() {
    let server = Server::start_asgi("asgi_ws_app:app", 1, "");

    let lines = run_client(&server, WS_RAW, WS_TOO_BIG);

    let log = server.drover.log.text();
    assert!(
        lines[0].starts_with("huge frame: close 1009;"),
        "{lines:?}\nlog:\n{log}"
    );
    assert!(
        lines[1].starts_with("endless message: close 1009;"),
        "{lines:?}\nlog:\n{log}"
    );
    for line in &lines[..2] {
        let (base, peak, after) = rss_figures(line);
        // ws_max_size is 16 MiB by default: a frame past it never allocates, a message
        // stops growing at it.
        assert!(peak < base + 40, "{line}");
        assert!(after < base + 8, "the memory is given back: {line}");
    }
    assert_eq!(lines[2], "under the limit True", "log:\n{log}");
    server.drover.log.wait_for_line(
        "closed a WebSocket with 1009: frame with 1073741824 bytes",
        TIMEOUT,
    );
    server
        .drover
        .log
        .wait_for_line("ws disconnect 1009", TIMEOUT);
}

#[test]
fn ws_max_size_sets_the_bound() {
    let server = Server::start_asgi("asgi_ws_app:app", 1, "ws_max_size = \"1MiB\"");

    let script = r#"
s, rest = connect()
s.sendall(frame(BINARY, True, b"x" * 1000))
print("small", next(frames(s, rest)) == (BINARY, b"x" * 1000), flush=True)
s.sendall(frame(BINARY, False, b"x" * 600000))
s.sendall(frame(CONT, True, b"x" * 600000))
print("past it: close", close_code(s), flush=True)
"#;
    let lines = run_client(&server, WS_RAW, script);
    assert_eq!(
        lines,
        ["small True", "past it: close 1009"],
        "log:\n{}",
        server.drover.log.text()
    );
}

#[test]
fn invalid_utf8_in_a_websocket_text_message_closes_with_1007() {
    let server = Server::start_asgi("asgi_ws_app:app", 1, "");

    let lines = run_client(&server, WS_RAW, WS_BAD_UTF8);

    assert_eq!(
        lines,
        [
            "one frame: close 1007",
            "two fragments: close 1007",
            "split character: (1, b'caf\\xc3\\xa9')"
        ],
        "log:\n{}",
        server.drover.log.text()
    );
    server
        .drover
        .log
        .wait_for_line("closed a WebSocket with 1007", TIMEOUT);
    server
        .drover
        .log
        .wait_for_line("ws disconnect 1007", TIMEOUT);
}

/// 30 MB of pipelined GETs, written without reading an answer; then every answer read.
const PIPELINER: &str = r#"
import re, select, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
MiB = 1 << 20

def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

pad = b"p" * 200
requests = [b"GET /%d HTTP/1.1\r\nHost: t\r\nX-Pad: %s\r\n\r\n" % (i, pad)
            for i in range(30 * MiB // 240)]
data = b"".join(requests)
s = socket.create_connection(("127.0.0.1", port))
s.setblocking(False)
base = rss()
peak = base
sent = 0
# Write only, until all is written or the server has stopped reading for 2 s.
while sent < len(data):
    if not select.select([], [s], [], 2.0)[1]:
        break
    try:
        sent += s.send(data[sent:sent + (1 << 16)])
    except BlockingIOError:
        continue
    peak = max(peak, rss())
stalled_at = sent
# Then read every answer, writing the rest as the server takes it.
received = bytearray()
deadline = time.monotonic() + 120
answers = 0
while answers < len(requests) and time.monotonic() < deadline:
    want_write = [s] if sent < len(data) else []
    readable, writable, _ = select.select([s], want_write, [], 5.0)
    if writable:
        try:
            sent += s.send(data[sent:sent + (1 << 16)])
        except BlockingIOError:
            pass
    if readable:
        got = s.recv(1 << 20)
        if not got:
            break
        # Counted over the new bytes (and the end of the old, where a status line may be
        # cut): counting the whole each time made the client, not the worker, slow.
        answers += (received[-12:] + got).count(b"HTTP/1.1 200 ")
        received += got
        peak = max(peak, rss())
paths = [int(n) for n in re.findall(rb'"path": "/(\d+)"', received)]
print(f"requests {len(requests)}; written before reading {stalled_at // MiB} MiB; "
      f"answers {answers}; in order {paths == list(range(len(requests)))}; "
      f"rss {base // MiB} -> peak {peak // MiB} -> {rss() // MiB} MiB", flush=True)
"#;

#[test]
fn pipelined_gets_from_a_client_that_reads_nothing_keep_the_worker_small() {
    let server = Server::start_asgi("asgi_app:scope_app", 1, "");

    let lines = run_client(&server, "", PIPELINER);

    let line = &lines[0];
    assert!(
        line.contains("; in order True;"),
        "{line}\nlog:\n{}",
        server.drover.log.text()
    );
    let (base, peak, _) = rss_figures(line);
    assert!(peak < base + 50, "{line}");
}
