//! minRTT, the default MPTCP scheduler: the usable non-backup subflow with the lowest smoothed
//! RTT whose congestion window has room (SPEC M2).

use super::{Context, Scheduler, candidates};
use crate::PathId;

#[derive(Debug, Default)]
pub struct MinRtt {
    _private: (),
}

impl Scheduler for MinRtt {
    fn select(&mut self, cx: &Context<'_>) -> Option<PathId> {
        candidates(cx.paths, cx.exclude)
            .filter(|p| p.has_room)
            .min_by_key(|p| (p.srtt, p.id))
            .map(|p| p.id)
    }

    fn opportunistic_retransmission(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "minrtt"
    }
}
