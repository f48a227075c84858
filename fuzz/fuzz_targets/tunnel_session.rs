//! The tunnel's data path after authentication. A gateway (`Responder`) and a client
//! (`Initiator`) with fixed keys complete one handshake per fuzzing process; every input is
//! then a script run over that session: IP packets through the client's and the gateway's
//! connections (PtoS → core → sealed → opened → split → core → StoP, as the daemons do) over a
//! network that the script makes lose, hold and reorder datagrams, time steps, path-manager
//! commands, connection restarts, authenticated but arbitrary plaintexts, and raw, mutated,
//! truncated, spliced, reflected and replayed datagrams, both ways.
//!
//! Checked: never panics; nothing unauthenticated, altered or replayed is accepted; a datagram
//! sealed by the peer is accepted exactly when the replay window says so (first delivery,
//! within `REPLAY_WINDOW` of the highest counter seen) and opens to what was sealed; and,
//! unless the script injected an arbitrary authenticated plaintext, every IP packet that
//! comes out of a StoP is the next one pushed into the PtoS at the other end (no loss,
//! duplication, reordering or corruption of the stream under datagram loss, reordering and
//! attacks).
//!
//! The secure types are not `Clone` and a handshake costs milliseconds under the sanitizer
//! (`tunnel_datagram`, a handshake per input, runs ~200 inputs/s), so the session is long-lived
//! (a `thread_local`): only its counters and replay windows carry from one input to the next,
//! and every check is relative to them. The secure layer's clock stays at zero, so its timers
//! (keepalives, re-keying, expiry; fuzzed by `tunnel_datagram`) never change the session; the
//! connections are made fresh for every input, on their own clock.
//!
//! `braid_tunnel::daemon::tunnel` (the `Tunnel` type, `split`, `probe`) and the daemons'
//! `on_datagram` are private to the crate, so the small part of them used here is mirrored
//! (`Tun`, `split`, `probe`, `Run::gw_receive`, `Run::client_receive`), from the public
//! `braid_core::Connection` and `braid_tunnel::frame::{PtoS, StoP}`.
#![no_main]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use braid_core::{AddrId, Config, Connection, Instant, PathId, Side};
use braid_tunnel::frame::{FrameError, PtoS, PtoSConfig, PushError, StoP};
use braid_tunnel::secure::wire::{DATA_HEADER_LEN, DATA_MIN, MAX_PLAINTEXT};
use braid_tunnel::secure::{
    AllowedPeer, DropReason, Initiator, InitiatorConfig, Keypair, Outcome, PeerId, REPLAY_WINDOW,
    Responder, ResponderConfig, SealError,
};
use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// The secure layer's clock: never advances (see the module docs).
const SEC_NOW: Instant = Instant::ZERO;
/// Sealed datagrams kept per direction, for late delivery, mutation and replay.
const HISTORY: usize = 64;
/// Rounds of transmit-and-deliver after one script operation, at most.
const ROUNDS: usize = 24;
/// IP packets remembered per direction for the stream check (a longer backlog is not checked).
const EXPECT_CAP: usize = 1024;
/// Connection ids the gateway remembers as replaced (as the daemon's `RETIRED_IDS`).
const RETIRED_IDS: usize = 8;
/// The daemon's `tunnel::CONN_ID_LEN` and `tunnel::PROBE_PATH_LEN`.
const CONN_ID_LEN: usize = 4;
const PROBE_PATH_LEN: usize = 4;
/// The TUN MTU (the daemons' default) and the UDP payload of an IPv4 path MTU of 1500.
const MTU: usize = 1400;
const OUTER_PAYLOAD: usize = 1472;

// ---- the part of `braid_tunnel::daemon::tunnel` used here (private to that crate) ----

