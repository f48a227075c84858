//! What changes a link's availability: scripted actions (blockage, address loss and return,
//! backup flags), the radio (a beacon's signal sets rate, losses and coverage), liveness
//! probes. In the two-node form a link is also one of the client's interfaces, whose address
//! and signal its path manager hears.

use std::time::Duration;

use braid_core::{AddrId, Instant};
use braid_pm as pm;
use rand::RngExt;

use super::net::Radio;
use super::{Kind, World};
use crate::mobility::Mobility;
use crate::radio::{Coverage, CoverageChange, Crossing, Effect, SignalWatch};
use crate::record::LossEvent;
use crate::scenario::{Action, AddressPolicy, SignalSeries, Variant};

impl World<'_> {
    pub(super) fn action(&mut self, i: usize) {
        let (_, l, action) = self.variant.timeline[i];
        match action {
            Action::Down => self.link_lost(l, false),
            Action::Up => self.link_back(l, false),
            Action::AddrLost => self.link_lost(l, true),
            Action::AddrBack => self.link_back(l, true),
            Action::Backup | Action::Primary => {
                let backup = action == Action::Backup;
                self.links[l].backup = backup;
                let addr = AddrId(l as u8);
                let ids: Vec<_> = self.eps[0]
                    .conn
                    .paths()
                    .filter(|p| p.local == addr)
                    .map(|p| p.id)
                    .collect();
                for id in ids {
                    let _ = self.eps[0].conn.set_backup(id, backup);
                }
            }
        }
        self.pump_all();
    }

    /// The link stops carrying packets. With `addr`, the client's address goes too: the
    /// transport learns it after its detection delay (scripted losses, seed 002), or the network
    /// manager removes it after that delay (radio coverage, `address = "lose"`).
    fn link_lost(&mut self, l: usize, addr: bool) {
        // The application's stream position (the host's connection behind a tunnel).
        let snd = self.apps[0].sender;
        let sent = self.eps[snd].app_conn().stream_sent();
        self.link_lost_at(l, addr, self.now, sent, true);
    }

    /// As [`World::link_lost`], the loss dated `at` with the sender's stream position `sent`
    /// then (a radio notices a lost link some beacons after the signal went).
    fn link_lost_at(&mut self, l: usize, addr: bool, at: Instant, sent: u64, scripted: bool) {
        if !self.links[l].covered {
            return;
        }
        let now = self.now;
        self.links[l].covered = false;
        self.links[l].loss_epoch = self.links[l].loss_epoch.wrapping_add(1);
        for d in &mut self.links[l].dirs {
            d.set_up(now, false);
        }
        self.bound_links_changed();
        // In a topology a radio link that fades out is the routing's business, not a loss
        // event of the measured connection (scripted ones are).
        if self.legacy() || scripted {
            self.rec.loss_events.push(LossEvent {
                t: at.since_epoch(),
                link: l,
                since: self.links[l].since,
                sent_before: sent,
            });
        }
        if addr {
            let delay = self.variant.config.remove_addr_delay;
            let epoch = self.links[l].loss_epoch;
            self.schedule(
                now + delay,
                Kind::AddrGone {
                    link: l as u16,
                    epoch,
                },
            );
        }
    }

    pub(super) fn addr_gone(&mut self, l: usize, epoch: u32) {
        let link = &mut self.links[l];
        if link.covered || link.loss_epoch != epoch || !link.addr_present {
            return;
        }
        link.addr_present = false;
        self.bound_links_changed();
        self.eps[0].conn.remove_local_addr(AddrId(l as u8));
        self.client_pm_event(pm::Event::LocalAddrRemoved {
            iface: pm::IfaceId(l as u32),
            id: pm::AddrId(l as u8),
        });
        self.pump_all();
    }

    fn link_back(&mut self, l: usize, addr: bool) {
        if self.links[l].covered {
            return;
        }
        let now = self.now;
        self.links[l].covered = true;
        self.links[l].since = now.since_epoch();
        for d in &mut self.links[l].dirs {
            d.set_up(now, true);
        }
        self.bound_links_changed();
        if addr || !self.links[l].addr_present {
            if self.links[l].addr_present {
                // Back before the loss was noticed.
                self.eps[0].conn.local_addr_restored(AddrId(l as u8));
            } else {
                self.links[l].addr_present = true;
                self.bound_links_changed();
                let ip = self.topo.nodes[self.eps[0].node].ifaces[l].addr;
                self.client_pm_event(pm::Event::LocalAddrNew {
                    iface: pm::IfaceId(l as u32),
                    id: pm::AddrId(l as u8),
                    addr: Some(ip.into()),
                });
            }
        }
    }

    /// A radio beacon: a new signal sample, the link's rate, losses and coverage follow it, and
    /// the path manager hears it.
    pub(super) fn beacon(&mut self, l: usize) {
        let t = self.now.since_epoch();
        let Some(rss) = self.sample_rss(l, t) else {
            return;
        };
        let lose_addr = self.links[l].address == AddressPolicy::Lose;
        let period = self.links[l]
            .radio
            .as_ref()
            .map_or(Duration::from_secs(1), |r| r.spec.beacon);
        if let Some(r) = &self.links[l].radio {
            // Packets follow the instantaneous signal; below the cut-off none gets through.
            let Effect { audible, rate, per } = r.spec.effect(rss);
            let adapt = r.spec.adapt_rate;
            let link = &mut self.links[l];
            for (d, cap) in link.dirs.iter_mut().zip(link.caps) {
                if adapt {
                    d.set_rate(rate.min(cap));
                }
                d.set_radio_per(per);
            }
            // Coverage is declared lost after LOSS_BEACONS inaudible beacons (dated from the
            // first) and back after BACK_BEACONS audible ones.
            let link = &mut self.links[l];
            let (first_below, change) = link.coverage.count(audible, link.covered);
            if audible {
                link.below_since = None;
            } else if first_below {
                let snd = self.apps[0].sender;
                let sent = self.eps[snd].app_conn().stream_sent();
                self.links[l].below_since = Some((self.now, sent));
            }
            let link = &self.links[l];
            let lose = change == CoverageChange::Lost;
            let back = change == CoverageChange::Back;
            if lose {
                let (at, sent) = link.below_since.unwrap_or((self.now, 0));
                self.link_lost_at(l, lose_addr, at, sent, false);
            } else if back {
                self.link_back(l, lose_addr);
            }
            // A cross-layer path manager hears the radio: beacons from an access point, or
            // none. A stock one does not (seed 000: that is the difference).
            if (lose || back) && self.legacy() && self.variant.pm.mode.uses_signal() {
                self.client_pm_event(pm::Event::IfaceUpdated {
                    iface: pm::IfaceId(l as u32),
                    up: back,
                });
            }
            if !audible || !self.legacy() {
                self.schedule(self.now + period, Kind::Beacon { link: l as u16 });
                self.pump_all();
                return;
            }
        }
        // An audible beacon is a signal sample.
        {
            // Recovery metric: the link's own smoothing crossing its threshold (plus the
            // hysteresis) upwards, until it falls below the threshold again.
            let spec = &self.variant.scenario.links[l];
            let (alpha, hysteresis) = (spec.alpha, spec.hysteresis_db);
            let th = self.rec.thresholds[l];
            let (s, crossing) = self.links[l].watch.sample(rss, alpha, th, hysteresis);
            match crossing {
                Some(Crossing::Up) => self.recovery(l),
                Some(Crossing::Down) => {
                    if let Some(r) = self.rec.recoveries.iter_mut().rev().find(|r| r.link == l)
                        && r.first_data.is_none()
                        && r.lost.is_none()
                    {
                        r.lost = Some(t);
                    }
                }
                None => {}
            }
            self.rec
                .rss
                .push((self.now.micros(), l as u8, rss as f32, s as f32));
            self.client_pm_event(pm::Event::Signal {
                iface: pm::IfaceId(l as u32),
                rssi_dbm: rss,
            });
            self.pump(0);
        }
        self.schedule(self.now + period, Kind::Beacon { link: l as u16 });
        self.pump_all();
    }

    /// The signal strength on link `l` at time `t`: replayed, or from distance and shadowing.
    fn sample_rss(&mut self, l: usize, t: Duration) -> Option<f64> {
        if self.variant.signals[l].is_none() && !self.legacy() {
            return self.node_rss(l, t);
        }
        let mut idx = self.links[l].radio.as_ref().map_or(0, |r| r.replay_idx);
        let rss = vehicle_rss(
            self.variant.signals[l].as_ref(),
            &mut idx,
            self.links[l].radio.as_mut(),
            self.mobility.as_ref(),
            t,
        );
        if let Some(r) = self.links[l].radio.as_mut() {
            r.replay_idx = idx;
        }
        rss
    }

    /// The signal of a link between two nodes: distance between their positions, shadowing
    /// that decorrelates with their movement (and with time, given a coherence time).
    fn node_rss(&mut self, l: usize, t: Duration) -> Option<f64> {
        let [(a, _), (b, _)] = self.links[l].ends;
        let pa = self.nodes[a].motion.as_ref()?.position(t);
        let pb = self.nodes[b].motion.as_ref()?.position(t);
        let now = self.now;
        let r = self.links[l].radio.as_mut()?;
        let moved = match r.last {
            None => 0.0,
            Some((at, qa, qb)) => {
                let walked = pa.dist(qa) + pb.dist(qb);
                let drift = r.spec.coherence.map_or(0.0, |c| {
                    now.saturating_since(at).as_secs_f64() / c.as_secs_f64()
                        * r.spec.decorrelation_m
                });
                walked + drift
            }
        };
        r.last = Some((now, pa, pb));
        let rss = r.spec.mean_rss(pa.dist(pb)) + r.shadowing.advance(moved);
        r.rss = Some(rss);
        Some(rss)
    }

    /// Liveness probes answered over a link that works both ways: each end hears its peer is
    /// alive.
    pub(super) fn probe(&mut self) {
        if self.links.iter().any(|l| l.dirs.iter().all(|d| d.is_up())) {
            for e in 0..self.eps.len() {
                self.eps[e].conn.peer_alive(self.now);
            }
            self.pump_all();
        }
        if let Some(every) = self.variant.scenario.connection.liveness_probe {
            self.schedule(self.now + every.0, Kind::Probe);
        }
    }
}

