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

/// Where and how iperf3 runs a bulk or file application (`braid lab --iperf3`).
#[derive(Debug, Clone)]
pub struct Iperf3 {
    /// Namespaces of the iperf3 server and client (the client opens the connection; `-R`
    /// when the data goes from the server to the client).
    pub server_ns: String,
    pub client_ns: String,
    /// The server's address.
    pub server: std::net::IpAddr,
    /// TCP congestion control (`-C`).
    pub congestion: String,
    /// Data from the server to the client.
    pub reverse: bool,
    /// Where iperf3's JSON report goes (kept with `--keep`).
    pub report: std::path::PathBuf,
}

/// Port of the lab's iperf3 server.
const IPERF3_PORT: u16 = 5211;

/// The application run by iperf3 3.x: a server (`-s -1`) and, at the application's start, a
/// client with `-n <bytes>` (file) or `-t <seconds>` (bulk until the stop), `-J -i 0.1`.
/// What the receiver saw comes from iperf3's report when the client exits (or is stopped at
/// `until_us` with SIGINT, on which it reports what it measured): deliveries per 0.1 s
/// interval, the transfer's end (file). `delivered` is not updated while it runs (iperf3
/// reports at its end).
pub fn iperf3(
    run: Iperf3,
    app: AppSpec,
    clock: Clock,
    stop_us: u64,
    until_us: u64,
    abort: Arc<AtomicBool>,
    delivered: Arc<AtomicU64>,
) -> std::io::Result<JoinHandle<std::io::Result<Received>>> {
    use std::process::{Command, Stdio};
    let server = crate::lab::Daemon {
        child: Command::new("ip")
            .args(["netns", "exec", &run.server_ns, "iperf3", "-s", "-1"])
            .args([
                "-B",
                &run.server.to_string(),
                "-p",
                &IPERF3_PORT.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("iperf3 (is it installed?): {e}"))
            })?,
        log: run.report.with_extension("server.log"),
    };
    Ok(std::thread::spawn(move || {
        let _server = server;
        // The server listens within a few ms; the application starts later than that.
        let start_us = app.start.0.as_micros() as u64;
        sleep_until(clock.at(start_us.max(clock.us() + 200_000)), &abort);
        let began = clock.us();
        let mut client = Command::new("ip");
        client
            .args(["netns", "exec", &run.client_ns, "iperf3", "-c"])
            .arg(run.server.to_string())
            .args(["-p", &IPERF3_PORT.to_string(), "-J", "-i", "0.1", "-C"])
            .arg(&run.congestion)
            .args(["--connect-timeout", "5000"]);
        match (app.kind, app.bytes) {
            (AppKind::File, Some(b)) => client.args(["-n", &b.0.to_string()]),
            _ => {
                let secs = (stop_us.saturating_sub(began) / 1_000_000).max(1);
                client.args(["-t", &secs.to_string()])
            }
        };
        if run.reverse {
            client.arg("-R");
        }
        let out = std::fs::File::create(&run.report)?;
        let child = client.stdout(out).stderr(Stdio::null()).spawn()?;
        let mut child = crate::lab::Daemon {
            child,
            log: run.report.clone(),
        };
        let mut stopped_at = None;
        loop {
            if child.child.try_wait()?.is_some() {
                break;
            }
            let now = Instant::now();
            match stopped_at {
                // Interrupted, iperf3 still writes its report of what it measured.
                None if abort.load(Ordering::Relaxed) || clock.us() >= until_us => {
                    // Our child, not reaped yet (`try_wait` saw it running): its pid is its.
                    let _ = Command::new("kill")
                        .args(["-INT", &child.child.id().to_string()])
                        .status();
                    stopped_at = Some(now);
                }
                Some(t) if now - t > Duration::from_secs(3) => break,
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(child);
        let text = std::fs::read_to_string(&run.report)?;
        let r = iperf3_received(&text, began, app.kind == AppKind::File, until_us)
            .map_err(|m| std::io::Error::other(format!("iperf3's report: {m}")))?;
        delivered.store(
            r.deliveries.iter().map(|&(_, b)| u64::from(b)).sum(),
            Ordering::Relaxed,
        );
        Ok(r)
    }))
}

/// What the receiver saw, from iperf3's JSON report of a test that began at `began_us`:
/// each 0.1 s interval's bytes at its end, and for a file the receiver's end of the
/// transfer. Intervals ending after `until_us` are not counted.
pub fn iperf3_received(
    text: &str,
    began_us: u64,
    file: bool,
    until_us: u64,
) -> Result<Received, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    // Stopped at the end of the run: what it measured until then, no end of transfer.
    let interrupted = match doc["error"].as_str() {
        Some(e) if e.starts_with("interrupt") => true,
        Some(e) => return Err(e.to_string()),
        None => false,
    };
    let at = |secs: f64| began_us + (secs * 1e6) as u64;
    let mut r = Received::default();
    for i in doc["intervals"].as_array().ok_or("no intervals")? {
        let s = &i["sum"];
        let (Some(end), Some(bytes)) = (s["end"].as_f64(), s["bytes"].as_u64()) else {
            return Err("an interval without end or bytes".into());
        };
        let t = at(end);
        if t < until_us && bytes > 0 {
            r.deliveries
                .push((t, bytes.min(u64::from(u32::MAX)) as u32));
        }
    }
    let received = &doc["end"]["sum_received"];
    if file
        && !interrupted
        && let (Some(secs), Some(bytes)) =
            (received["seconds"].as_f64(), received["bytes"].as_u64())
    {
        // The report's intervals cover the same bytes; the last one may be a partial interval.
        let counted: u64 = r.deliveries.iter().map(|&(_, b)| u64::from(b)).sum();
        let t = at(secs);
        if bytes > counted && t < until_us {
            r.deliveries.push((t, (bytes - counted) as u32));
        }
        if t < until_us {
            r.completed = Some(Duration::from_micros(t));
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of iperf3 3.x's `-J` report the lab reads.
    const REPORT: &str = r#"{
        "start": {"connected": []},
        "intervals": [
            {"streams": [], "sum": {"start": 0, "end": 0.1, "seconds": 0.1, "bytes": 100000}},
            {"streams": [], "sum": {"start": 0.1, "end": 0.2, "seconds": 0.1, "bytes": 150000}},
            {"streams": [], "sum": {"start": 0.2, "end": 0.25, "seconds": 0.05, "bytes": 0}}
        ],
        "end": {"sum_received": {"start": 0, "end": 0.27, "seconds": 0.27, "bytes": 260000}}
    }"#;

    #[test]
    fn iperf3_reports_become_deliveries_and_the_transfer_end() {
        let r = iperf3_received(REPORT, 1_000_000, true, u64::MAX).unwrap();
        assert_eq!(
            r.deliveries,
            vec![
                (1_100_000, 100_000),
                (1_200_000, 150_000),
                (1_270_000, 10_000)
            ]
        );
        assert_eq!(r.completed, Some(Duration::from_micros(1_270_000)));
        // A bulk transfer has no end; intervals after the run's end are not counted.
        let r = iperf3_received(REPORT, 1_000_000, false, 1_150_000).unwrap();
        assert_eq!(r.deliveries, vec![(1_100_000, 100_000)]);
        assert_eq!(r.completed, None);
    }

    #[test]
    fn an_interrupted_transfer_counts_what_arrived_and_has_no_end() {
        let text = REPORT.replacen(
            '{',
            r#"{"error": "interrupt - the client has terminated","#,
            1,
        );
        let r = iperf3_received(&text, 0, true, u64::MAX).unwrap();
        assert_eq!(r.deliveries.len(), 2);
        assert_eq!(r.completed, None);
    }

    #[test]
    fn bad_iperf3_reports_are_one_line_errors() {
        for (text, want) in [
            ("", "not JSON"),
            (
                r#"{"error": "unable to connect to server"}"#,
                "unable to connect",
            ),
            (r#"{"end": {}}"#, "no intervals"),
            (
                r#"{"intervals": [{"sum": {"end": 1}}]}"#,
                "without end or bytes",
            ),
        ] {
            let e = iperf3_received(text, 0, true, u64::MAX).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{text}: {e}");
        }
    }
}
