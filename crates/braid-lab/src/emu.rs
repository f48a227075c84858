//! The link emulator: real frames between two interfaces of the emulator's namespace, each
//! direction through the simulator's own [`Direction`] (rate or Mahimahi trace, delay, jitter,
//! drop-tail queue, loss, up/down), driven by the wall clock instead of virtual time.
//!
//! Each direction of each link is one thread: it reads every frame arriving on its input
//! interface, asks the model when the frame arrives at the far end (or whether it is dropped),
//! holds it until then and writes it out on the output interface. The model charges a frame
//! its IP length (the Ethernet header is not on the emulated wire), as Mahimahi charges the
//! packets of its TUN devices.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use braid_core::Instant;
use braid_mptcp::netns::NetNs;
use braid_sim::link::{DirSpec, Direction, Drop};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::packet::PacketSocket;

/// Ethernet header: not charged to the emulated link.
const ETH_HEADER: usize = 14;
/// Largest frame read; larger ones (offloads left on) are counted and dropped.
const MAX_FRAME: usize = 65_536 + ETH_HEADER;
/// The longest a direction thread sleeps before it looks at the stop flag again.
const IDLE: Duration = Duration::from_millis(20);
/// The nice value of the direction threads: the highest priority of the ordinary class, so
/// that a frame goes out when it is due even when the endpoints keep every CPU busy.
const NICE: i32 = -20;
/// How often the kernel's count of frames dropped before the emulator read them is read, µs.
const DROPS_EVERY_US: u64 = 100_000;

/// A change of a link during the run, at a time from the emulator's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkEvent {
    /// The link is lost: every frame queued or on the wire is lost, new ones are dropped.
    Down,
    Up,
    /// New capacity in bit/s (a radio's rate follows its signal).
    Rate(f64),
    /// A radio's new packet error rate, on top of the link's configured loss.
    Loss(f64),
}

/// One emulated link: `a` faces the client, `b` the server (interfaces in the emulator's
/// namespace).
#[derive(Debug, Clone)]
pub struct LinkSpec {
    pub name: String,
    pub a_if: String,
    pub b_if: String,
    /// Server → client (b → a).
    pub down: DirSpec,
    /// Client → server (a → b).
    pub up: DirSpec,
    /// Sorted by time.
    pub events: Vec<(Duration, LinkEvent)>,
    /// Seeds the loss and jitter draws of both directions.
    pub seed: u64,
    /// Sorted times from the start: for each, each direction records when it delivered its
    /// first frame carrying TCP payload at or after it ([`Counters::first_data_us`]).
    pub marks: Vec<Duration>,
    /// The shared medium the link is on (the simulator's `medium`, numbered): the links on one
    /// medium take turns on it, one frame at a time whichever link and direction.
    pub medium: Option<usize>,
}

/// Live counters of one direction.
#[derive(Debug, Default)]
pub struct Counters {
    /// Frames read from the input interface.
    pub frames_in: AtomicU64,
    /// Frames written to the output interface.
    pub frames_out: AtomicU64,
    /// IP bytes written out.
    pub bytes_out: AtomicU64,
    pub dropped_down: AtomicU64,
    pub dropped_queue: AtomicU64,
    pub dropped_loss: AtomicU64,
    /// Queued or on the wire when the link went down.
    pub lost_in_flight: AtomicU64,
    /// Frames larger than the buffer (segmentation offload left on somewhere).
    pub oversize: AtomicU64,
    /// Writes the kernel refused.
    pub send_errors: AtomicU64,
    /// Frames the kernel dropped before the emulator read them (receive buffer full): loss
    /// the emulator added, which a sound run keeps at zero.
    pub kernel_drops: AtomicU64,
    /// How late frames went out, in µs: the sum and the largest (scheduling accuracy).
    pub late_us_sum: AtomicU64,
    pub late_us_max: AtomicU64,
    /// The direction's thread runs at nice -20. When the kernel refuses it (no
    /// `CAP_SYS_NICE`) the thread runs at the default priority and its frames can go out
    /// milliseconds late on busy CPUs (`late_us_max` shows how late).
    pub high_priority: AtomicBool,
    /// The CPUs were kept out of idle states while the emulator ran (a PM QoS request, which
    /// needs root; without it a frame due while the CPUs idle can go out milliseconds late on
    /// a virtual machine).
    pub cpus_awake: AtomicBool,
    /// Per mark of [`LinkSpec::marks`]: the mark and when the first frame carrying TCP payload
    /// went out at or after it, µs from the start (`u64::MAX` while none has).
    pub first_data_us: Vec<(u64, AtomicU64)>,
}

impl Counters {
    fn with_marks(marks: &[Duration]) -> Counters {
        Counters {
            first_data_us: marks
                .iter()
                .map(|m| (m.as_micros() as u64, AtomicU64::new(u64::MAX)))
                .collect(),
            ..Counters::default()
        }
    }