/// `daemon::tunnel::split`: connection id and core datagram of a plaintext.
fn split(plaintext: &[u8]) -> Option<(u32, &[u8])> {
    if plaintext.len() < CONN_ID_LEN {
        return None;
    }
    let (id, rest) = plaintext.split_at(CONN_ID_LEN);
    Some((u32::from_be_bytes([id[0], id[1], id[2], id[3]]), rest))
}

/// `daemon::tunnel::probe`: whether a core datagram is a liveness probe, and its path.
fn probe(core: &[u8]) -> Option<Option<PathId>> {
    match core.len() {
        0 => Some(None),
        PROBE_PATH_LEN => Some(Some(PathId(u32::from_be_bytes([
            core[0], core[1], core[2], core[3],
        ])))),
        _ => None,
    }
}

/// `daemon::tunnel::Tunnel`: a connection with PtoS on its sending side and StoP on its
/// receiving side.
struct Tun {
    conn: Connection,
    id: u32,
    ptos: PtoS,
    stop: StoP,
}

impl Tun {
    fn new(cfg: Arc<Config>, side: Side, now: Instant, id: u32, ptos: PtoSConfig) -> Tun {
        Tun {
            conn: Connection::new(cfg, side, now),
            id,
            ptos: PtoS::new(ptos).expect("valid PtoS configuration"),
            stop: StoP::new(ptos.max_packet_len),
        }
    }

    fn push(&mut self, now: Instant, packet: &[u8]) -> Result<(), PushError> {
        self.ptos.push(now, packet)?;
        self.feed(now);
        Ok(())
    }

    fn feed(&mut self, now: Instant) {
        loop {
            let ready = self.ptos.ready(now);
            if ready.is_empty() {
                return;
            }
            let want = ready.len();
            let n = self.conn.write(ready);
            self.ptos.consume(n);
            if n < want {
                return;
            }
        }
    }

