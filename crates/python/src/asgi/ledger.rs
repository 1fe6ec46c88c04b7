//! What an ASGI worker counts, for the master and the operator: the scoreboard slot, the
//! pool's histogram, the access log, and when the worker must stop (`max_requests`,
//! `max_memory`, the master's retire flag).
//!
//! The blocking worker runs one request at a time, so its slot shows that request. An ASGI
//! worker runs many: its slot is busy while any is in flight and shows the *oldest* one,
//! with that one's start. So `request_terminate_timeout` and the slowlog still see a
//! request that is stuck, and a worker that is only busy (a steady stream of short
//! requests) never looks stuck. Every request counts once in the slot's total.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use drover_fastcgi::Params;
use drover_proto::zygote::retiring_line;
use drover_scoreboard::{Slot, now_us};
use drover_worker::access::{AccessLog, Entry};
use drover_worker::cpu::{CpuTime, process_cpu};
use drover_worker::serve::{Board, WorkerConfig};

/// One worker's books. A worker process has one, in [`LEDGER`].
pub struct Ledger {
    /// Borrowed from the zygote's mapping, which the worker never unmaps: it `_exit`s.
    board: Option<Board<'static>>,
    label: String,
    max_requests: u32,
    max_memory: Option<u64>,
    access_log: Option<AccessLog>,
    /// Responses finished, for `max_requests`.
    served: u32,
    /// The requests in flight, oldest first: (start, number) → what the slot shows.
    in_flight: BTreeMap<(u64, u64), Shown>,
    next: u64,
    /// CPU time at the previous request's end.
    cpu_mark: CpuTime,
    /// Set once the worker must stop; the memory line is written once.
    retire: bool,
}

/// What the slot shows of a request.
struct Shown {
    method: String,
    uri: String,
    query: String,
}

/// A request in flight, as the connection keeps it until its response ends.
pub struct Ticket {
    start_us: u64,
    number: u64,
    pub params: Params,
    /// The response's CGI head, kept (by [`keep_head`]) when the access log shows a
    /// response header.
    head: Vec<u8>,
}

thread_local! {
    /// The worker's ledger: one event loop on one thread.
    static LEDGER: RefCell<Option<Ledger>> = const { RefCell::new(None) };
}

/// Sets up the worker's ledger; the slot is claimed already.
pub fn open(config: WorkerConfig, board: Option<Board<'static>>) {
    let ledger = Ledger {
        board,
        label: config.label,
        max_requests: config.max_requests,
        max_memory: config.max_memory,
        access_log: config.access_log,
        served: 0,
        in_flight: BTreeMap::new(),
        next: 0,
        cpu_mark: process_cpu(),
        retire: false,
    };
    LEDGER.with_borrow_mut(|l| *l = Some(ledger));
}

/// A request's params are in: it runs from now.
pub fn begin(params: Params) -> Ticket {
    let start_us = now_us();
    LEDGER.with_borrow_mut(|ledger| {
        let Some(ledger) = ledger else {
            return Ticket {
                start_us,
                number: 0,
                params,
                head: Vec::new(),
            };
        };
        ledger.next += 1;
        let number = ledger.next;
        if let Some(board) = ledger.board {
            board.pool.accept();
            let text = |name: &str| {
                String::from_utf8_lossy(params.get(name).unwrap_or_default()).into_owned()
            };
            let shown = Shown {
                method: text("REQUEST_METHOD"),
                uri: text("DOCUMENT_URI"),
                query: text("QUERY_STRING"),
            };
            if ledger.in_flight.is_empty() {
                show(board.slot, start_us, &shown, &ledger.label);
            }
            ledger.in_flight.insert((start_us, number), shown);
        }
        Ticket {
            start_us,
            number,
            params,
            head: Vec::new(),
        }
    })
}

/// The response's CGI head went out: the ticket keeps a copy when the access log shows a
/// response header (`%{Name}o`).
pub fn keep_head(ticket: &mut Ticket, head: &[u8]) {
    let keeps = LEDGER.with_borrow(|ledger| {
        ledger
            .as_ref()
            .and_then(|l| l.access_log.as_ref())
            .is_some_and(AccessLog::shows_response_headers)
    });
    if keeps {
        ticket.head = head.to_vec();
    }
}

/// A request ended with `status` (None: the client went away before a head was sent).
/// Returns whether the worker must stop taking requests.
pub fn end(ticket: &Ticket, status: Option<u16>) -> bool {
    LEDGER.with_borrow_mut(|ledger| {
        let Some(ledger) = ledger else {
            return false;
        };
        let end_us = now_us();
        let duration_us = end_us.saturating_sub(ticket.start_us);
        let now_cpu = process_cpu();
        let cpu = now_cpu.since(&ledger.cpu_mark);
        ledger.cpu_mark = now_cpu;
        if let Some(board) = ledger.board {
            let key = (ticket.start_us, ticket.number);
            let was_oldest = ledger.in_flight.keys().next() == Some(&key);
            ledger.in_flight.remove(&key);
            match ledger.in_flight.iter().next() {
                None => board.slot.end_request(end_us, cpu.total(), None),
                Some((&(start, _), shown)) => {
                    board.slot.count_request(duration_us, cpu.total(), None);
                    if was_oldest {
                        show(board.slot, start, shown, &ledger.label);
                    }
                }
            }
            board.pool.record(duration_us, status);
        }
        if let Some(log) = &mut ledger.access_log {
            let entry = Entry {
                params: &ticket.params,
                status,
                duration: Duration::from_micros(duration_us),
                cpu,
                memory: None,
                script: &ledger.label,
                head: &ticket.head,
            };
            log.write(&entry);
        }
        ledger.served += 1;
        if ledger.max_requests > 0 && ledger.served >= ledger.max_requests {
            ledger.retire = true;
        }
        if !ledger.retire && over_memory(ledger.max_memory) {
            ledger.retire = true;
        }
        ledger.retire || retire_requested(ledger)
    })
}

/// Whether the master asked this worker to go (its slot's retire flag), or the worker
/// decided so itself.
pub fn must_retire() -> bool {
    LEDGER.with_borrow(|ledger| {
        ledger
            .as_ref()
            .is_some_and(|l| l.retire || retire_requested(l))
    })
}

fn retire_requested(ledger: &Ledger) -> bool {
    ledger.board.is_some_and(|b| b.slot.retire_requested())
}

fn show(slot: &Slot, start_us: u64, shown: &Shown, label: &str) {
    slot.begin_request(start_us, &shown.method, &shown.uri, &shown.query, label);
}

/// max_memory: above it, the worker says why (one marked line, which the master logs) and
/// retires.
fn over_memory(limit: Option<u64>) -> bool {
    let Some(limit) = limit else {
        return false;
    };
    let Some(rss) = drover_proto::resident_memory(None).filter(|&rss| rss > limit) else {
        return false;
    };
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let line = retiring_line(&format!(
        "resident memory {:.1} MiB, above max_memory ({:.1} MiB)",
        mib(rss),
        mib(limit)
    ));
    let _ = std::io::stderr().write_all(line.as_bytes());
    true
}
