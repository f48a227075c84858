//! What the measured CBR stream's one-way delays could at best have been, message by message,
//! from the links joining its two hosts directly (the two-node form; a topology whose hosts
//! share no link records nothing):
//!
//! - a **lower bound** (`RunRecord::cbr_bound`): while several of those links are up (and hold
//!   the client's address), the message's earliest arrival over any of them with empty queues
//!   (next delivery opportunity of a trace, serialisation, per-frame airtime, propagation);
//!   while exactly one is, the messages also queue behind each other on it, from an empty
//!   queue when it became the only one (an in-order stream cannot deliver them faster than
//!   that link carries them), unless another link comes up first: each message of the period
//!   is then bounded by the time it had waited until then instead; 0 while none is up.
//!   Losses, congestion control and other traffic only add delay: no path manager or
//!   scheduler gets a message below its bound.
//! - the delay **on each link alone** (`RunRecord::cbr_alone`): the stream by itself on an
//!   unloaded copy of the link (its capacity and propagation delay; no loss, jitter or queue
//!   limit) from the start of the run, a message generated while the link is down sent when
//!   it comes back: whether that link could have carried the stream.
//!
//! Neither changes the run: the copies are the links' specifications, not their state.

use braid_core::Instant;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::World;
use crate::link::Direction;

/// The measured stream's shadows of the links joining its hosts.
pub(super) struct StreamShadow {
    /// (link, direction) of each link joining the hosts, the sender's side first.
    links: Vec<(usize, usize)>,
    /// An unloaded copy of each, carrying the stream alone, and the messages (indices into the
    /// record) generated while it was down.
    alone: Vec<(Direction, Vec<usize>)>,
    /// While exactly one link is up: it (an index into `links`), the first message generated
    /// since, and an unloaded copy of it from that moment.
    single: Option<(usize, usize, Direction)>,
    /// The message size.
    bytes: usize,
}

/// Microseconds from `from` to `to`, saturated to a u32.
fn micros(from: Instant, to: Instant) -> u32 {
    to.saturating_since(from)
        .as_micros()
        .min(u128::from(u32::MAX)) as u32
}

impl World<'_> {
    /// The links joining the measured application's hosts, sender's side first; empty when
    /// none does.
    fn stream_links(&self) -> Vec<(usize, usize)> {
        let Some(app) = self.apps.first() else {
            return Vec::new();
        };
        let (from, to) = (self.eps[app.sender].node, self.eps[app.receiver].node);
        let mut out = Vec::new();
        for (i, l) in self.links.iter().enumerate() {
            match (l.ends[0].0, l.ends[1].0) {
                (a, b) if a == from && b == to => out.push((i, 0)),
                (a, b) if a == to && b == from => out.push((i, 1)),
                _ => {}
            }
        }
        out
    }

    /// Whether link direction `(l, d)` can carry the stream now: up, the client's address on it.
    fn carries(&self, (l, d): (usize, usize)) -> bool {
        self.links[l].addr_present && self.links[l].dirs[d].is_up()
    }

    /// Records the bounds of the measured CBR stream's message of `bytes` generated now
    /// (after `RunRecord::cbr_generated` got it).
    pub(super) fn record_bounds(&mut self, bytes: usize) {
        if self.shadow.is_none() {
            let links = self.stream_links();
            if links.is_empty() {
                return;
            }
            let alone = links
                .iter()
                .map(|&(l, d)| (self.links[l].dirs[d].unloaded(), Vec::new()))
                .collect();
            self.rec.cbr_alone = vec![Vec::new(); links.len()];
            self.shadow = Some(StreamShadow {
                links,
                alone,
                single: None,
                bytes,
            });
        }
        let now = self.now;
        let index = self.rec.cbr_bound.len();
        let Some(mut sh) = self.shadow.take() else {
            return;
        };
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        let up: Vec<usize> = (0..sh.links.len())
            .filter(|&k| self.carries(sh.links[k]))
            .collect();
        // Alone on each link.
        for (k, &(l, d)) in sh.links.iter().enumerate() {
            let (copy, waiting) = &mut sh.alone[k];
            let delay = if up.contains(&k) {
                if let Some(bps) = self.links[l].dirs[d].rate() {
                    copy.set_rate(bps);
                }
                copy.send(now, bytes, &mut rng)
                    .map_or(u32::MAX, |t| micros(now, t))
            } else {
                waiting.push(index);
                u32::MAX
            };
            self.rec.cbr_alone[k].push(delay);
        }
        // The lower bound.
        let bound = match up[..] {
            [] => 0,
            [k] => {
                let (l, d) = sh.links[k];
                let live = &self.links[l].dirs[d];
                let copy = match &mut sh.single {
                    Some((s, _, copy)) if *s == k => copy,
                    slot => &mut slot.insert((k, index, live.unloaded())).2,
                };
                if let Some(bps) = live.rate() {
                    copy.set_rate(bps);
                }
                copy.send(now, bytes, &mut rng)
                    .map_or(0, |t| micros(now, t))
            }
            _ => up
                .iter()
                .filter_map(|&k| {
                    let (l, d) = sh.links[k];
                    self.links[l].dirs[d].earliest_arrival(now, bytes)
                })
                .min()
                .map_or(0, |t| micros(now, t)),
        };
        if up.len() != 1 {
            sh.single = None;
        }
        self.rec.cbr_bound.push(bound);
        self.shadow = Some(sh);
    }

    /// A link's state or the client's address on it changed: messages waiting for a link
    /// that is back go on its copy now; if the single link up is no longer the only one, the
    /// messages generated while it was could have waited for this change instead of queueing
    /// on it, and their bound becomes at most the time they waited until now.
    pub(super) fn bound_links_changed(&mut self) {
        let Some(mut sh) = self.shadow.take() else {
            return;
        };
        let now = self.now;
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        let up: Vec<usize> = (0..sh.links.len())
            .filter(|&k| self.carries(sh.links[k]))
            .collect();
        for &k in &up {
            let (l, d) = sh.links[k];
            let (copy, waiting) = &mut sh.alone[k];
            if let Some(bps) = self.links[l].dirs[d].rate() {
                copy.set_rate(bps);
            }
            for i in waiting.drain(..) {
                let at = copy.send(now, sh.bytes, &mut rng).ok();
                let g = Instant::from_micros(self.rec.cbr_generated[i]);
                self.rec.cbr_alone[k][i] = at.map_or(u32::MAX, |t| micros(g, t));
            }
        }
        if let Some((k, first, _)) = sh.single
            && up != [k]
        {
            let t = now.micros();
            let bounds = self.rec.cbr_generated[first..]
                .iter()
                .zip(&mut self.rec.cbr_bound[first..]);
            for (g, bound) in bounds {
                let waited = t.saturating_sub(*g).min(u64::from(u32::MAX)) as u32;
                *bound = (*bound).min(waited);
            }
            sh.single = None;
        }
        self.shadow = Some(sh);
    }
}
