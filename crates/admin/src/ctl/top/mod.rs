//! `drover ctl top`: every pool live, as uwsgitop and `pm2 monit` show theirs. The status
//! (`/status?format=json&full`) is fetched once a `--delay` on a thread of its own, and
//! [`view`] turns two samples and the operator's choices into lines; this file is the
//! terminal around it: raw mode and the alternate screen, the keys, and putting the
//! terminal back as it was on every way out (q, Ctrl-C, SIGTERM, SIGHUP, a panic).
//! Without a terminal (a pipe, `-b`, `-n`), each sample is a block of plain lines.
//!
//! crossterm is used here only: the daemon (`src/main.rs`) never calls into this module,
//! so it is not in the `drover` binary (docs/ARCHITECTURE.md, "The master's memory").

pub mod view;

use std::io::{IsTerminal as _, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, queue, terminal};

use super::client::{Client, CtlError, EXIT_REFUSED, EXIT_UNREACHABLE};
use drover::control::Format;
use view::{Action, Frame, Key, Pool, Row, View};

/// `drover ctl top`'s flags, named as top's.
#[derive(clap::Args, Debug, PartialEq)]
pub struct TopArgs {
    /// The time between two samples.
    #[arg(short = 'd', long = "delay", value_name = "DURATION", default_value = "1s", value_parser = parse_delay)]
    pub delay: Duration,
    /// Print COUNT samples as plain lines and exit (top's batch mode).
    #[arg(short = 'n', long = "iterations", value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// One sample as plain lines: `-n 1`.
    #[arg(long, conflicts_with = "iterations")]
    pub once: bool,
    /// Plain lines even on a terminal, until interrupted (top's `-b`).
    #[arg(short = 'b', long)]
    pub batch: bool,
}

/// At least 100 ms: the master samples its pools every 100 ms; faster shows nothing new.
fn parse_delay(s: &str) -> Result<Duration, String> {
    let delay = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if delay < Duration::from_millis(100) {
        return Err(format!("must be at least 100ms, got {s}"));
    }
    Ok(delay)
}

/// Runs `drover ctl top` against `client` and returns its exit code.
pub fn run(client: &Client, args: &TopArgs) -> u8 {
    let count = if args.once { Some(1) } else { args.iterations };
    let on_terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if args.batch || count.is_some() || !on_terminal {
        return batch(client, args.delay, count);
    }
    interactive(client, args.delay)
}

/// One fetch: every pool, each with its workers.
fn fetch(client: &Client) -> Result<Vec<Pool>, CtlError> {
    let body = client.status(None, Format::Json, true)?;
    view::parse(&body).map_err(|message| CtlError::Protocol {
        socket: client.socket().to_owned(),
        message,
    })
}

fn exit_code(err: &CtlError) -> u8 {
    if matches!(err, CtlError::Refused { .. }) {
        EXIT_REFUSED
    } else {
        EXIT_UNREACHABLE
    }
}

/// The previous sample, for the rates of the next.
#[derive(Default)]
struct Samples {
    last: Option<(Vec<Pool>, Instant)>,
}

impl Samples {
    /// Rows of `pools`, taken at `at`, against the previous sample; keeps this one.
    fn rows(&mut self, pools: Vec<Pool>, at: Instant) -> Vec<Row> {
        let before = self
            .last
            .as_ref()
            .map(|(old, then)| (old.as_slice(), at.saturating_duration_since(*then)));
        let rows = view::rows(before, &pools);
        self.last = Some((pools, at));
        rows
    }

    /// The last sample's pools.
    fn pools(&self) -> &[Pool] {
        self.last
            .as_ref()
            .map_or(&[], |(pools, _)| pools.as_slice())
    }
}

fn clock() -> String {
    drover::control::render::local_time(SystemTime::now())
}

/// Plain lines, a block per sample, a blank line between: for pipes, logs and scripts.
fn batch(client: &Client, delay: Duration, count: Option<u64>) -> u8 {
    let mut samples = Samples::default();
    let mut stdout = std::io::stdout().lock();
    let mut taken = 0;
    loop {
        let pools = match fetch(client) {
            Ok(pools) => pools,
            Err(err) => {
                eprintln!("drover ctl: {err}");
                return exit_code(&err);
            }
        };
        let rows = samples.rows(pools, Instant::now());
        let clock = clock();
        let frame = Frame {
            pools: samples.pools(),
            rows: &rows,
            clock: &clock,
            interval: delay,
            note: None,
            interactive: false,
        };
        let mut block = view::screen(&frame, &View::default(), usize::MAX, None).join("\n");
        block.push('\n');
        if taken > 0 {
            block.insert(0, '\n');
        }
        // A closed pipe (`| head`) is the reader's choice, not our failure.
        if stdout.write_all(block.as_bytes()).is_err() || stdout.flush().is_err() {
            return 0;
        }
        taken += 1;
        if count.is_some_and(|count| taken >= count) {
            return 0;
        }
        std::thread::sleep(delay);
    }
}

/// The signals that end top: each leaves the terminal as it was first. (In raw mode the
/// terminal sends Ctrl-C as a key, but `kill -INT` still comes as a signal.)
const ENDING_SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

