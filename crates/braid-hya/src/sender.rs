//! The sending end of one direction: numbers each packet, picks its link with the
//! [`Proportional`] scheduler, and learns from the receiver's feedback what each link
//! delivered (measured weights) and whether it still delivers at all (liveness).
//!
//! Liveness: a link whose packets have waited longer than its stall time without the feedback
//! showing any of them arrive is suspended (a link that died without its interface going
//! down); one packet goes on it every stall time as a probe, and the first feedback that shows
//! it delivering brings it back. The stall time is `stall_after`, at least two round trips and
//! two feedback intervals of that link. When every link is suspended they are all used.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;

use crate::sched::Proportional;
use crate::wire::{DataHeader, FeedbackEntry};

/// How the scheduler's weights are set.
#[derive(Debug, Clone, PartialEq)]
pub enum Weights {
    /// Fixed ratios by link number (`[2, 1]`: two bytes on link 0 for one on link 1). Links
    /// beyond the list have weight 1.
    Fixed(Vec<u32>),
    /// From the delivery rate the feedback measures per link: a link that lost packets since
    /// the previous report gets its delivery rate (what it can carry), one that lost none keeps
    /// its weight or gets a quarter more than it delivered, whichever is larger (so a link that
    /// could carry more gets more until it loses, and weights do not drift while nothing is
    /// lost). Floor: 1/20 of the largest. A new link starts at the mean of the others.
    Measured,
}

/// The sender's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SenderConfig {
    /// The scheduler's weights.
    pub weights: Weights,
    /// How often the receiver reports (its [`crate::ReceiverConfig::feedback_interval`]).
    pub feedback_interval: Duration,
    /// The shortest time without progress that suspends a link.
    pub stall_after: Duration,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            weights: Weights::Fixed(vec![1, 1]),
            feedback_interval: Duration::from_millis(50),
            stall_after: Duration::from_millis(200),
        }
    }
}

/// A usable link, as the caller sees it for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Its number (the scheduler's and the weights').
    pub index: usize,
    /// Its id on the wire (a new id on the same number starts the link's accounting again).
    pub id: u32,
    /// Its round-trip time (the stall time is at least two).
    pub rtt: Duration,
}

/// Counters of one link, for status.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkTxStats {
    /// The link's number.
    pub index: usize,
    /// Its current id.
    pub id: u32,
    /// Packets and bytes sent on it (this id).
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets the receiver has reported received.
    pub delivered: u64,
    /// Packets the receiver has reported missing (gaps in the link sequence).
    pub lost: u64,
    /// The scheduler's weight.
    pub weight: f64,
    /// Measured delivery rate, bytes/s.
    pub rate: f64,
    /// Suspended now.
    pub stalled: bool,
    /// Times it was suspended.
    pub stalls: u64,
}

/// Counters of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderStats {
    /// Packets numbered and sent.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Packets sent as probes on a suspended link.
    pub probes: u64,
    /// Feedback entries applied.
    pub feedback: u64,
}

/// Unreported sends remembered per link at most (beyond, the oldest are forgotten, which only
/// delays a stall).
const UNREPORTED: usize = 1 << 16;

#[derive(Debug, Clone, Default)]
struct LinkTx {
    id: Option<u32>,
    next_link_seq: u32,
    packets: u64,
    bytes: u64,
    /// The latest report (cumulative) and when it came.
    report: FeedbackEntry,
    report_at: Option<Instant>,
    /// (link sequence, send time) of packets the feedback has not shown yet, oldest first:
    /// the front is how long the link has kept the receiver waiting.
    unreported: VecDeque<(u32, Instant)>,
    stall: Duration,
    stalled: bool,
    probe_at: Instant,
    stalls: u64,
    rate: f64,
    /// Its weight from measured delivery (`Weights::Measured`), once it has a rate.
    measured: Option<f64>,
}

/// The sending end. See the module documentation.
#[derive(Debug, Clone)]
pub struct Sender {
    cfg: SenderConfig,
    seq: u64,
    links: Vec<LinkTx>,
    sched: Proportional,
    stats: SenderStats,
    /// Scratch: candidate link numbers.
    cand: Vec<usize>,
}

