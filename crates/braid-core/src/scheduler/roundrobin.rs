//! Round-robin: rotate over the usable subflows that have room (seed 002's vehicle test).

use super::{Context, Scheduler, candidates};
use crate::PathId;

#[derive(Debug, Default)]
pub struct RoundRobin {
    last: Option<PathId>,
}

impl Scheduler for RoundRobin {
    fn select(&mut self, cx: &Context<'_>) -> Option<PathId> {
        let ready = || candidates(cx.paths, cx.exclude).filter(|p| p.has_room);
        // The first ready path after the last one used, wrapping around.
        let next = match self.last {
            Some(last) => ready().find(|p| p.id > last).or_else(|| ready().next()),
            None => ready().next(),
        }?;
        self.last = Some(next.id);
        Some(next.id)
    }

    fn name(&self) -> &'static str {
        "roundrobin"
    }
}