/// The signal of a two-node scenario's link at `t`: the replayed series (from position `idx`,
/// which it advances), else the radio's mean at the vehicle's distance to the nearest access
/// point plus the shadowing where it is.
fn vehicle_rss(
    series: Option<&SignalSeries>,
    idx: &mut usize,
    radio: Option<&mut Radio>,
    mobility: Option<&Mobility>,
    t: Duration,
) -> Option<f64> {
    if let Some(series) = series {
        while *idx + 1 < series.len() && series[*idx + 1].0 <= t {
            *idx += 1;
        }
        return series.get(*idx).map(|&(_, v)| v);
    }
    let mobility = mobility?;
    let p = mobility.position(t);
    let (_, d) = mobility.nearest(t)?;
    let r = radio?;
    let shadow = r.shadowing.at(p.x, p.y);
    let _ = r.rng.random::<u8>();
    Some(r.spec.mean_rss(d) + shadow)
}

/// One beacon of a two-node scenario's radio or signal-replay link, as the simulator hears it.
#[derive(Debug, Clone, PartialEq)]
pub struct Beacon {
    pub t: Duration,
    pub link: usize,
    pub rss: f64,
    /// With a radio model: what the sample does to the link (rate, losses; nothing gets
    /// through when it is not audible). A replay without one only informs the path manager.
    pub effect: Option<Effect>,
    /// The link's coverage is lost at this beacon; the loss dates from this earlier time (the
    /// first beacon of the run below the cut-off).
    pub lost_since: Option<Duration>,
    /// The link's coverage is back at this beacon.
    pub back: bool,
    /// A heard sample that took the link's smoothed signal across its threshold (the
    /// recovery metric's start and missed end).
    pub crossing: Option<Crossing>,
}

