//! The scenario's application on real sockets: a CBR stream of timestamped messages (per-message
//! one-way delay, the E3/E7 metric: both ends run in this process, on one clock) over UDP or
//! over one TCP (or MPTCP) connection, a bulk stream, or a file transfer. iperf3 and D-ITG give
//! throughput and loss but not the delay of each message of a stream at the moment it is
//! complete in order at the receiver, so the lab has its own sender and receiver; they record
//! what the simulator's applications record (deliveries, message delays).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use braid_sim::scenario::{AppKind, AppSpec};

/// Bytes of a CBR message's header: sequence number and generation time (µs since the run
/// started).
const HEADER: usize = 16;

/// The clock both ends read: µs since the run started.
#[derive(Debug, Clone, Copy)]
pub struct Clock(pub Instant);

impl Clock {
    pub fn us(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }

    fn at(&self, us: u64) -> Instant {
        self.0 + Duration::from_micros(us)
    }
}

/// What the sending application did.
#[derive(Debug, Default)]
pub struct SenderState {
    /// Bytes written into the socket so far.
    pub written: AtomicU64,
    /// Of those, bytes the transport has sent (a TCP socket's unsent queue excluded; for
    /// UDP every datagram written): the simulator's "sent before the loss".
    pub sent: AtomicU64,
}

/// What the receiving application saw.
#[derive(Debug, Default, Clone)]
pub struct Received {
    /// (µs, bytes) of every read.
    pub deliveries: Vec<(u64, u32)>,
    /// CBR: (generation µs, one-way delay µs) of every complete message.
    pub cbr: Vec<(u64, u32)>,
    /// File: when the last byte arrived.
    pub completed: Option<Duration>,
    /// CBR over UDP: messages that never arrived.
    pub missing: u64,
}

/// Messages per second of a CBR application.
pub fn cbr_rate(app: &AppSpec) -> f64 {
    match (app.rate, app.bitrate) {
        (Some(r), _) => r,
        (None, Some(b)) => b.0 / (app.size.0 as f64 * 8.0),
        (None, None) => 0.0,
    }
}

/// Generation times (µs of the run's clock) of a CBR application's messages before `stop_us`:
/// what the senders follow, and what the run records as generated.
pub fn cbr_schedule(app: &AppSpec, stop_us: u64) -> impl Iterator<Item = u64> + use<> {
    let start_us = app.start.0.as_micros() as u64;
    let every = 1e6 / cbr_rate(app);
    (0u64..)
        .map(move |seq| start_us + (seq as f64 * every) as u64)
        .take_while(move |&g| g < stop_us)
}

/// Writes the application's data from `start` to `stop` (µs of `clock`), then shuts the
/// stream down; gives up when `abort` is set.
pub fn sender(
    mut s: TcpStream,
    app: AppSpec,
    clock: Clock,
    stop_us: u64,
    abort: Arc<AtomicBool>,
    state: Arc<SenderState>,
) -> JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let start_us = app.start.0.as_micros() as u64;
        sleep_until(clock.at(start_us), &abort);
        // A write blocks while the transport's buffers are full; the timeout lets the sender
        // see the end of the run.
        s.set_write_timeout(Some(Duration::from_millis(200)))?;
        let mut write = |buf: &[u8]| -> std::io::Result<bool> {
            let mut off = 0;
            while off < buf.len() {
                if abort.load(Ordering::Relaxed) || clock.us() >= stop_us {
                    return Ok(false);
                }
                match s.write(&buf[off..]) {
                    Ok(n) => {
                        off += n;
                        let w = state.written.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
                        let unsent = crate::packet::unsent_bytes(&s).unwrap_or(0);
                        state
                            .sent
                            .store(w.saturating_sub(unsent), Ordering::Relaxed);
                    }
                    Err(e) if timed_out(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(true)
        };
        match app.kind {
            AppKind::Cbr => {
                let size = app.size.0 as usize;
                let mut msg = vec![0u8; size.max(HEADER)];
                for (seq, gen_us) in cbr_schedule(&app, stop_us).enumerate() {
                    let seq = seq as u64;
                    sleep_until(clock.at(gen_us), &abort);
                    msg[..8].copy_from_slice(&seq.to_be_bytes());
                    msg[8..16].copy_from_slice(&gen_us.to_be_bytes());
                    if !write(&msg)? {
                        break;
                    }
                }
            }
            AppKind::Bulk => {
                let chunk = vec![0x5au8; 64 << 10];
                while write(&chunk)? {}
            }
            AppKind::File => {
                let chunk = vec![0x5au8; 64 << 10];
                let mut left = app.bytes.map_or(0, |b| b.0);
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    if !write(&chunk[..n])? {
                        break;
                    }
                    left -= n as u64;
                }
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        Ok(())
    })
}

/// Reads until the sender shuts down or `abort` is set, recording what arrives before
/// `until_us`.
pub fn receiver(
    mut s: TcpStream,
    app: AppSpec,
    clock: Clock,
    until_us: u64,
    abort: Arc<AtomicBool>,
    delivered: Arc<AtomicU64>,
) -> JoinHandle<std::io::Result<Received>> {
    std::thread::spawn(move || {
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut r = Received::default();
        let mut buf = vec![0u8; 256 << 10];
        let size = (app.size.0 as usize).max(HEADER);
        let file = app.bytes.map_or(0, |b| b.0);
        // The CBR message being assembled: its first 16 bytes and how much of it is here.
        let (mut head, mut have) = ([0u8; HEADER], 0usize);
        let mut total = 0u64;
        // Reads go on past `until_us` (not recorded) until the sender's end of stream or
        // `abort`: closing while the sender still writes would reset it.
        while !abort.load(Ordering::Relaxed) {
            let n = match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if timed_out(&e) => continue,
                Err(e) => return Err(e),
            };
            let now = clock.us();
            if now >= until_us {
                continue;
            }
            r.deliveries.push((now, n as u32));
            total += n as u64;
            delivered.store(total, Ordering::Relaxed);
            if app.kind == AppKind::File && r.completed.is_none() && total >= file {
                r.completed = Some(Duration::from_micros(now));
            }
            if app.kind == AppKind::Cbr {
                let mut data = &buf[..n];
                while !data.is_empty() {
                    let take = (size - have).min(data.len());
                    if have < HEADER {
                        let h = (HEADER - have).min(take);
                        head[have..have + h].copy_from_slice(&data[..h]);
                    }
                    have += take;
                    data = &data[take..];
                    if have == size {
                        let gen_us = u64::from_be_bytes(head[8..16].try_into().expect("8 bytes"));
                        let delay = now.saturating_sub(gen_us).min(u64::from(u32::MAX));
                        r.cbr.push((gen_us, delay as u32));
                        have = 0;
                    }
                }
            }
        }
        Ok(r)
    })
}

