//! A one-link testbed for the emulator's tests and benchmark: client (c0 10.0.1.1) ⇄ emulator
//! ⇄ server (s0 10.0.1.2), namespaces removed on drop, and ping-like UDP probes across it.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use braid_mptcp::netns::NetNs;
use braid_sim::link::{Capacity, DirSpec, QueueLimit};

use crate::topo::{End, emulated_link};
use crate::{Emulator, LinkEvent, LinkSpec};

/// Whether a namespace test or benchmark runs: false (said on stderr) when
/// `BRAID_SKIP_NETNS` is set, which `CI=true` refuses; without root it fails with what is
/// needed, as the project's other namespace tests do.
#[must_use]
pub fn require_root() -> bool {
    if std::env::var_os("BRAID_SKIP_NETNS").is_some() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "BRAID_SKIP_NETNS is set under CI=true: namespace tests must run in CI"
        );
        eprintln!("SKIPPED: BRAID_SKIP_NETNS is set, this namespace test does not run");
        return false;
    }
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false);
    assert!(
        root,
        "the link emulator's namespace tests need root (CAP_NET_ADMIN for namespaces, veth, \
         AF_PACKET): run them as root, or set BRAID_SKIP_NETNS=1 to skip them"
    );
    true
}

pub const CLIENT: &str = "10.0.1.1";
pub const SERVER: &str = "10.0.1.2";

/// client (c0 10.0.1.1) ⇄ emulator ⇄ server (s0 10.0.1.2), one link.
pub struct Bed {
    pub client: NetNs,
    pub server: NetNs,
    pub emu: NetNs,
    pub a: String,
    pub b: String,
}

impl Bed {
    pub fn new(prefix: &str) -> Bed {
        let client = NetNs::new(&format!("{prefix}c")).unwrap();
        let emu = NetNs::new(&format!("{prefix}e")).unwrap();
        let server = NetNs::new(&format!("{prefix}s")).unwrap();
        let (a, b) = emulated_link(
            End {
                ns: &client,
                ifname: "c0",
                addr: &format!("{CLIENT}/24"),
            },
            &emu,
            End {
                ns: &server,
                ifname: "s0",
                addr: &format!("{SERVER}/24"),
            },
            "l0",
        )
        .expect("emulated link");
        Bed {
            client,
            server,
            emu,
            a,
            b,
        }
    }

    pub fn start(
        &self,
        down: DirSpec,
        up: DirSpec,
        events: Vec<(Duration, LinkEvent)>,
    ) -> Emulator {
        self.start_on(down, up, events, None)
    }

    /// As [`start`](Self::start), the link's two directions on `medium` when given: they take
    /// turns on it, one frame at a time.
    pub fn start_on(
        &self,
        down: DirSpec,
        up: DirSpec,
        events: Vec<(Duration, LinkEvent)>,
        medium: Option<usize>,
    ) -> Emulator {
        Emulator::start(
            &self.emu,
            vec![LinkSpec {
                name: "l0".into(),
                a_if: self.a.clone(),
                b_if: self.b.clone(),
                down,
                up,
                events,
                seed: 1,
                marks: Vec::new(),
                medium,
            }],
        )
        .expect("start the emulator")
    }
}

pub fn spec(capacity: Capacity, delay_ms: u64) -> DirSpec {
    DirSpec {
        capacity,
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::ZERO,
        jitter_period: Duration::ZERO,
        reorder: false,
        queue: QueueLimit::Packets(100),
        loss: 0.0,
        overhead: 0,
        frame_time: Duration::ZERO,
        retries: 0,
        retry_backoff: Duration::ZERO,
    }
}

pub fn mbit(m: f64) -> Capacity {
    Capacity::Rate(m * 1e6)
}

/// UDP probes client → server (port 9000) every `every` for `count` probes, after a few that resolve ARP:
/// (send time, receive time) of each, `None` when lost.
pub fn probes(bed: &Bed, every: Duration, count: u32) -> Vec<(Instant, Option<Instant>)> {
    let rx = bed
        .server
        .run(|| UdpSocket::bind(format!("{SERVER}:9000")).unwrap());
    let tx = bed
        .client
        .run(|| UdpSocket::bind(format!("{CLIENT}:0")).unwrap());
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        let mut quiet = 0;
        while quiet < 10 {
            match rx.recv(&mut buf) {
                Ok(n) if n >= 4 => {
                    quiet = 0;
                    let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                    got.push((seq, Instant::now()));
                }
                _ => quiet += 1,
            }
        }
        got
    });
    // Warm-up: ARP through the emulated link.
    for _ in 0..3 {
        tx.send_to(&u32::MAX.to_be_bytes(), format!("{SERVER}:9000"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut sent = Vec::new();
    let t0 = Instant::now();
    for seq in 0..count {
        let at = t0 + every * seq;
        if let Some(d) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let mut p = [0u8; 100];
        p[..4].copy_from_slice(&seq.to_be_bytes());
        sent.push(Instant::now());
        tx.send_to(&p, format!("{SERVER}:9000")).unwrap();
    }
    let got = receiver.join().unwrap();
    let mut out: Vec<(Instant, Option<Instant>)> = sent.into_iter().map(|s| (s, None)).collect();
    for (seq, at) in got {
        if let Some(slot) = out.get_mut(seq as usize) {
            slot.1 = Some(at);
        }
    }
    out
}
