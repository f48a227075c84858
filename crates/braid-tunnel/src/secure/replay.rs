//! The anti-replay window of one session's receive direction (RFC 6479): a ring of 64-bit
//! words holding one bit per counter, advanced a word at a time, so accepting a counter far
//! ahead costs at most one pass over the ring and no bit shifting.

use super::stats::DropReason;

/// Counters at or behind `highest - REPLAY_WINDOW` are rejected as too old.
pub const REPLAY_WINDOW: u64 = 2048;

const WORD_BITS: u64 = u64::BITS as u64;
// RFC 6479 §2: one word more than the window, so the word being filled never evicts a counter
// still inside the window.
const WORDS: usize = (REPLAY_WINDOW / WORD_BITS) as usize + 1;

/// Which counters of the last [`REPLAY_WINDOW`] were received.
#[derive(Clone)]
pub(crate) struct ReplayWindow {
    highest: Option<u64>,
    ring: [u64; WORDS],
}

impl ReplayWindow {
    pub(crate) fn new() -> Self {
        ReplayWindow {
            highest: None,
            ring: [0; WORDS],
        }
    }

    /// Records `counter` if it is new and inside the window. Call only after the datagram
    /// authenticated, or a forger could advance the window.
    pub(crate) fn accept(&mut self, counter: u64) -> Result<(), DropReason> {
        match self.highest {
            Some(highest) if counter <= highest => {
                if highest - counter >= REPLAY_WINDOW {
                    return Err(DropReason::TooOld);
                }
            }
            _ => self.advance(counter),
        }
        let (word, bit) = position(counter);
        if self.ring[word] & bit != 0 {
            return Err(DropReason::Replayed);
        }
        self.ring[word] |= bit;
        Ok(())
    }

    /// Moves the top of the window to `counter`, clearing the words it enters (RFC 6479 §2).
    fn advance(&mut self, counter: u64) {
        let new_word = counter / WORD_BITS;
        let first = match self.highest {
            Some(highest) => highest / WORD_BITS + 1,
            None => 0,
        };
        let entered = new_word.saturating_sub(first).saturating_add(1);
        if entered >= WORDS as u64 {
            self.ring = [0; WORDS];
        } else {
            for w in first..=new_word {
                self.ring[(w % WORDS as u64) as usize] = 0;
            }
        }
        self.highest = Some(counter);
    }
}

fn position(counter: u64) -> (usize, u64) {
    let word = ((counter / WORD_BITS) % WORDS as u64) as usize;
    (word, 1u64 << (counter % WORD_BITS))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn in_order_reordered_duplicate_and_old() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(0), Ok(()));
        assert_eq!(w.accept(0), Err(DropReason::Replayed));
        assert_eq!(w.accept(5), Ok(()));
        assert_eq!(w.accept(3), Ok(()));
        assert_eq!(w.accept(3), Err(DropReason::Replayed));
        assert_eq!(w.accept(5000), Ok(()));
        assert_eq!(w.accept(5000 - REPLAY_WINDOW + 1), Ok(()));
        assert_eq!(w.accept(5000 - REPLAY_WINDOW), Err(DropReason::TooOld));
        assert_eq!(w.accept(5), Err(DropReason::TooOld));
        assert_eq!(w.accept(u64::MAX), Ok(()));
        assert_eq!(w.accept(u64::MAX), Err(DropReason::Replayed));
        assert_eq!(w.accept(u64::MAX - 1), Ok(()));
    }

    proptest! {
        /// The window agrees with a model that remembers every counter: a counter inside the
        /// window is accepted exactly once, one behind it never.
        #[test]
        fn matches_a_model(counters in proptest::collection::vec(0u64..6000, 1..400)) {
            let mut w = ReplayWindow::new();
            let mut seen = std::collections::BTreeSet::new();
            let mut highest: Option<u64> = None;
            for c in counters {
                let expected = match highest {
                    Some(h) if c <= h && h - c >= REPLAY_WINDOW => Err(DropReason::TooOld),
                    _ if seen.contains(&c) => Err(DropReason::Replayed),
                    _ => Ok(()),
                };
                prop_assert_eq!(w.accept(c), expected);
                if expected.is_ok() {
                    seen.insert(c);
                    highest = Some(highest.map_or(c, |h| h.max(c)));
                }
            }
        }
    }
}
