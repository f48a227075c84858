//! What a run records: the measured application's deliveries, time series, loss events, the
//! path manager's decisions, counters. Plain data, filled by [`crate::world`] (and by `braid
//! lab` on real stacks); [`crate::metrics`] computes the papers' metrics from it.

use std::time::Duration;

use braid_core::{ConnectionStats, PathStats};

use crate::link::DirStats;

/// One sample of the time series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub t: Duration,
    /// In-order bytes delivered to the receiving application so far.
    pub delivered: u64,
    /// Stream bytes received per link so far (duplicates included): per interface of the
    /// client, which in the two-node form is one interface per link.
    pub link_rx: Vec<u64>,
    /// Sender's congestion window per link (0 without a path).
    pub link_cwnd: Vec<u64>,
    /// Sender's smoothed RTT per link, µs (0 without a path).
    pub link_srtt_us: Vec<u64>,
    /// Receiver's reorder-buffer occupancy.
    pub ofo_bytes: u64,
    /// Sender's reinjected segments so far.
    pub reinjected: u64,
    /// Sender's DATA segments so far.
    pub data_packets: u64,
}

/// A connection-loss event: a link blocked, its address lost, or its radio out of range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossEvent {
    pub t: Duration,
    pub link: usize,
    /// When the link's address or signal returned before this event (or the run start).
    pub since: Duration,
    /// Stream bytes the sender had sent when the event happened: the handover is over once the
    /// receiver has all of them in order.
    pub sent_before: u64,
}

/// A link's smoothed signal rose above its threshold plus hysteresis (the path manager may use
/// it again), when data first arrived over the link afterwards, and when the signal fell
/// below the threshold again before that (the chance was missed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub t: Duration,
    pub link: usize,
    pub first_data: Option<Duration>,
    pub lost: Option<Duration>,
}

/// A decision of the client's path manager.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PmDecision {
    pub t: Duration,
    pub link: usize,
    /// `true`: the link was demoted (backup or removed); `false`: promoted (created or active).
    pub demote: bool,
    /// A backup-flag change (counted as a flip).
    pub flip: bool,
}

/// One application's connection, for every application of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowRecord {
    pub name: String,
    /// When the application started and, if it has an end, stopped.
    pub start: Duration,
    pub stopped: Option<Duration>,
    /// Stream bytes the sending application wrote.
    pub written: u64,
    /// In-order bytes the receiving application read.
    pub delivered: u64,
    /// Bytes read that differ from what was written at that offset (with
    /// [`RunOptions::verify`]; always 0 when the stream is intact).
    pub corrupt: u64,
    /// File transfer: its size, and when it completed.
    pub file_bytes: Option<u64>,
    pub completed: Option<Duration>,
    /// Data packets the receiver got whose stream bytes it already had (counted in
    /// topologies, where packets cross relays: `None` in the two-node form).
    pub redundant_packets: Option<u64>,
}

/// Datagrams the network could not deliver, by reason (topology runs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDrops {
    /// No forwarding entry for the destination.
    pub no_route: u64,
    /// Hop limit reached (a routing loop while tables change).
    pub ttl: u64,
    /// Addressed to a node without the connection (or to an unknown address id).
    pub no_endpoint: u64,
}

/// Everything a run recorded; metrics are computed from it.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    /// The samples hold no per-link window and RTT and no reorder-buffer occupancy: a run on
    /// real stacks (`braid lab`) does not read them. The time series leaves those columns out.
    pub paths_unread: bool,
    pub duration: Duration,
    pub app_start: Duration,
    /// In-order deliveries at the receiving application: (time µs, bytes).
    pub deliveries: Vec<(u64, u32)>,
    /// CBR messages delivered: (generation time µs, one-way delay µs).
    pub cbr: Vec<(u64, u32)>,
    /// Generation time (µs) of every CBR message the application generated, delivered or not.
    pub cbr_generated: Vec<u64>,
    /// For each generated message (same order), a lower bound (µs) on its one-way delay from
    /// the links joining the two hosts directly (`world::bound`). Empty when no link joins
    /// them (or on real stacks).
    pub cbr_bound: Vec<u32>,
    /// Per link joining the two hosts (in link order), for each generated
    /// message, its one-way delay (µs) had the stream been alone on that link (`world::bound`;
    /// `u32::MAX` while the link has not come back).
    pub cbr_alone: Vec<Vec<u32>>,
    pub samples: Vec<Sample>,
    pub loss_events: Vec<LossEvent>,
    pub recoveries: Vec<Recovery>,
    pub link_names: Vec<String>,
    pub thresholds: Vec<Option<f64>>,
    /// Signal samples: (time µs, link, raw dBm, smoothed dBm).
    pub rss: Vec<(u64, u8, f32, f32)>,
    pub decisions: Vec<PmDecision>,
    /// Stream bytes received per link at the end (duplicates included).
    pub link_bytes: Vec<u64>,
    /// Data sequence numbers received (time µs, link, dsn), when traced.
    pub dsn: Vec<(u64, u8, u64)>,
    /// File transfer completion time.
    pub completed: Option<Duration>,
    pub sender: ConnectionStats,
    pub receiver: ConnectionStats,
    /// Sender's path counters at the end, by link.
    pub sender_paths: Vec<(usize, PathStats)>,
    /// Link counters: (server→client, client→server); in a topology (a→b, b→a).
    pub link_stats: Vec<(DirStats, DirStats)>,
    /// Events processed by the engine.
    pub events: u64,
    /// Every application's connection, the measured one (`[app]`) first.
    pub flows: Vec<FlowRecord>,
    /// Datagrams lost inside the network (not on a link).
    pub net_drops: NetDrops,
}

/// Options of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Record the data sequence number of every data packet received (for plots).
    pub trace_dsn: bool,
    /// Write a pattern that depends on the stream offset and the connection, and check every
    /// byte read against it ([`FlowRecord::corrupt`]).
    pub verify: bool,
}