fn interactive(client: &Client, delay: Duration) -> u8 {
    // Fetched before the terminal changes: an unreachable drover is one error line, as
    // for every other `drover ctl` command.
    let first = match fetch(client) {
        Ok(pools) => pools,
        Err(err) => {
            eprintln!("drover ctl: {err}");
            return exit_code(&err);
        }
    };
    let first_at = Instant::now();
    let caught = Arc::new(AtomicUsize::new(0));
    for signal in ENDING_SIGNALS {
        if let Err(err) = signal_hook::flag::register_usize(signal, caught.clone(), signal as usize)
        {
            eprintln!("drover ctl: cannot catch signal {signal}: {err}");
            return EXIT_UNREACHABLE;
        }
    }
    let samples = sampler(client.clone(), delay);
    let mut stdout = std::io::stdout();
    if let Err(err) = Terminal::enter(&mut stdout) {
        Terminal::leave();
        eprintln!("drover ctl: cannot set up the terminal: {err}");
        return EXIT_UNREACHABLE;
    }
    let code = show(&mut stdout, &caught, &samples, (first, first_at), delay);
    Terminal::leave();
    match code {
        Ok(code) => code,
        Err(err) => {
            eprintln!("drover ctl: the terminal failed: {err}");
            EXIT_UNREACHABLE
        }
    }
}

/// A fetch per `delay`, on a thread of its own, so that keys are answered while drover
/// takes its time; the thread ends when top stops listening.
fn sampler(
    client: Client,
    delay: Duration,
) -> mpsc::Receiver<(Result<Vec<Pool>, CtlError>, Instant)> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(delay);
            let pools = fetch(&client);
            if send.send((pools, Instant::now())).is_err() {
                return;
            }
        }
    });
    receive
}

/// The screen's loop: draws, answers keys, takes samples; the exit code.
fn show(
    out: &mut impl Write,
    caught: &AtomicUsize,
    incoming: &mpsc::Receiver<(Result<Vec<Pool>, CtlError>, Instant)>,
    first: (Vec<Pool>, Instant),
    delay: Duration,
) -> std::io::Result<u8> {
    let mut samples = Samples::default();
    let mut view = View::default();
    let mut note: Option<String> = None;
    let mut rows = samples.rows(first.0, first.1);
    let mut clock = clock();
    let mut dirty = true;
    loop {
        let signal = caught.load(Ordering::Relaxed);
        if signal != 0 {
            return Ok(128u8.saturating_add(signal as u8));
        }
        if dirty {
            let (width, height) = terminal::size()?;
            let frame = Frame {
                pools: samples.pools(),
                rows: &rows,
                clock: &clock,
                interval: delay,
                note: note.as_deref(),
                interactive: true,
            };
            draw(
                out,
                &view::screen(&frame, &view, width.into(), Some(height.into())),
                height,
            )?;
            dirty = false;
        }
        if event::poll(Duration::from_millis(100))? {
            match event::read()? {
                Event::Key(key) => {
                    if let Some(key) = key_of(key) {
                        if view.key(key, &rows) == Action::Quit {
                            return Ok(0);
                        }
                        dirty = true;
                    }
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        while let Ok((fetched, at)) = incoming.try_recv() {
            match fetched {
                Ok(pools) => {
                    rows = samples.rows(pools, at);
                    clock = self::clock();
                    note = None;
                }
                Err(err) => note = Some(format!("showing the sample of {clock}: {err}")),
            }
            dirty = true;
        }
    }
}

/// The terminal's events that mean something to [`View::key`].
fn key_of(event: KeyEvent) -> Option<Key> {
    if event.kind != KeyEventKind::Press {
        return None;
    }
    let control = event.modifiers.contains(KeyModifiers::CONTROL);
    Some(match event.code {
        KeyCode::Char('c') if control => Key::Interrupt,
        KeyCode::Char(_) if control => return None,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::Esc => Key::Esc,
        _ => return None,
    })
}

/// `lines` over the whole screen, each line's rest and the rows below cleared.
fn draw(out: &mut impl Write, lines: &[String], height: u16) -> std::io::Result<()> {
    use crossterm::style::Print;
    use crossterm::terminal::{Clear, ClearType};
    queue!(out, terminal::BeginSynchronizedUpdate)?;
    for (row, line) in (0..height).zip(lines) {
        queue!(
            out,
            cursor::MoveTo(0, row),
            Print(line),
            Clear(ClearType::UntilNewLine)
        )?;
    }
    let drawn = u16::try_from(lines.len()).unwrap_or(u16::MAX);
    if drawn < height {
        queue!(
            out,
            cursor::MoveTo(0, drawn),
            Clear(ClearType::FromCursorDown)
        )?;
    }
    queue!(out, terminal::EndSynchronizedUpdate)?;
    out.flush()
}

/// The terminal as top changes it: raw mode, the alternate screen, no cursor. Whatever
/// the way out, [`Terminal::leave`] puts it back once: after the loop, or from the panic
/// hook before the message is printed (in the alternate screen it would be lost).
struct Terminal;

/// Whether top changed the terminal and has not put it back yet.
static ENTERED: AtomicBool = AtomicBool::new(false);

impl Terminal {
    fn enter(out: &mut impl Write) -> std::io::Result<()> {
        ENTERED.store(true, Ordering::SeqCst);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            Terminal::leave();
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        crossterm::execute!(out, terminal::EnterAlternateScreen, cursor::Hide)
    }

    /// Best effort: a terminal that went away (SIGHUP) cannot be put back, and need not be.
    fn leave() {
        if ENTERED.swap(false, Ordering::SeqCst) {
            let mut out = std::io::stdout();
            let _ = crossterm::execute!(out, cursor::Show, terminal::LeaveAlternateScreen);
            let _ = terminal::disable_raw_mode();
        }
    }
}
