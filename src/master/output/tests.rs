//! Tests of the pools' output lines, split from `output.rs`.

use super::*;

#[test]
fn complete_lines_come_out_partial_ones_stay() {
    let mut bytes = b"one\ntwo\r\nthr".to_vec();
    assert_eq!(split_lines(&mut bytes), [&b"one"[..], b"two\r"]);
    assert_eq!(bytes, b"thr");
    bytes.extend_from_slice(b"ee\n");
    assert_eq!(split_lines(&mut bytes), [b"three"]);
    assert!(bytes.is_empty());
}

#[test]
fn text_drops_a_carriage_return_and_replaces_bad_bytes() {
    let quota = Quota::new(QUOTA);
    let line = |bytes: &[u8]| OutputLine {
        pool: 1,
        pid: Pid::from_raw(1),
        line: bytes.to_vec(),
        at_us: 0,
        _held: quota.take(bytes.len()).unwrap(),
    };
    assert_eq!(line(b"two\r").text(), "two");
    assert_eq!(line(b"a\xffb").text(), "a\u{fffd}b");
}

#[test]
fn an_overlong_line_is_cut_into_pieces() {
    let mut bytes = vec![b'x'; MAX_LINE * 2 + 10];
    let lines = split_lines(&mut bytes);
    assert_eq!(lines.len(), 2);
    assert_eq!(bytes.len(), 10);
}

#[tokio::test(flavor = "current_thread")]
async fn lines_are_tagged_with_the_writers_pid() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let writer = capture(3, tx).unwrap();
    let mut child = std::process::Command::new("sh")
        .args(["-c", "echo hello; echo world >&2"])
        .stdout(std::process::Stdio::from(writer.try_clone().unwrap()))
        .stderr(std::process::Stdio::from(writer.try_clone().unwrap()))
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    let line = |output| match output {
        Some(Output::Line(line)) => line,
        other => panic!("not a line: {other:?}"),
    };
    let first = line(rx.recv().await);
    let second = line(rx.recv().await);
    assert_eq!(
        (first.pool, first.pid, first.line.as_slice()),
        (3, pid, &b"hello"[..])
    );
    assert_eq!((second.pid, second.line.as_slice()), (pid, &b"world"[..]));
    child.wait().unwrap();
}

#[test]
fn a_line_holds_its_share_of_the_quota_until_it_is_logged() {
    let quota = Quota::new(3 * (10 + OVERHEAD));
    let held: Vec<Held> = (0..3).map(|_| quota.take(10).unwrap()).collect();
    assert!(
        quota.take(10).is_none(),
        "a fourth line fits a quota of three"
    );
    assert!(!quota.drained());
    drop(held);
    assert!(quota.drained());
    assert!(quota.take(10).is_some());
}

/// A pool that writes faster than the log takes its lines keeps at most its quota
/// waiting; what it drops is counted, and every line is either sent or counted.
#[tokio::test(flavor = "current_thread")]
async fn a_flood_waits_within_the_quota_and_the_rest_is_counted() {
    const LINES: usize = 20_000;
    const LEN: usize = 100;
    let limit = 50 * (LEN + OVERHEAD);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let writer = capture_within(4, tx, limit).unwrap();
    let script = format!("for i in $(seq {LINES}); do printf '%0{LEN}d\\n' $i; done");
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::from(writer))
        .spawn()
        .unwrap();
    // Nothing is logged while the shell writes: every line it writes past the quota
    // must be dropped, not kept.
    let status = tokio::task::spawn_blocking(move || child.wait()).await;
    assert!(status.unwrap().unwrap().success());
    let (mut sent, mut dropped, mut kept) = (0, 0, Vec::new());
    while let Some(output) = rx.recv().await {
        match output {
            Output::Line(line) => {
                assert_eq!(line.line.len(), LEN);
                sent += 1;
                // Held, as the master's queue holds it: the quota stays full.
                kept.push(line);
            }
            Output::Dropped { pool, lines } => {
                assert_eq!(pool, 4);
                dropped += lines;
            }
        }
    }
    assert!(sent <= 50, "{sent} lines waited, beyond a quota of 50");
    assert!(dropped > 0, "nothing was dropped");
    assert_eq!(
        sent + dropped as usize,
        LINES,
        "lines neither sent nor counted"
    );
}
