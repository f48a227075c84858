//! The QoE-driven priority scheduler of seed 004 (§IV.B, Appendix B; SPEC M2).
//!
//! Per path, `if_quality` in [0, 10000] starts at 10000 and follows `update_if_quality`: −100
//! for a loss found by fast retransmit (if at least 100), −1000 for a retransmission timeout
//! (if at least 1000), +1 per ACK (up to 10000). Its band (good 8001–10000, moderate
//! 5001–8000, bad 0–5000; seed 004 Table 2) and the application priority p (1 highest … 6)
//! scale the path's *normal delivery speed* NDS (`send_packet`):
//!
//! | band | p1 | p2 | p3 | p4 | p5 | p6 |
//! |---|---|---|---|---|---|---|
//! | good | NDS | NDS | NDS | NDS − NDS/32 | NDS − NDS/16 | NDS − NDS/8 |
//! | moderate | NDS | NDS − NDS/64 | NDS − NDS/32 | NDS − NDS/16 | NDS − NDS/8 | NDS − NDS/4 |
//! | bad | NDS | NDS − NDS/2 | NDS/4 | NDS/8 | NDS/8 | NDS/8 |
//!
//! (the bad row's p3 is NDS − NDS/2 − NDS/4, p4–p6 NDS − NDS/2 − NDS/4 − NDS/8, computed with
//! the seed's shifts).
//!
//! **What NDS is here.** The seed does not define NDS beyond "normal delivery speed". A path's
//! delivery speed in a window-based transport is its congestion window per round trip
//! (cwnd / SRTT), so NDS is the path's congestion window and the scaled NDS is the share of
//! that window the scheduler may fill with data: a path whose scaled window is NDS − NDS/8
//! carries at most 7/8 of what its congestion controller allows, i.e. 7/8 of its delivery speed
//! at the same RTT. This needs no timer (unlike pacing), keeps the congestion controller in
//! charge of the path, and makes low-priority data yield capacity on degraded paths, the
//! seed's aim ("prevent applications with minimal QoS requirements from occupying more
//! bandwidth", §IV.B). A path always may have one segment in flight, so that a throttled path
//! still earns the ACKs that raise its `if_quality` again.
//!
//! **The path** (App. B `main`): among the usable paths with room in their scaled window, the
//! one with the lowest smoothed RTT, equal RTTs (to the millisecond) broken by the lowest loss
//! rate. Each path is filled up to its scaled window, which a congestion controller at
//! equilibrium holds at the path's bandwidth-delay product: the data in flight is distributed
//! among the paths in proportion to their BDPs (§IV.B), the fast paths first.
//!
//! **The priority** of a segment is the application's (per write, or per connection:
//! [`Context::priority`]), else the scheduler's own (`qoe:priority=N`, default 1).

use std::cmp::Ordering;

use super::{Context, PathView, Scheduler, candidates};
use crate::PathId;

/// An application priority, 1 (highest) to 6 (seed 004 §III.B, App. B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(u8);

impl Priority {
    pub const HIGHEST: Priority = Priority(1);
    pub const LOWEST: Priority = Priority(6);

    /// `None` outside 1..=6.
    pub const fn new(p: u8) -> Option<Priority> {
        if p >= 1 && p <= 6 {
            Some(Priority(p))
        } else {
            None
        }
    }

    pub const fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority::HIGHEST
    }
}

/// The quality band of an `if_quality` value (seed 004 Table 2, App. B `send_packet`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Band {
    /// 8001–10000.
    Good,
    /// 5001–8000.
    Moderate,
    /// 0–5000.
    Bad,
}

impl Band {
    pub fn of(if_quality: u32) -> Band {
        match if_quality {
            8001.. => Band::Good,
            5001..=8000 => Band::Moderate,
            _ => Band::Bad,
        }
    }
}

/// The largest `if_quality`, and its start value.
pub const MAX_QUALITY: u32 = 10_000;

/// Seed 004 App. B `send_packet`: the delivery speed allowed for `priority` on a path of
/// `band` whose normal delivery speed is `nds` (any unit; braid passes the window in bytes).
pub fn scaled_nds(nds: u64, band: Band, priority: Priority) -> u64 {
    match (band, priority.get()) {
        (Band::Good, 1..=3) => nds,
        (Band::Good, 4) => nds - (nds >> 5),
        (Band::Good, 5) => nds - (nds >> 4),
        (Band::Good, _) => nds - (nds >> 3),
        (Band::Moderate, 1) => nds,
        (Band::Moderate, 2) => nds - (nds >> 6),
        (Band::Moderate, 3) => nds - (nds >> 5),
        (Band::Moderate, 4) => nds - (nds >> 4),
        (Band::Moderate, 5) => nds - (nds >> 3),
        (Band::Moderate, _) => nds - (nds >> 2),
        (Band::Bad, 1) => nds,
        (Band::Bad, 2) => nds - (nds >> 1),
        (Band::Bad, 3) => nds - (nds >> 1) - (nds >> 2),
        (Band::Bad, _) => nds - (nds >> 1) - (nds >> 2) - (nds >> 3),
    }
}