/// CBR over UDP: each message one datagram, sent at its generation time from `start` to
/// `stop` (µs of `clock`). Through the braid tunnel this gives the simulator's semantics: the
/// tunnel's connection carries each datagram reliably and in order, with no inner transport
/// of its own between the application and the multipath connection.
pub fn udp_sender(
    s: UdpSocket,
    to: SocketAddr,
    app: AppSpec,
    clock: Clock,
    stop_us: u64,
    abort: Arc<AtomicBool>,
    state: Arc<SenderState>,
) -> JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let mut msg = vec![0u8; (app.size.0 as usize).max(HEADER)];
        for (seq, gen_us) in cbr_schedule(&app, stop_us).enumerate() {
            let seq = seq as u64;
            if abort.load(Ordering::Relaxed) {
                break;
            }
            sleep_until(clock.at(gen_us), &abort);
            msg[..8].copy_from_slice(&seq.to_be_bytes());
            msg[8..16].copy_from_slice(&gen_us.to_be_bytes());
            match s.send_to(&msg, to) {
                Ok(n) => {
                    state.written.fetch_add(n as u64, Ordering::Relaxed);
                    state.sent.fetch_add(n as u64, Ordering::Relaxed);
                }
                // A full socket buffer loses the message, as a UDP application would; the
                // receiver counts it missing.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
}

/// Receives the CBR datagrams of [`udp_sender`] until `until_us` or `abort`; messages that
/// never arrived are counted in [`Received::missing`].
pub fn udp_receiver(
    s: UdpSocket,
    clock: Clock,
    until_us: u64,
    abort: Arc<AtomicBool>,
    delivered: Arc<AtomicU64>,
) -> JoinHandle<std::io::Result<Received>> {
    std::thread::spawn(move || {
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut r = Received::default();
        let mut buf = vec![0u8; 65_536];
        let (mut total, mut next_seq) = (0u64, 0u64);
        while !abort.load(Ordering::Relaxed) && clock.us() < until_us {
            let n = match s.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if timed_out(&e) => continue,
                Err(e) => return Err(e),
            };
            if n < HEADER {
                continue;
            }
            let now = clock.us();
            let seq = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
            let gen_us = u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
            r.missing += seq.saturating_sub(next_seq);
            next_seq = next_seq.max(seq + 1);
            r.deliveries.push((now, n as u32));
            total += n as u64;
            delivered.store(total, Ordering::Relaxed);
            let delay = now.saturating_sub(gen_us).min(u64::from(u32::MAX));
            r.cbr.push((gen_us, delay as u32));
        }
        Ok(r)
    })
}

/// A socket timeout (the loops' chance to look at the clock and the abort flag).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn sleep_until(t: Instant, abort: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= t || abort.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(100)));
    }
}