    /// When the first data frame went out at or after `mark` (one of the link's marks).
    pub fn first_data_after(&self, mark: Duration) -> Option<Duration> {
        let m = mark.as_micros() as u64;
        self.first_data_us
            .iter()
            .find(|(at, _)| *at == m)
            .map(|(_, t)| t.load(Ordering::Relaxed))
            .filter(|&t| t != u64::MAX)
            .map(Duration::from_micros)
    }
}

/// The counters of a link: (server → client, client → server).
pub type LinkCounters = (Arc<Counters>, Arc<Counters>);

/// Running emulation; stops (and joins its threads) on [`Emulator::stop`] or drop.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    start: std::time::Instant,
    pub links: Vec<(String, LinkCounters)>,
    /// The CPUs' idle-state latency request, held while the emulator runs ([`CpusAwake`]).
    awake: Option<CpusAwake>,
}

/// A PM QoS request for no CPU wake-up latency (`/dev/cpu_dma_latency` at 0 µs), in effect
/// while the file stays open: idle CPUs poll instead of halting. A halted CPU of a virtual
/// machine waits for its host to run it again when a timer fires, and frames of an idle
/// emulator went out up to 10 ms late (p99 of a 30 ms link 31.2–35.2 ms, six runs; 30.4–30.5
/// with the request held, four runs). The cost is idle CPUs that spin while the emulator
/// runs; a runnable thread still takes them at once.
struct CpusAwake {
    _request: std::fs::File,
}

impl CpusAwake {
    /// `None` when the request cannot be made (no such device, or not root).
    fn request() -> Option<CpusAwake> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .ok()?;
        f.write_all(&0i32.to_ne_bytes()).ok()?;
        Some(CpusAwake { _request: f })
    }
}

impl Emulator {
    /// Opens the links' sockets inside `ns` and starts emulating; time zero (for the links'
    /// events) is now.
    pub fn start(ns: &NetNs, links: Vec<LinkSpec>) -> io::Result<Emulator> {
        let names: Vec<(String, String)> = links
            .iter()
            .map(|l| (l.a_if.clone(), l.b_if.clone()))
            .collect();
        // Sockets belong to the namespace they were opened in, whichever thread uses them.
        let sockets = ns.run(move || -> io::Result<Vec<[PacketSocket; 4]>> {
            names
                .iter()
                .map(|(a, b)| {
                    Ok([
                        PacketSocket::open(b)?,
                        PacketSocket::open(a)?,
                        PacketSocket::open(a)?,
                        PacketSocket::open(b)?,
                    ])
                })
                .collect()
        })?;
        // One clock of when each medium is free again (ns from `start`), shared by the
        // directions on it.
        let media_count = links
            .iter()
            .filter_map(|l| l.medium)
            .max()
            .map_or(0, |m| m + 1);
        let media: Vec<Arc<Mutex<u64>>> =
            (0..media_count).map(|_| Arc::new(Mutex::new(0))).collect();
        let start = std::time::Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let mut emu = Emulator {
            stop: stop.clone(),
            threads: Vec::new(),
            start,
            links: Vec::new(),
            awake: CpusAwake::request(),
        };
        let awake = emu.awake.is_some();
        for (link, [down_in, down_out, up_in, up_out]) in links.into_iter().zip(sockets) {
            let mut marks = link.marks.clone();
            marks.sort();
            let counters: LinkCounters = (
                Arc::new(Counters::with_marks(&marks)),
                Arc::new(Counters::with_marks(&marks)),
            );
            counters.0.cpus_awake.store(awake, Ordering::Relaxed);
            counters.1.cpus_awake.store(awake, Ordering::Relaxed);
            for (dir, spec, input, output, counters, salt) in [
                ("down", link.down, down_in, down_out, counters.0.clone(), 1),
                ("up", link.up, up_in, up_out, counters.1.clone(), 2),
            ] {
                let worker = Worker {
                    model: Direction::new(spec),
                    medium: link.medium.map(|m| media[m].clone()),
                    rng: Pcg64Mcg::seed_from_u64(link.seed.wrapping_mul(31).wrapping_add(salt)),
                    input,
                    output,
                    events: link.events.clone(),
                    counters,
                    start,
                    stop: stop.clone(),
                };
                let t = std::thread::Builder::new()
                    .name(format!("emu {} {dir}", link.name))
                    .spawn(move || worker.run())?;
                emu.threads.push(t);
            }
            emu.links.push((link.name, counters));
        }
        Ok(emu)
    }

    /// When the emulation's time zero was.
    pub fn started(&self) -> std::time::Instant {
        self.start
    }

    /// Stops every direction and returns the first error one of them met.
    pub fn stop(mut self) -> io::Result<()> {
        self.halt()
    }

    fn halt(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first = Ok(());
        for t in self.threads.drain(..) {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("an emulator thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        self.awake = None;
        first
    }
}

impl std::ops::Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// A frame held until its arrival time.
struct Held {
    at_us: u64,
    seq: u64,
    epoch: u32,
    frame: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.at_us, self.seq) == (o.at_us, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at_us, self.seq).cmp(&(o.at_us, o.seq))
    }
}