impl Beacon {
    /// Whether the path manager hears this sample (an audible beacon, or a replayed sample).
    pub fn heard(&self) -> bool {
        self.effect.is_none_or(|e| e.audible)
    }
}

/// Every beacon of the radio and signal-replay links of a two-node variant run with `seed`, in
/// time order: the samples, rates, losses and coverage changes the simulator applies (the same
/// models, positions and random streams), for the lab to apply to a real link in real time.
/// Scripted changes of the same links are not in it.
pub fn radio_beacons(variant: &Variant, seed: u64) -> Vec<Beacon> {
    let s = &variant.scenario;
    let mobility = super::vehicle(variant, seed);
    let mut out = Vec::new();
    for (l, spec) in variant.radios.iter().enumerate() {
        let series = variant.signals[l].as_ref();
        if spec.is_none() && series.is_none() {
            continue;
        }
        let (shadow_seed, radio_seed) = super::net::two_node_radio_seeds(seed, l);
        let mut radio = spec
            .clone()
            .map(|spec| Radio::new(spec, shadow_seed, radio_seed));
        let period = spec.as_ref().map_or(Duration::from_secs(1), |r| r.beacon);
        let (mut idx, mut coverage, mut covered, mut below_since) =
            (0, Coverage::default(), true, None);
        let mut watch = SignalWatch::default();
        let link = &s.links[l];
        let mut t = Duration::ZERO;
        while t <= s.duration.0 {
            let Some(rss) = vehicle_rss(series, &mut idx, radio.as_mut(), mobility.as_ref(), t)
            else {
                break;
            };
            let mut b = Beacon {
                t,
                link: l,
                rss,
                effect: None,
                lost_since: None,
                back: false,
                crossing: None,
            };
            if let Some(r) = &radio {
                let e = r.spec.effect(rss);
                let (first_below, change) = coverage.count(e.audible, covered);
                if e.audible {
                    below_since = None;
                } else if first_below {
                    below_since = Some(t);
                }
                match change {
                    CoverageChange::Lost => {
                        covered = false;
                        b.lost_since = Some(below_since.unwrap_or(t));
                    }
                    CoverageChange::Back => {
                        covered = true;
                        b.back = true;
                    }
                    CoverageChange::None => {}
                }
                b.effect = Some(e);
            }
            if b.heard() {
                b.crossing = watch
                    .sample(rss, link.alpha, link.threshold_dbm, link.hysteresis_db)
                    .1;
            }
            out.push(b);
            t += period;
        }
    }
    out.sort_by_key(|b| (b.t, b.link));
    out
}