/// One path's `if_quality` and the counters it last saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IfQuality {
    value: u32,
    fast_retransmits: u64,
    rtos: u64,
    acks: u64,
}

impl IfQuality {
    /// At the maximum, counting events from the path's counters as they are now.
    pub fn new(view: &PathView) -> Self {
        IfQuality {
            value: MAX_QUALITY,
            fast_retransmits: view.fast_retransmits,
            rtos: view.rtos,
            acks: view.acks,
        }
    }

    pub fn value(&self) -> u32 {
        self.value
    }

    /// Seed 004 App. B `update_if_quality`, once per event since the last update: fast
    /// retransmits, then timeouts, then ACKs.
    pub fn update(&mut self, view: &PathView) {
        let losses = view.fast_retransmits.saturating_sub(self.fast_retransmits);
        let rtos = view.rtos.saturating_sub(self.rtos);
        let acks = view.acks.saturating_sub(self.acks);
        (self.fast_retransmits, self.rtos, self.acks) =
            (view.fast_retransmits, view.rtos, view.acks);
        // "if if_quality ≥ 100 then if_quality −= 100", as many times as there were losses.
        self.value -= 100 * (u64::from(self.value / 100).min(losses) as u32);
        self.value -= 1000 * (u64::from(self.value / 1000).min(rtos) as u32);
        // "if if_quality ≤ 9999 then if_quality += 1", per ACK.
        self.value = (u64::from(self.value) + acks).min(u64::from(MAX_QUALITY)) as u32;
    }
}

/// The QoE / priority scheduler. See the [module documentation](self).
#[derive(Debug, Clone, Default)]
pub struct Qoe {
    priority: Priority,
    /// Per path, ordered by id; paths that closed are dropped.
    quality: Vec<(PathId, IfQuality)>,
}

impl Qoe {
    /// With `priority` for data the application wrote without one.
    pub fn new(priority: Priority) -> Self {
        Qoe {
            priority,
            quality: Vec::new(),
        }
    }

    /// The `if_quality` of a path, once the scheduler has seen it.
    pub fn if_quality(&self, id: PathId) -> Option<u32> {
        self.quality
            .iter()
            .find(|(p, _)| *p == id)
            .map(|(_, q)| q.value())
    }

    fn refresh(&mut self, paths: &[PathView]) {
        self.quality
            .retain(|(id, _)| paths.iter().any(|p| p.id == *id));
        for v in paths {
            match self.quality.iter_mut().find(|(id, _)| *id == v.id) {
                Some((_, q)) => q.update(v),
                None => self.quality.push((v.id, IfQuality::new(v))),
            }
        }
    }

    /// Whether one more segment fits the path's scaled window (one always may be in flight).
    fn has_room(&self, v: &PathView, mss: u64, priority: Priority) -> bool {
        if !v.has_room {
            return false;
        }
        let q = self.if_quality(v.id).unwrap_or(MAX_QUALITY);
        v.in_flight == 0 || v.in_flight + mss <= scaled_nds(v.cwnd, Band::of(q), priority)
    }
}

impl Scheduler for Qoe {
    fn select(&mut self, cx: &Context<'_>) -> Option<PathId> {
        self.refresh(cx.paths);
        let priority = cx.priority.unwrap_or(self.priority);
        candidates(cx.paths, cx.exclude)
            .filter(|v| self.has_room(v, cx.mss, priority))
            .min_by(|a, b| by_rtt_then_loss(a, b))
            .map(|v| v.id)
    }

    fn opportunistic_retransmission(&self) -> bool {
        // A modification of the default scheduler (seed 004 §IV.B): stock MPTCP's
        // opportunistic retransmission stays.
        true
    }

    fn name(&self) -> &'static str {
        "qoe"
    }
}

/// App. B `main`: the lowest RTT (to the millisecond), then the lowest loss rate, then the
/// lowest path id.
fn by_rtt_then_loss(a: &PathView, b: &PathView) -> Ordering {
    let ms = |v: &PathView| v.srtt.as_millis();
    ms(a)
        .cmp(&ms(b))
        .then(a.loss_rate.total_cmp(&b.loss_rate))
        .then(a.id.cmp(&b.id))
}
