//! Random operation sequences over a faulty network (loss, duplication, reordering, time
//! jumps across re-keys and expiries): every plaintext arrives at most once and only as sent,
//! and once the network behaves, the two ends talk again.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    SendUp,
    SendDown,
    /// Deliver the in-flight datagram at this position (of the up or down queue).
    Deliver(bool, prop::sample::Index),
    Duplicate(bool, prop::sample::Index),
    Lose(bool, prop::sample::Index),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::SendUp),
        3 => Just(Op::SendDown),
        6 => (any::<bool>(), any::<prop::sample::Index>()).prop_map(|(d, i)| Op::Deliver(d, i)),
        1 => (any::<bool>(), any::<prop::sample::Index>()).prop_map(|(d, i)| Op::Duplicate(d, i)),
        1 => (any::<bool>(), any::<prop::sample::Index>()).prop_map(|(d, i)| Op::Lose(d, i)),
        2 => (0u64..40_000).prop_map(Op::Advance),
    ]
}

/// Both directions' datagrams in flight, and what each end has accepted.
struct Net {
    p: Pair,
    up: Vec<Vec<u8>>,
    down: Vec<Vec<u8>>,
    next: u32,
    sent: BTreeSet<Vec<u8>>,
    received: BTreeSet<Vec<u8>>,
}

impl Net {
    fn send_up(&mut self) -> bool {
        let msg = self.message(b'u');
        let mut out = Vec::new();
        let ok = self.p.client.seal(self.p.now, &msg, &mut out).is_ok();
        if ok {
            self.up.push(out);
        }
        ok
    }

    fn send_down(&mut self) -> bool {
        let msg = self.message(b'd');
        let mut out = Vec::new();
        let ok = self
            .p
            .gw
            .seal(self.p.now, self.p.peer, &msg, &mut out)
            .is_ok();
        if ok {
            self.down.push(out);
        }
        ok
    }

    fn message(&mut self, dir: u8) -> Vec<u8> {
        self.next += 1;
        let mut msg = vec![dir];
        msg.extend_from_slice(&self.next.to_be_bytes());
        self.sent.insert(msg.clone());
        msg
    }

    /// Delivers one datagram; returns the plaintext if it was data.
    fn deliver(&mut self, to_gw: bool, datagram: &[u8]) -> Result<Option<Vec<u8>>, TestCaseError> {
        let outcome = if to_gw {
            self.p.at_gw(datagram)
        } else {
            self.p.at_client(datagram)
        };
        match outcome {
            Outcome::Reply(r) if to_gw => self.down.push(r),
            Outcome::Reply(r) => self.up.push(r),
            Outcome::Data { plaintext, .. } if !plaintext.is_empty() => {
                prop_assert!(self.sent.contains(&plaintext), "never sent: {plaintext:?}");
                prop_assert!(
                    self.received.insert(plaintext.clone()),
                    "twice: {plaintext:?}"
                );
                return Ok(Some(plaintext));
            }
            _ => {}
        }
        Ok(None)
    }

    fn advance(&mut self, to: Instant) {
        let (up, down) = self.p.advance(to);
        self.up.extend(up);
        self.down.extend(down.into_iter().map(|t| t.datagram));
    }

    fn queue(&mut self, to_gw: bool) -> &mut Vec<Vec<u8>> {
        if to_gw { &mut self.up } else { &mut self.down }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn at_most_once_under_faults_and_live_afterwards(
        ops in proptest::collection::vec(op(), 1..120),
        seed in any::<u64>(),
    ) {
        let mut net = Net {
            p: Pair::new(seed),
            up: Vec::new(),
            down: Vec::new(),
            next: 0,
            sent: BTreeSet::new(),
            received: BTreeSet::new(),
        };
        // Half the runs start connected, half with the first initiation in flight.
        if seed % 2 == 0 {
            net.p.connect();
        } else {
            let init = net.p.client.start(net.p.now, &mut net.p.rng);
            net.up.push(init);
        }
        for op in ops {
            match op {
                Op::SendUp => { net.send_up(); }
                Op::SendDown => { net.send_down(); }
                Op::Deliver(to_gw, i) => {
                    let q = net.queue(to_gw);
                    if !q.is_empty() {
                        let d = q.remove(i.index(q.len()));
                        net.deliver(to_gw, &d)?;
                    }
                }
                Op::Duplicate(to_gw, i) => {
                    let q = net.queue(to_gw);
                    if !q.is_empty() {
                        let d = q[i.index(q.len())].clone();
                        q.push(d);
                    }
                }
                Op::Lose(to_gw, i) => {
                    let q = net.queue(to_gw);
                    if !q.is_empty() {
                        q.remove(i.index(q.len()));
                    }
                }
                Op::Advance(ms) => {
                    let to = net.p.now + Duration::from_millis(ms);
                    net.advance(to);
                }
            }
        }
        // The network heals: everything in flight is delivered in order, timers run, and
        // within a few minutes of virtual time a ping and a pong both get through.
        let mut talked = false;
        for _ in 0..400 {
            while !net.up.is_empty() || !net.down.is_empty() {
                for to_gw in [true, false] {
                    let q = std::mem::take(net.queue(to_gw));
                    for d in q {
                        net.deliver(to_gw, &d)?;
                    }
                }
            }
            let (ping, pong) = (net.send_up(), net.send_down());
            let up = std::mem::take(&mut net.up);
            let mut got_ping = false;
            for d in up {
                got_ping |= net.deliver(true, &d)?.is_some();
            }
            let down = std::mem::take(&mut net.down);
            let mut got_pong = false;
            for d in down {
                got_pong |= net.deliver(false, &d)?.is_some();
            }
            if ping && pong && got_ping && got_pong {
                talked = true;
                break;
            }
            let to = net.p.now + Duration::from_millis(500);
            net.advance(to);
        }
        prop_assert!(talked, "no exchange after healing: {:?} / {:?}", net.p.client, net.p.gw);
        prop_assert!(net.p.gw.session_count() <= 4);
    }
}
