//! The one run loop of both daemons, whatever the transport.
//!
//! ```text
//!            ┌──────────── run(transport) ───────────────────────────────────────┐
//!  stop ────►│ select! (biased): stop │ transport.wait() │ TUN batch │ timer │ status │
//!            │   input  → transport.on_input   (datagrams, records, link ticks)  │
//!            │   TUN    → MTU check (TooBig) → transport.on_packet, per packet    │
//!            │   timer  → transport.on_timeout (earliest of poll_timeout)        │
//!            │   status → role, uptime, TUN counters + transport.status()        │
//!            │ then transport.flush (transmits, packets queued on the TUN) and   │
//!            │ the TUN device's write batch                                      │
//!            └───────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The loop owns the TUN device, its MTU check, the status document and the operations
//! endpoints (control socket, Prometheus); a [`Transport`] owns how packets travel and
//! everything it needs for that (sockets, secure sessions, connections, tasks). After any
//! wake-up the loop drains what else is ready on the TUN device (bounded, so inputs get their
//! turn) and then lets the transport flush, so packets and datagrams move in batches.
//!
//! Where a new transport goes: a type implementing [`Transport`] for each role, built in
//! `daemon/mod.rs` from a new `config::Transport` name. A new way of carrying packets over the
//! existing links and secure sessions (as `datagram` is beside `braid`) needs no new transport:
//! it is a carrier of the tunnel connection (`tunnel.rs`), picked per packet by the classes.

use std::future::Future;
use std::sync::{Arc, Mutex};

use braid_core::Instant;
use serde_json::{Value, json};

use super::common::{Clock, DaemonError, STATUS_EVERY};
use super::config::{OpsConfig, TunConfig};
use super::status::{self, Shared};
use super::tun::{TooBig, Tun};

/// TUN batches read per wake-up at most before inputs get their turn.
const TUN_DRAIN: usize = 64;

/// Hands the batch just read from `src` to `handle`, then reads and hands over the batches
/// waiting after it (`try_read`: whether one was read), `max_reads` reads in all at most so
/// other inputs get their turn. Every batch read is handed over: the device has given it up,
/// and one read but not handed over is lost (the loop once read a 65th batch and dropped it,
/// one TUN read in 65 under load: a whole 64 kB super-segment with offload).
fn drain<S: ?Sized>(
    src: &mut S,
    max_reads: usize,
    mut try_read: impl FnMut(&mut S) -> bool,
    mut handle: impl FnMut(&mut S),
) {
    let mut reads = 1;
    loop {
        handle(src);
        if reads >= max_reads || !try_read(src) {
            return;
        }
        reads += 1;
    }
}

/// How packets travel between client and gateway. The loop calls, after every wake-up:
/// `on_input` / `on_packet` / `on_timeout` for what woke it, then `flush`.
pub(crate) trait Transport {
    /// What [`Transport::wait`] reports.
    type Input;

    /// Sends what goes before anything arrives (the client's handshake initiation).
    fn start(&mut self, now: Instant) -> impl Future<Output = ()>;

    /// Waits for the next input (a readable socket, a record, a link tick). Cancel-safe: the
    /// loop drops it when something else is ready first.
    fn wait(&mut self) -> impl Future<Output = Self::Input>;

    /// Handles an input; packets for the TUN device go to `tun`. An error stops the daemon.
    fn on_input(
        &mut self,
        now: Instant,
        input: Self::Input,
        tun: &mut Tun,
    ) -> impl Future<Output = Result<(), DaemonError>>;

    /// A packet read from the TUN device, within the MTU.
    fn on_packet(&mut self, now: Instant, packet: &[u8]);

    /// The earliest timer.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Runs the timers due at `now`.
    fn on_timeout(&mut self, now: Instant);

    /// Sends what is due and queues received packets on `tun` (the loop writes them).
    fn flush(&mut self, now: Instant, tun: &mut Tun) -> impl Future<Output = ()>;

    /// The transport's part of the status document: an object with at least `role`.
    fn status(&self, now: Instant) -> Value;
}