    fn drain(&mut self, buf: &mut [u8], mut emit: impl FnMut(&[u8])) -> Result<(), FrameError> {
        loop {
            let n = self.conn.read(buf);
            if n == 0 {
                return Ok(());
            }
            self.stop.push(&buf[..n]);
            loop {
                match self.stop.next_packet() {
                    Ok(Some(p)) => emit(p),
                    Ok(None) => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let ptos = self
            .ptos
            .poll_timeout()
            .filter(|_| self.conn.send_space() > 0);
        match (self.conn.poll_timeout(), ptos) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        self.feed(now);
    }
}

// ---- set up once per thread ----

/// The long-lived part: the established session and the configurations.
struct Sec {
    gw: Responder,
    client: Initiator,
    peer: PeerId,
    rng: StdRng,
    /// The highest counter each receiver accepted: [at the gateway, at the client].
    highest: [Option<u64>; 2],
    core: Arc<Config>,
    ptos: PtoSConfig,
    read_buf: Vec<u8>,
    dg: Vec<u8>,
    plain: Vec<u8>,
    /// `TUNNEL_SESSION_TRACE` set: a summary of every input on stderr (to check what the
    /// corpus reaches: `cargo fuzz run tunnel_session corpus/tunnel_session -- -runs=0`).
    trace: bool,
}

fn counter_of(datagram: &[u8]) -> u64 {
    u64::from_be_bytes(datagram[5..DATA_HEADER_LEN].try_into().unwrap())
}

impl Sec {
    fn new() -> Sec {
        let mut rng = StdRng::seed_from_u64(0);
        let gw_keys = Keypair::generate(&mut rng);
        let client_keys = Keypair::generate(&mut rng);
        let gw_public = gw_keys.public;
        let client_public = client_keys.public;
        let allowed = AllowedPeer {
            name: "fuzz".into(),
            public: client_public,
        };
        let mut gw = Responder::new(gw_keys, [allowed], ResponderConfig::default()).unwrap();
        let peer = gw.find_peer(&client_public).unwrap();
        let mut client =
            Initiator::new(client_keys, gw_public, InitiatorConfig::default()).unwrap();
        // `Pair::connect` of the secure layer's tests: initiation, response, confirming
        // keepalive.
        let init = client.start(SEC_NOW, &mut rng);
        let response = match gw.handle(SEC_NOW, &0u64, &init, &mut rng) {
            Outcome::Reply(r) => r,
            other => panic!("handshake setup: {other:?}"),
        };
        let keepalive = match client.handle(SEC_NOW, &response) {
            Outcome::Reply(r) => r,
            other => panic!("handshake setup: {other:?}"),
        };
        match gw.handle(SEC_NOW, &0u64, &keepalive, &mut rng) {
            Outcome::Data { plaintext, .. } if plaintext.is_empty() => {}
            other => panic!("handshake setup: {other:?}"),
        }
        while gw.poll_event().is_some() {}
        while client.poll_event().is_some() {}
        // As the daemons derive them (`core_config`, `batch`), for an IPv4 gateway.
        let core = Config {
            max_datagram_size: OUTER_PAYLOAD - DATA_MIN - CONN_ID_LEN,
            initial_rtt: Duration::from_millis(100),
            rto_min: Duration::from_millis(200),
            broken_after_backoffs: 6,
            max_ack_delay: Duration::from_millis(25),
            ..Config::default()
        };
        core.validate().unwrap();
        let ptos = PtoSConfig {
            threshold: core.max_datagram_size - 40,
            timeout: Duration::from_micros(200),
            max_packet_len: MTU,
            capacity: 1 << 20,
        };
        ptos.validate().unwrap();
        Sec {
            gw,
            client,
            peer,
            rng,
            highest: [Some(counter_of(&keepalive)), None],
            core: Arc::new(core),
            ptos,
            read_buf: vec![0; 64 * 1024],
            dg: Vec::with_capacity(2048),
            plain: Vec::with_capacity(2048),
            trace: std::env::var_os("TUNNEL_SESSION_TRACE").is_some(),
        }
    }
}

thread_local! {
    static SEC: RefCell<Sec> = RefCell::new(Sec::new());
}

// ---- the script ----

/// Reads the input: bytes (0 past the end) and length-prefixed slices.
struct Script<'a>(&'a [u8]);

impl<'a> Script<'a> {
    fn done(&self) -> bool {
        self.0.is_empty()
    }

    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    /// A length: one byte below 0xf0, else 12 bits (up to 4095).
    fn len(&mut self) -> usize {
        let b = self.byte();
        if b < 0xf0 {
            usize::from(b)
        } else {
            usize::from(b & 0x0f) << 8 | usize::from(self.byte())
        }
    }

    fn bytes(&mut self) -> &'a [u8] {
        let n = self.len().min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// An IP packet PtoS accepts, of `payload`: IPv4 or IPv6 with the lengths set.
fn ip_packet(v6: bool, payload: &[u8]) -> Vec<u8> {
    let header = if v6 { 40 } else { 20 };
    let n = payload.len().min(MTU - header);
    let mut p = vec![0u8; header + n];
    if v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(n as u16).to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p[24..40].copy_from_slice(&[0xfd, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 200, 0, 2]);
        p[16..20].copy_from_slice(&[10, 0, 9, 2]);
    }
    p[header..].copy_from_slice(&payload[..n]);
    p
}

// ---- one input ----

const UP: usize = 0;
const DOWN: usize = 1;

/// A sealed datagram and what it was sealed from.
struct Flight {
    datagram: Vec<u8>,
    plain: Vec<u8>,
    counter: u64,
    /// The receiver accepted it.
    delivered: bool,
    /// The network already decided its fate (delivered or lost) in automatic delivery.
    routed: bool,
}

/// The packets pushed into one direction's PtoS, not yet out of the far StoP.
#[derive(Default)]
struct Expect {
    /// The connection they were pushed into.
    id: u32,
    packets: VecDeque<Vec<u8>>,
    /// More were pushed than `EXPECT_CAP`: no longer checked.
    overflow: bool,
}

impl Expect {
    fn pushed(&mut self, id: u32, packet: &[u8]) {
        if self.id != id {
            *self = Expect {
                id,
                ..Expect::default()
            };
        }
        if self.packets.len() >= EXPECT_CAP {
            self.overflow = true;
        } else {
            self.packets.push_back(packet.to_vec());
        }
    }

    fn emitted(&mut self, id: u32, packet: &[u8], tainted: bool) {
        if tainted || self.overflow || self.id != id {
            return;
        }
        let want = self
            .packets
            .pop_front()
            .expect("StoP emitted a packet that was never pushed");
        assert!(
            want == packet,
            "StoP emitted another packet than was pushed"
        );
    }
}

struct Run<'a> {
    s: &'a mut Sec,
    now: Instant,
    /// The client's connection.
    client: Option<Tun>,
    next_id: u32,
    /// The gateway's connection of this peer, the ids it replaced, liveness probes to echo.
    gw: Option<Tun>,
    retired: Vec<u32>,
    probes: usize,
    /// Sealed datagrams, [client → gateway, gateway → client].
    wires: [VecDeque<Flight>; 2],
    /// Automatic delivery (in order, minus `loss`); otherwise only `Deliver` operations.
    auto: bool,
    /// Bit `n % 8` set: the n-th datagram automatic delivery meets is lost (held back).
    loss: u8,
    routed: u32,
    expect: [Expect; 2],
    /// An arbitrary authenticated plaintext reached a connection: its streams are no longer
    /// checked.
    tainted: bool,
    /// For the trace: datagrams accepted [up, down], packets out of StoP [gateway, client].
    accepted: [u32; 2],
    packets: [u32; 2],
}

fn retire(list: &mut Vec<u32>, id: u32) {
    list.push(id);
    if list.len() > RETIRED_IDS {
        list.remove(0);
    }
}

impl Run<'_> {
    fn start_client(&mut self) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(0x0101_0101) | 1;
        let mut t = Tun::new(self.s.core.clone(), Side::Client, self.now, id, self.s.ptos);
        let _ = t.conn.open_path(self.now, AddrId(0), AddrId(0), false);
        self.client = Some(t);
    }

    fn client(&mut self) -> &mut Tun {
        if self.client.is_none() {
            self.start_client();
        }
        self.client.as_mut().unwrap()
    }

    /// Seals `plain` at one end into the wire towards the other.
    fn seal(&mut self, dir: usize, plain: &[u8]) {
        let mut out = Vec::new();
        let r = if dir == UP {
            self.s.client.seal(SEC_NOW, plain, &mut out)
        } else {
            self.s.gw.seal(SEC_NOW, self.s.peer, plain, &mut out)
        };
        let counter = match r {
            Ok(c) => c,
            Err(SealError::TooLarge(n)) => {
                assert!(n > MAX_PLAINTEXT);
                return;
            }
            Err(e) => panic!("the session was lost: {e:?}"),
        };
        assert_eq!(counter, counter_of(&out));
        let wire = &mut self.wires[dir];
        wire.push_back(Flight {
            datagram: out,
            plain: plain.to_vec(),
            counter,
            delivered: false,
            routed: false,
        });
        if wire.len() > HISTORY {
            wire.pop_front();
        }
    }

    /// Hands `datagram` to the receiving end's secure layer.
    fn open(&mut self, dir: usize, datagram: &[u8]) -> Outcome {
        if dir == UP {
            self.s.gw.handle(SEC_NOW, &0u64, datagram, &mut self.s.rng)
        } else {
            self.s.client.handle(SEC_NOW, datagram)
        }
    }

    /// Delivers flight `i` of a wire: accepted exactly when the replay window allows, then
    /// up the receiver's data path.
    fn deliver(&mut self, dir: usize, i: usize) {
        let f = &self.wires[dir][i];
        let counter = f.counter;
        let fresh = !f.delivered
            && self.s.highest[dir].is_none_or(|h| counter > h || h - counter < REPLAY_WINDOW);
        let datagram = f.datagram.clone();
        match self.open(dir, &datagram) {
            Outcome::Data {
                peer, plaintext, ..
            } => {
                assert!(fresh, "a replayed or too old datagram was accepted");
                let f = &mut self.wires[dir][i];
                assert!(plaintext == f.plain, "opened to another plaintext");
                assert_eq!(
                    peer,
                    if dir == UP {
                        self.s.peer
                    } else {
                        PeerId::GATEWAY
                    }
                );
                f.delivered = true;
                self.accepted[dir] += 1;
                let h = &mut self.s.highest[dir];
                *h = Some(h.map_or(counter, |h| h.max(counter)));
                if dir == UP {
                    self.gw_receive(&plaintext);
                } else {
                    self.client_receive(&plaintext);
                }
            }
            Outcome::Drop(reason) => {
                assert!(
                    !fresh,
                    "a datagram sealed by the peer was refused: {reason:?}"
                );
                assert!(
                    matches!(reason, DropReason::Replayed | DropReason::TooOld),
                    "replay refused as {reason:?}"
                );
            }
            other => panic!("a data datagram was answered: {other:?}"),
        }
    }

    /// Bytes that are not a datagram the peer sealed: never accepted.
    fn forged(&mut self, dir: usize, datagram: &[u8]) {
        let out = self.open(dir, datagram);
        assert!(
            !matches!(out, Outcome::Data { .. }),
            "unauthenticated or altered datagram accepted"
        );
    }

    /// The gateway daemon's `on_datagram` after the secure layer.
    fn gw_receive(&mut self, plaintext: &[u8]) {
        if plaintext.is_empty() {
            return; // a keepalive
        }
        let Some((id, core)) = split(plaintext) else {
            return;
        };
        if self.retired.contains(&id) {
            return;
        }
        if self.gw.as_ref().map(|t| t.id) != Some(id) {
            if let Some(old) = self.gw.take() {
                retire(&mut self.retired, old.id);
            }
            self.gw = Some(Tun::new(
                self.s.core.clone(),
                Side::Server,
                self.now,
                id,
                self.s.ptos,
            ));
        }
        let t = self.gw.as_mut().unwrap();
        if let Some(path) = probe(core) {
            t.conn.peer_alive(self.now);
            let _ = path.filter(|&p| t.conn.path(p).is_some());
            self.probes += 1;
            return;
        }
        if t.conn.handle_datagram(self.now, core).is_ok() {
            let _ = braid_core::wire::parse_header(core);
        }
    }

    /// The client daemon's `on_datagram` after the secure layer.
    fn client_receive(&mut self, plaintext: &[u8]) {
        if plaintext.is_empty() {
            return;
        }
        let Some((id, core)) = split(plaintext) else {
            return;
        };
        match &mut self.client {
            Some(t) if t.id == id => {
                if core.is_empty() {
                    t.conn.peer_alive(self.now);
                } else {
                    let _ = t.conn.handle_datagram(self.now, core);
                }
            }
            _ => {}
        }
    }

    /// Both daemons' flush: probe echoes, streams to packets, connections' datagrams sealed
    /// onto the wires. Returns whether anything was sealed.
    fn flush(&mut self) -> bool {
        let before = [self.wires[UP].len(), self.wires[DOWN].len()];
        let mut sealed = false;
        // Gateway.
        for _ in 0..std::mem::take(&mut self.probes) {
            if let Some(t) = &self.gw {
                let id = t.id.to_be_bytes();
                self.seal(DOWN, &id);
                sealed = true;
            }
        }
        if let Some(mut t) = self.gw.take() {
            while t.conn.poll_event().is_some() {}
            let expect = &mut self.expect[UP];
            let tainted = self.tainted;
            let id = t.id;
            let n = &mut self.packets[UP];
            let r = t.drain(&mut self.s.read_buf, |p| {
                *n += 1;
                expect.emitted(id, p, tainted)
            });
            if r.is_err() || t.conn.is_closed() {
                assert!(
                    r.is_ok() || self.tainted,
                    "invalid packet in an intact stream"
                );
                retire(&mut self.retired, t.id);
            } else {
                t.feed(self.now);
                while let Some(tx) = t.conn.poll_transmit(self.now, &mut self.s.dg) {
                    let mut plain = std::mem::take(&mut self.s.plain);
                    plain.clear();
                    plain.extend_from_slice(&t.id.to_be_bytes());
                    plain.extend_from_slice(&self.s.dg[..tx.size]);
                    self.seal(DOWN, &plain);
                    self.s.plain = plain;
                    sealed = true;
                }
                self.gw = Some(t);
            }
        }
        // Client.
        if let Some(mut t) = self.client.take() {
            while t.conn.poll_event().is_some() {}
            let expect = &mut self.expect[DOWN];
            let tainted = self.tainted;
            let id = t.id;
            let n = &mut self.packets[DOWN];
            let r = t.drain(&mut self.s.read_buf, |p| {
                *n += 1;
                expect.emitted(id, p, tainted)
            });
            if r.is_err() || t.conn.is_closed() {
                assert!(
                    r.is_ok() || self.tainted,
                    "invalid packet in an intact stream"
                );
            } else {
                t.feed(self.now);
                while let Some(tx) = t.conn.poll_transmit(self.now, &mut self.s.dg) {
                    let mut plain = std::mem::take(&mut self.s.plain);
                    plain.clear();
                    plain.extend_from_slice(&t.id.to_be_bytes());
                    plain.extend_from_slice(&self.s.dg[..tx.size]);
                    self.seal(UP, &plain);
                    self.s.plain = plain;
                    sealed = true;
                }
                self.client = Some(t);
            }
        }
        // The secure layers' own datagrams (none with the clock stopped).
        while self.s.gw.poll_transmit().is_some() {}
        while self.s.client.poll_transmit().is_some() {}
        while self.s.gw.poll_event().is_some() {}
        while self.s.client.poll_event().is_some() {}
        sealed || before != [self.wires[UP].len(), self.wires[DOWN].len()]
    }

    /// Automatic delivery of what the network has not routed yet, minus losses.
    fn route(&mut self) -> bool {
        if !self.auto {
            return false;
        }
        let mut delivered = false;
        for dir in [UP, DOWN] {
            let mut i = 0;
            while i < self.wires[dir].len() {
                if !self.wires[dir][i].routed {
                    self.wires[dir][i].routed = true;
                    let lost = self.loss & (1 << (self.routed % 8)) != 0;
                    self.routed = self.routed.wrapping_add(1);
                    if !lost {
                        self.deliver(dir, i);
                        delivered = true;
                    }
                }
                i += 1;
            }
        }
        delivered
    }

    /// Transmit and deliver until quiet (or `ROUNDS`).
    fn settle(&mut self) {
        for _ in 0..ROUNDS {
            let sent = self.flush();
            let delivered = self.route();
            if !sent && !delivered {
                break;
            }
        }
    }

    fn timers(&mut self) {
        for _ in 0..4 {
            let mut fired = false;
            for t in [self.client.as_mut(), self.gw.as_mut()]
                .into_iter()
                .flatten()
            {
                if t.poll_timeout().is_some_and(|d| d <= self.now) {
                    t.handle_timeout(self.now);
                    fired = true;
                }
            }
            if !fired {
                break;
            }
        }
    }

    /// The flight `sel` picks on a wire, if it has any.
    fn pick(&self, dir: usize, sel: u8) -> Option<usize> {
        let n = self.wires[dir].len();
        (n > 0).then(|| usize::from(sel) % n)
    }

    /// An arbitrary plaintext the script builds, for `dir`: the current connection id and
    /// bytes, another id, bare bytes, or an earlier plaintext of that direction altered.
    fn plaintext(&mut self, dir: usize, script: &mut Script) -> Vec<u8> {
        let how = script.byte();
        let own = if dir == UP {
            self.client.as_ref().map(|t| t.id)
        } else {
            self.gw.as_ref().map(|t| t.id)
        };
        let mut p = Vec::new();
        match how % 4 {
            0 => {
                p.extend_from_slice(&own.unwrap_or(0).to_be_bytes());
                p.extend_from_slice(script.bytes());
            }
            1 => {
                p.extend_from_slice(&script.u16().to_be_bytes());
                p.extend_from_slice(&script.u16().to_be_bytes());
                p.extend_from_slice(script.bytes());
            }
            2 => p.extend_from_slice(script.bytes()),
            _ => {
                let sel = script.byte();
                if let Some(i) = self.pick(dir, sel) {
                    p = self.wires[dir][i].plain.clone();
                }
                mutate(&mut p, script);
            }
        }
        p
    }

    /// One operation of the script, then [`Run::settle`]. The operation byte's low four bits
    /// choose it, its top bit the direction where one applies (0: client → gateway); its
    /// arguments follow it (a missing byte reads as 0; a slice is length-prefixed).
    fn op(&mut self, script: &mut Script) {
        let op = script.byte();
        let dir = usize::from(op >> 7);
        match op % 16 {
            // IP packets into the client's (or the gateway's) PtoS, `count` times.
            0..=2 => {
                let flags = script.byte();
                let count = 1 + usize::from(flags & 7);
                let payload = script.bytes();
                let packet = if flags & 0x10 != 0 {
                    payload.to_vec() // as read from the TUN device: maybe not IP at all
                } else {
                    ip_packet(flags & 0x08 != 0, payload)
                };
                if dir == UP && self.client.is_none() {
                    self.start_client();
                }
                let (t, expect) = if dir == UP {
                    (self.client.as_mut(), &mut self.expect[UP])
                } else {
                    (self.gw.as_mut(), &mut self.expect[DOWN])
                };
                let Some(t) = t else {
                    return; // the gateway has no connection to route it to
                };
                for _ in 0..count {
                    if t.push(self.now, &packet).is_ok() {
                        expect.pushed(t.id, &packet);
                    }
                }
            }
            // Time passes: the connections' and PtoS's timers.
            3 => {
                let b = u64::from(script.byte());
                self.now += Duration::from_micros(b * b * b / 4 + 1);
                self.timers();
            }
            // The network: automatic delivery on or off, the loss pattern.
            4 => {
                let b = script.byte();
                self.auto = b & 0x80 == 0;
                self.loss = script.byte();
            }
            // Deliver a datagram from the history: late, reordered, or replayed.
            5 | 6 => {
                let sel = script.byte();
                if let Some(i) = self.pick(dir, sel) {
                    self.deliver(dir, i);
                }
            }
            // A datagram from the history altered: refused.
            7 => {
                let sel = script.byte();
                let Some(i) = self.pick(dir, sel) else {
                    return;
                };
                let mut d = self.wires[dir][i].datagram.clone();
                let orig = d.clone();
                match script.byte() % 4 {
                    0 | 1 => mutate(&mut d, script),
                    // Another datagram's header on this one's body.
                    2 => {
                        let j = self.pick(dir, script.byte()).unwrap();
                        d[..DATA_HEADER_LEN]
                            .copy_from_slice(&self.wires[dir][j].datagram[..DATA_HEADER_LEN]);
                    }
                    // Cut somewhere.
                    _ => {
                        let at = usize::from(script.u16()) % d.len();
                        d.truncate(at);
                    }
                }
                if d != orig {
                    self.forged(dir, &d);
                }
            }
            // A datagram handed to the end that sealed it (reflection): refused.
            8 => {
                let sel = script.byte();
                if let Some(i) = self.pick(dir, sel) {
                    let d = self.wires[dir][i].datagram.clone();
                    self.forged(1 - dir, &d);
                }
            }
            // Raw bytes from the network: refused.
            9 => {
                let raw = script.bytes();
                self.forged(dir, raw);
            }
            // An authenticated but arbitrary plaintext: sealed, then delivered by the network.
            10 | 11 => {
                let p = self.plaintext(dir, script);
                self.tainted = true;
                self.seal(dir, &p);
            }
            // A liveness probe from the client (the daemon's `send_probes`), naming a path.
            12 => {
                let sel = script.byte();
                let t = self.client();
                let id = t.id;
                let paths: Vec<PathId> = t.conn.paths().map(|p| p.id).collect();
                let mut plain = id.to_be_bytes().to_vec();
                if sel & 0x80 == 0 && !paths.is_empty() {
                    let p = paths[usize::from(sel) % paths.len()];
                    plain.extend_from_slice(&p.0.to_be_bytes());
                }
                self.seal(UP, &plain);
            }
            // The client's path manager.
            13 => {
                let sub = script.byte();
                let arg = script.byte();
                let now = self.now;
                let t = self.client();
                let paths: Vec<PathId> = t.conn.paths().map(|p| p.id).collect();
                let path = (!paths.is_empty()).then(|| paths[usize::from(arg) % paths.len()]);
                let addr = AddrId(arg % 4);
                match sub % 6 {
                    0 => {
                        let _ = t.conn.open_path(now, addr, AddrId(0), sub & 0x80 != 0);
                    }
                    1 => {
                        if let Some(p) = path {
                            let _ = t.conn.close_path(p);
                        }
                    }
                    2 => {
                        if let Some(p) = path {
                            let _ = t.conn.set_backup(p, sub & 0x80 != 0);
                        }
                    }
                    3 => t.conn.remove_local_addr(addr),
                    4 => t.conn.local_addr_lost(now, addr),
                    _ => {
                        let ip = std::net::Ipv4Addr::new(192, 0, 2, arg);
                        t.conn
                            .announce_addr(addr, (ip, 4000).into(), sub & 0x80 != 0);
                    }
                }
            }
            // The client starts a new connection (a new id).
            14 => self.start_client(),
            // Nothing: one more round of transmit and delivery.
            _ => {}
        }
    }
}

