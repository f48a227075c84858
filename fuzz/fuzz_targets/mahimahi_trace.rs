//! Mahimahi delivery traces (the simulator's and the lab emulator's trace-driven links) on
//! arbitrary bytes: never a panic; an error is one line; a parsed trace has sorted
//! opportunities within its period, and its lookups agree: opportunity `first_at_or_after(t)`
//! is at or after `t` (unless the clock saturates) and the one before it is earlier.
#![no_main]

use braid_sim::trace::Trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Trace::parse(&text) {
        Ok(tr) => {
            let ops = &tr.opportunities;
            assert!(!ops.is_empty());
            assert!(ops.windows(2).all(|w| w[0] <= w[1]));
            assert!(ops.iter().all(|&o| o <= tr.period_ms));
            assert!(tr.mean_rate().is_finite() && tr.mean_rate() > 0.0);
            for t in [
                0,
                1,
                tr.period_ms - 1,
                tr.period_ms,
                tr.period_ms + 1,
                3 * tr.period_ms + 7,
            ] {
                let k = tr.first_at_or_after(t);
                let at = tr.time_ms(k);
                assert!(at >= t || at == u64::MAX, "t {t}: opportunity {k} at {at}");
                if k > 0 {
                    assert!(
                        tr.time_ms(k - 1) < t,
                        "t {t}: opportunity {} before it",
                        k - 1
                    );
                }
            }
        }
        Err(e) => assert!(!e.contains('\n'), "{e}"),
    }
});
