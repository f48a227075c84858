//! braid's own notion of time. The core never reads a clock: every input carries an
//! [`Instant`] chosen by the driver (virtual time in the simulator, a monotonic clock in the
//! daemon). Simulations start at [`Instant::ZERO`], so logs are reproducible.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in microseconds since an arbitrary epoch chosen by the driver.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The epoch: simulations start here.
    pub const ZERO: Instant = Instant { micros: 0 };
    /// A time later than any the connection will ever see.
    pub const FAR_FUTURE: Instant = Instant { micros: u64::MAX };

    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }

    pub const fn from_millis(millis: u64) -> Self {
        Instant {
            micros: millis * 1000,
        }
    }

    pub fn from_secs_f64(secs: f64) -> Self {
        Instant {
            micros: (secs.max(0.0) * 1e6).round() as u64,
        }
    }

    pub const fn micros(self) -> u64 {
        self.micros
    }

    pub fn secs_f64(self) -> f64 {
        self.micros as f64 / 1e6
    }

    /// Time since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration::from_micros(self.micros)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }

    /// Adds without overflowing: saturates at [`Instant::FAR_FUTURE`].
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(duration_micros(d)),
        }
    }

    /// Subtracts without underflowing: saturates at [`Instant::ZERO`].
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_sub(duration_micros(d)),
        }
    }

    /// The low 32 bits of the microsecond count: the timestamp carried in packet headers.
    pub fn wire_timestamp(self) -> u32 {
        self.micros as u32
    }

    /// Reconstructs the full instant of a 32-bit wire timestamp echoed back to us, assuming it
    /// lies within 2^31 µs (≈ 36 min) before `self`. Returns `None` if it would lie in the future.
    pub fn from_wire_echo(self, ts: u32) -> Option<Instant> {
        let age = (self.micros as u32).wrapping_sub(ts);
        if age > i32::MAX as u32 || u64::from(age) > self.micros {
            return None;
        }
        Some(Instant {
            micros: self.micros - u64::from(age),
        })
    }
}

fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        self.saturating_sub(rhs)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an earlier minus a later instant is zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t - Duration::from_millis(10), Instant::ZERO);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(
            Instant::FAR_FUTURE + Duration::from_secs(1),
            Instant::FAR_FUTURE
        );
        assert_eq!(t + Duration::from_micros(1), Instant::from_micros(5001));
    }

    #[test]
    fn wire_timestamp_echo_recovers_instant_across_wrap() {
        let sent = Instant::from_micros((1u64 << 32) - 10);
        let now = Instant::from_micros((1u64 << 32) + 500);
        assert_eq!(now.from_wire_echo(sent.wire_timestamp()), Some(sent));
        // An echo "from the future" is rejected.
        let later = Instant::from_micros(now.micros() + 5);
        assert_eq!(now.from_wire_echo(later.wire_timestamp()), None);
    }
}
