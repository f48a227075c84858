//! Redundant: every segment on every usable subflow (seed 001). The connection walks the stream
//! once per path; this type only picks paths for reinjections (lowest RTT with room).

use super::{Context, Scheduler, candidates};
use crate::PathId;

#[derive(Debug, Default)]
pub struct Redundant;

impl Scheduler for Redundant {
    fn select(&mut self, cx: &Context<'_>) -> Option<PathId> {
        candidates(cx.paths, cx.exclude)
            .filter(|p| p.has_room)
            .min_by_key(|p| (p.srtt, p.id))
            .map(|p| p.id)
    }

    fn is_redundant(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "redundant"
    }
}