impl Sender {
    /// A sender numbering from 0.
    pub fn new(cfg: SenderConfig) -> Self {
        let sched = match &cfg.weights {
            Weights::Fixed(w) => {
                Proportional::new(&w.iter().map(|&x| f64::from(x)).collect::<Vec<_>>())
            }
            Weights::Measured => Proportional::default(),
        };
        Sender {
            cfg,
            seq: 0,
            links: Vec::new(),
            sched,
            stats: SenderStats::default(),
            cand: Vec::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    /// Picks the link for a packet of `len` bytes among `links` (those usable now), appends
    /// the data header for it to `out` and returns the link's position in `links`; `None`
    /// (nothing written) when `links` is empty.
    pub fn send(
        &mut self,
        now: Instant,
        links: &[Link],
        len: usize,
        out: &mut Vec<u8>,
    ) -> Option<usize> {
        self.cand.clear();
        let mut probe = None;
        for l in links {
            let stall = self
                .cfg
                .stall_after
                .max(2 * l.rtt + 2 * self.cfg.feedback_interval);
            let tx = self.link(l);
            tx.stall = stall;
            let waiting = tx.unreported.front().map(|&(_, t)| t);
            if !tx.stalled && waiting.is_some_and(|t| now.saturating_since(t) > stall) {
                tx.stalled = true;
                tx.stalls += 1;
                tx.probe_at = now;
            }
            if !tx.stalled {
                self.cand.push(l.index);
            } else if probe.is_none() && now >= tx.probe_at {
                probe = Some(l.index);
            }
        }
        let index = match probe {
            Some(i) => {
                self.stats.probes += 1;
                let tx = &mut self.links[i];
                tx.probe_at = now.saturating_add(tx.stall);
                i
            }
            None if self.cand.is_empty() => {
                // Every link is suspended: use them all rather than none.
                self.cand.extend(links.iter().map(|l| l.index));
                self.sched.pick(&self.cand, len)?
            }
            None => self.sched.pick(&self.cand, len)?,
        };
        let pos = links.iter().position(|l| l.index == index)?;
        let tx = &mut self.links[index];
        let header = DataHeader {
            link: links[pos].id,
            seq: self.seq,
            link_seq: tx.next_link_seq,
        };
        header.emit(out);
        self.seq += 1;
        tx.next_link_seq = tx.next_link_seq.wrapping_add(1);
        tx.packets += 1;
        tx.bytes += len as u64;
        if tx.unreported.len() >= UNREPORTED {
            tx.unreported.pop_front();
        }
        tx.unreported.push_back((header.link_seq, now));
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
        Some(pos)
    }

    /// Applies the receiver's report of what each link delivered.
    pub fn on_feedback(&mut self, now: Instant, entries: impl IntoIterator<Item = FeedbackEntry>) {
        for e in entries {
            let Some(i) = self.links.iter().position(|l| l.id == Some(e.link)) else {
                continue;
            };
            self.stats.feedback += 1;
            let tx = &mut self.links[i];
            let prev = tx.report;
            if e.packets < prev.packets {
                continue; // an older report than the one applied (feedback reordered)
            }
            if e.packets > prev.packets {
                // Progress: the link delivers.
                tx.stalled = false;
            }
            // Everything before the next link sequence was received or lost: not waited for.
            while tx
                .unreported
                .front()
                .is_some_and(|&(s, _)| e.next_link_seq.wrapping_sub(s).wrapping_sub(1) < 1 << 31)
            {
                tx.unreported.pop_front();
            }
            if let Some(at) = tx.report_at {
                let dt = now.saturating_since(at).as_secs_f64();
                if dt >= 1e-3 {
                    let sample = e.bytes.saturating_sub(prev.bytes) as f64 / dt;
                    tx.rate = if tx.rate == 0.0 {
                        sample
                    } else {
                        tx.rate + (sample - tx.rate) / 4.0
                    };
                }
            }
            let lost_before = u64::from(prev.next_link_seq).saturating_sub(prev.packets);
            let lost_now = u64::from(e.next_link_seq).saturating_sub(e.packets);
            let lossless = lost_now <= lost_before;
            tx.report = e;
            tx.report_at = Some(now);
            if tx.rate > 0.0 {
                tx.measured = Some(if lossless {
                    tx.measured.unwrap_or(0.0).max(tx.rate * 1.25)
                } else {
                    tx.rate
                });
            }
            self.apply_measured();
        }
    }

    /// Whether the link numbered `index` is stalled: its packets went unreported for its
    /// stall time (found when a packet is sent with it among the links) and no report has
    /// shown it delivering since.
    pub fn is_stalled(&self, index: usize) -> bool {
        self.links.get(index).is_some_and(|l| l.stalled)
    }

    /// The next sequence number.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Each link's counters.
    pub fn links(&self) -> impl Iterator<Item = LinkTxStats> + '_ {
        self.links.iter().enumerate().filter_map(|(index, l)| {
            Some(LinkTxStats {
                index,
                id: l.id?,
                packets: l.packets,
                bytes: l.bytes,
                delivered: l.report.packets,
                lost: u64::from(l.report.next_link_seq).saturating_sub(l.report.packets),
                weight: self.sched.weight(index),
                rate: l.rate,
                stalled: l.stalled,
                stalls: l.stalls,
            })
        })
    }

    /// The state of link `l`, started again when its id changed.
    fn link(&mut self, l: &Link) -> &mut LinkTx {
        if self.links.len() <= l.index {
            self.links.resize_with(l.index + 1, LinkTx::default);
        }
        let tx = &mut self.links[l.index];
        if tx.id != Some(l.id) {
            *tx = LinkTx {
                id: Some(l.id),
                stalls: tx.stalls,
                ..LinkTx::default()
            };
            self.apply_measured();
        }
        &mut self.links[l.index]
    }

    /// With `Weights::Measured`: each link's measured weight, the mean of the others' for a
    /// link without one yet, and a floor of 1/20 of the largest.
    fn apply_measured(&mut self) {
        if self.cfg.weights != Weights::Measured {
            return;
        }
        let known: Vec<f64> = self.links.iter().filter_map(|l| l.measured).collect();
        if known.is_empty() {
            return;
        }
        let mean = known.iter().sum::<f64>() / known.len() as f64;
        let max = known.iter().copied().fold(0.0, f64::max);
        for i in 0..self.links.len() {
            let w = self.links[i].measured.unwrap_or(mean).max(max / 20.0);
            self.sched.set_weight(i, w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Datagram, parse};

    fn ms(x: u64) -> Instant {
        Instant::from_micros(x * 1000)
    }

    fn links() -> [Link; 2] {
        [
            Link {
                index: 0,
                id: 10,
                rtt: Duration::from_millis(10),
            },
            Link {
                index: 1,
                id: 11,
                rtt: Duration::from_millis(10),
            },
        ]
    }

    fn header(out: &[u8]) -> DataHeader {
        let mut b = out.to_vec();
        b.push(0x45);
        match parse(&b) {
            Ok(Datagram::Data { header, .. }) => header,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn packets_are_numbered_and_split_by_the_ratio() {
        let mut s = Sender::new(SenderConfig {
            weights: Weights::Fixed(vec![2, 1]),
            ..Default::default()
        });
        let mut on = [0, 0];
        for k in 0..30u64 {
            let mut out = Vec::new();
            let pos = s.send(ms(0), &links(), 1000, &mut out).unwrap();
            let h = header(&out);
            assert_eq!(h.seq, k);
            assert_eq!(h.link, links()[pos].id);
            assert_eq!(u64::from(h.link_seq), on[pos]);
            on[pos] += 1;
        }
        assert_eq!(on, [20, 10]);
        assert_eq!(s.send(ms(0), &[], 1000, &mut Vec::new()), None);
    }

    fn report(link: u32, packets: u64, next: u32) -> FeedbackEntry {
        FeedbackEntry {
            link,
            packets,
            bytes: packets * 1000,
            next_link_seq: next,
        }
    }

    #[test]
    fn a_link_that_stops_delivering_is_suspended_probed_and_brought_back() {
        let mut s = Sender::new(SenderConfig::default());
        let mut sent = [0u32; 2];
        let mut t = 0;
        // 1 ms apart; feedback every 50 ms says link 0 delivers everything, link 1 nothing
        // after 100 ms.
        let mut probes_on_1 = 0;
        while t < 600 {
            let mut out = Vec::new();
            let pos = s.send(ms(t), &links(), 1000, &mut out).unwrap();
            sent[pos] += 1;
            if t > 310 && pos == 1 {
                probes_on_1 += 1;
            }
            if t % 50 == 0 {
                let ones = if t <= 100 { sent[1] } else { sent[1].min(50) };
                s.on_feedback(
                    ms(t),
                    [
                        report(10, u64::from(sent[0]), sent[0]),
                        report(11, u64::from(ones), ones),
                    ],
                );
            }
            t += 1;
        }
        let l1 = s.links().find(|l| l.index == 1).unwrap();
        assert!(l1.stalled, "{l1:?}");
        assert!(s.is_stalled(1) && !s.is_stalled(0) && !s.is_stalled(7));
        assert_eq!(l1.stalls, 1);
        // While suspended: one probe per stall time (200 ms), not half the packets.
        assert!(probes_on_1 <= 2, "{probes_on_1} packets on the dead link");
        // It delivers again: back at once.
        s.on_feedback(ms(t), [report(11, u64::from(sent[1]), sent[1])]);
        assert!(!s.links().find(|l| l.index == 1).unwrap().stalled);
        assert!(!s.is_stalled(1));
    }

    #[test]
    fn every_link_suspended_means_all_are_used() {
        let mut s = Sender::new(SenderConfig::default());
        for t in 0..1000 {
            s.send(ms(t), &links(), 100, &mut Vec::new()).unwrap();
        }
        assert!(s.links().all(|l| l.stalled));
        let mut on = [0; 2];
        for t in 1000..1100 {
            on[s.send(ms(t), &links(), 100, &mut Vec::new()).unwrap()] += 1;
        }
        assert!(on[0] > 30 && on[1] > 30, "{on:?}");
    }

    #[test]
    fn measured_weights_follow_what_each_link_delivers() {
        let mut s = Sender::new(SenderConfig {
            weights: Weights::Measured,
            ..Default::default()
        });
        // Offered 100 packets of 1000 B per 10 ms; link 0 delivers up to 50 per 10 ms (5 MB/s),
        // link 1 up to 25 (2.5 MB/s); what is over is lost.
        let mut sent = [0u64; 2];
        let mut got = [0u64; 2];
        for round in 0..200u64 {
            let mut this = [0u64; 2];
            for _ in 0..100 {
                let pos = s
                    .send(ms(round * 10), &links(), 1000, &mut Vec::new())
                    .unwrap();
                this[pos] += 1;
            }
            for (i, cap) in [50u64, 25].into_iter().enumerate() {
                sent[i] += this[i];
                got[i] += this[i].min(cap);
            }
            s.on_feedback(
                ms(round * 10 + 5),
                (0..2).map(|i| FeedbackEntry {
                    link: 10 + i as u32,
                    packets: got[i],
                    bytes: got[i] * 1000,
                    next_link_seq: sent[i] as u32,
                }),
            );
        }
        let st: Vec<LinkTxStats> = s.links().collect();
        let share = st[0].weight / (st[0].weight + st[1].weight);
        assert!(
            (0.55..0.8).contains(&share),
            "share of link 0 {share}: {st:?}"
        );
        let delivered = (st[0].rate + st[1].rate) / 1e6;
        assert!(delivered > 6.0, "{delivered} MB/s of 7.5: {st:?}");
    }

    #[test]
    fn a_new_id_on_a_link_starts_its_accounting_again() {
        let mut s = Sender::new(SenderConfig::default());
        let mut l = links();
        for t in 0..10 {
            s.send(ms(t), &l, 100, &mut Vec::new());
        }
        l[1].id = 99;
        let mut out = Vec::new();
        while s.send(ms(20), &l, 100, &mut out) != Some(1) {
            out.clear();
        }
        let h = header(&out);
        assert_eq!((h.link, h.link_seq), (99, 0));
        // A report for the old id is ignored.
        s.on_feedback(ms(21), [report(11, 5, 5)]);
        assert_eq!(s.links().find(|x| x.index == 1).unwrap().delivered, 0);
    }
}