/// Runs `t` with its TUN device until `stop` resolves or an error stops it.
pub(crate) async fn run<T: Transport>(
    mut t: T,
    tun_cfg: &TunConfig,
    ops: &OpsConfig,
    clock: Clock,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let mut tun = Tun::create(tun_cfg).map_err(|e| DaemonError(e.to_string()))?;
    let mut too_big = TooBig::new(tun_cfg.mtu);
    let shared: Shared = Arc::new(Mutex::new(Value::Null));
    let doc = |t: &T, tun: &Tun, too_big: &TooBig| {
        let now = clock.now();
        let mut v = t.status(now);
        v["uptime_s"] = now.secs_f64().into();
        v["tun"] = json!({
            "name": tun_cfg.name,
            "write_errors": tun.write_errors,
            "read_dropped": tun.read_dropped,
            "too_big": too_big.json(),
        });
        v
    };
    let publish = |v: Value| {
        if let Ok(mut s) = shared.lock() {
            *s = v;
        }
    };
    publish(doc(&t, &tun, &too_big));
    let tasks = status::serve_ops(ops, &shared).await?;
    let r = async {
        tokio::pin!(stop);
        let mut status_tick = tokio::time::interval(STATUS_EVERY);
        t.start(clock.now()).await;
        loop {
            let deadline = t
                .poll_timeout()
                .unwrap_or(clock.now() + std::time::Duration::from_secs(1));
            let sleep = tokio::time::sleep_until(clock.tokio(deadline));
            enum Wake<I> {
                Stop,
                Input(I),
                Tun(std::io::Result<()>),
                Timer,
                Status,
            }
            let wake = tokio::select! {
                biased;
                () = &mut stop => Wake::Stop,
                i = t.wait() => Wake::Input(i),
                r = tun.recv() => Wake::Tun(r),
                () = sleep => Wake::Timer,
                _ = status_tick.tick() => Wake::Status,
            };
            let now = clock.now();
            match wake {
                Wake::Stop => return Ok(()),
                Wake::Input(i) => t.on_input(now, i, &mut tun).await?,
                Wake::Tun(Err(e)) => return Err(DaemonError(format!("TUN read: {e}"))),
                Wake::Tun(Ok(())) => drain(
                    &mut tun,
                    TUN_DRAIN,
                    |tun| matches!(tun.try_recv(), Ok(true)),
                    |tun| {
                        for packet in tun.packets() {
                            if !too_big.check(now, packet) {
                                t.on_packet(now, packet);
                            }
                        }
                        too_big.flush(tun);
                    },
                ),
                Wake::Timer => t.on_timeout(now),
                Wake::Status => publish(doc(&t, &tun, &too_big)),
            }
            t.flush(now, &mut tun).await;
            tun.flush().await;
        }
    }
    .await;
    for task in tasks {
        task.abort();
    }
    if let Some(p) = &ops.control {
        let _ = std::fs::remove_file(p);
    }
    let role = t.status(clock.now())["role"]
        .as_str()
        .unwrap_or("daemon")
        .to_string();
    tracing::info!("{role} stopped");
    r
}

#[cfg(test)]
mod tests {
    use super::drain;

    /// A device with `waiting` batches queued behind the one just read.
    struct Backlog {
        waiting: usize,
        read: usize,
        handled: Vec<usize>,
    }

    impl Backlog {
        fn drain(&mut self, max_reads: usize) {
            drain(
                self,
                max_reads,
                |b| {
                    if b.waiting == 0 {
                        return false;
                    }
                    b.waiting -= 1;
                    b.read += 1;
                    true
                },
                |b| b.handled.push(b.read),
            );
        }
    }

    #[test]
    fn every_batch_read_is_handed_over_under_a_backlog() {
        let mut b = Backlog {
            waiting: 1000,
            read: 1,
            handled: Vec::new(),
        };
        b.drain(64);
        assert_eq!(b.handled, (1..=64).collect::<Vec<_>>());
        assert_eq!(b.read, 64, "read a batch it did not hand over");
        // The next wake-up reads the 65th.
        b.waiting -= 1;
        b.read += 1;
        b.drain(64);
        assert_eq!(b.handled.len(), 128);
        assert_eq!(b.handled, (1..=128).collect::<Vec<_>>());
    }

    #[test]
    fn a_short_backlog_is_drained_and_nothing_more_is_read() {
        for waiting in [0, 1, 5, 63] {
            let mut b = Backlog {
                waiting,
                read: 1,
                handled: Vec::new(),
            };
            b.drain(64);
            assert_eq!(b.handled, (1..=waiting + 1).collect::<Vec<_>>());
            assert_eq!(b.waiting, 0);
        }
    }
}