/// One direction of one link.
struct Worker {
    model: Direction,
    medium: Option<Arc<Mutex<u64>>>,
    rng: Pcg64Mcg,
    input: PacketSocket,
    output: PacketSocket,
    events: Vec<(Duration, LinkEvent)>,
    counters: Arc<Counters>,
    start: std::time::Instant,
    stop: Arc<AtomicBool>,
}

impl Worker {
    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    fn run(mut self) -> io::Result<()> {
        let c = self.counters.clone();
        c.high_priority
            .store(crate::packet::set_nice(NICE).is_ok(), Ordering::Relaxed);
        let mut held: BinaryHeap<Reverse<Held>> = BinaryHeap::new();
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let mut buf = vec![0u8; MAX_FRAME];
        let mut seq = 0u64;
        let mut next_event = 0;
        let mut drops_read_at = 0u64;
        // The first mark whose first data frame is still awaited.
        let mut next_mark = 0;
        while !self.stop.load(Ordering::Relaxed) {
            let now = self.now_us();
            while let Some(&(at, e)) = self.events.get(next_event) {
                if at.as_micros() as u64 > now {
                    break;
                }
                let t = Instant::from_micros(at.as_micros() as u64);
                match e {
                    LinkEvent::Down => self.model.set_up(t, false),
                    LinkEvent::Up => self.model.set_up(t, true),
                    LinkEvent::Rate(bps) => self.model.set_rate(bps),
                    LinkEvent::Loss(p) => self.model.set_radio_per(p),
                }
                next_event += 1;
            }
            // Deliver what is due.
            while let Some(Reverse(h)) = held.peek() {
                if h.at_us > now {
                    break;
                }
                let Reverse(h) = held.pop().expect("peeked");
                if h.epoch != self.model.epoch {
                    c.lost_in_flight.fetch_add(1, Ordering::Relaxed);
                } else {
                    match self.output.send(&h.frame) {
                        Ok(()) => {
                            c.frames_out.fetch_add(1, Ordering::Relaxed);
                            c.bytes_out.fetch_add(
                                h.frame.len().saturating_sub(ETH_HEADER) as u64,
                                Ordering::Relaxed,
                            );
                            let late = now - h.at_us;
                            c.late_us_sum.fetch_add(late, Ordering::Relaxed);
                            c.late_us_max.fetch_max(late, Ordering::Relaxed);
                            if c.first_data_us.get(next_mark).is_some_and(|m| m.0 <= now)
                                && crate::packet::carries_tcp_payload(&h.frame)
                            {
                                while let Some((at, first)) = c.first_data_us.get(next_mark)
                                    && *at <= now
                                {
                                    first.store(now, Ordering::Relaxed);
                                    next_mark += 1;
                                }
                            }
                        }
                        Err(_) => {
                            c.send_errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                pool.push(h.frame);
            }
            // Sleep until the next frame is due, the next event, or a frame arrives.
            let now = self.now_us();
            let mut until = now + IDLE.as_micros() as u64;
            if let Some(Reverse(h)) = held.peek() {
                until = until.min(h.at_us);
            }
            if let Some(&(at, _)) = self.events.get(next_event) {
                until = until.min(at.as_micros() as u64);
            }
            if until > now && !self.input.wait(Duration::from_micros(until - now))? {
                continue;
            }
            // Everything queued on the input, each frame stamped with its own read time.
            while let Some(n) = self.input.recv(&mut buf)? {
                c.frames_in.fetch_add(1, Ordering::Relaxed);
                if n > buf.len() {
                    c.oversize.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let now = Instant::from_micros(self.now_us());
                let size = n.saturating_sub(ETH_HEADER);
                let sent = match &self.medium {
                    None => self.model.send(now, size, &mut self.rng),
                    Some(m) => {
                        let mut air = m.lock().unwrap_or_else(|e| e.into_inner());
                        self.model.send_shared(now, size, &mut self.rng, &mut air)
                    }
                };
                match sent {
                    Ok(arrival) => {
                        let mut frame = pool.pop().unwrap_or_default();
                        frame.clear();
                        frame.extend_from_slice(&buf[..n]);
                        seq += 1;
                        held.push(Reverse(Held {
                            at_us: arrival.micros(),
                            seq,
                            epoch: self.model.epoch,
                            frame,
                        }));
                    }
                    Err(Drop::Down) => {
                        c.dropped_down.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Drop::Queue) => {
                        c.dropped_queue.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Drop::Loss) => {
                        c.dropped_loss.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // The kernel's drop count costs a system call: read it now and then, not per
            // wake-up.
            if now >= drops_read_at + DROPS_EVERY_US {
                drops_read_at = now;
                c.kernel_drops
                    .store(self.input.kernel_drops(), Ordering::Relaxed);
            }
        }
        c.kernel_drops
            .store(self.input.kernel_drops(), Ordering::Relaxed);
        Ok(())
    }
}