/// Alters `p` as the script says: flip a byte, cut, or append.
fn mutate(p: &mut Vec<u8>, script: &mut Script) {
    let kind = script.byte();
    let at = usize::from(script.u16());
    let x = script.byte();
    match kind % 3 {
        0 if !p.is_empty() => {
            let i = at % p.len();
            p[i] ^= x | 1;
        }
        1 if !p.is_empty() => p.truncate(at % p.len()),
        _ => p.extend(std::iter::repeat_n(x, 1 + at % 32)),
    }
}

fuzz_target!(|data: &[u8]| {
    SEC.with(|sec| {
        let mut sec = sec.borrow_mut();
        let mut run = Run {
            s: &mut sec,
            now: Instant::ZERO,
            client: None,
            next_id: 0x0c11_e17d,
            gw: None,
            retired: Vec::new(),
            probes: 0,
            wires: [VecDeque::new(), VecDeque::new()],
            auto: true,
            loss: 0,
            routed: 0,
            expect: [Expect::default(), Expect::default()],
            tainted: false,
            accepted: [0; 2],
            packets: [0; 2],
        };
        run.start_client();
        let mut script = Script(data);
        while !script.done() {
            run.op(&mut script);
            run.settle();
        }
        if run.s.trace {
            eprintln!(
                "len {} accepted up {} down {}, packets at gateway {} at client {}, \
                 tainted {}, wires {}/{}",
                data.len(),
                run.accepted[UP],
                run.accepted[DOWN],
                run.packets[UP],
                run.packets[DOWN],
                run.tainted,
                run.wires[UP].len(),
                run.wires[DOWN].len(),
            );
        }
    });
});
