//! Human-friendly quantities in scenario files: durations (`30ms`, `1.5s`), rates (`30Mbit`,
//! `1 Gbit/s`) and sizes (`2MB`, `64KiB`). Parsers return a message saying what is allowed.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A non-negative duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

/// A non-negative duration, or `"off"` (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurOrOff(pub Option<Duration>);

/// A positive bit rate, bits per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Rate(pub f64);

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

/// A duration, or `off`.
pub fn parse_duration_or_off(s: &str) -> Result<Option<Duration>, String> {
    if s.trim() == "off" {
        Ok(None)
    } else {
        parse_duration(s)
            .map(Some)
            .map_err(|e| format!("{e}, or `off`"))
    }
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = split_unit(t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration; use e.g. `30ms`, `1.5s`, `2min`"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: a duration must be zero or positive"));
    }
    let secs = match unit {
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "s" | "" => v,
        "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "`{s}`: unknown time unit `{unit}`; allowed: us, ms, s, min, h"
            ));
        }
    };
    if secs > MAX_SECS {
        return Err(format!("`{s}`: duration too large"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The longest duration a scenario may give (about 31 years).
const MAX_SECS: f64 = 1e9;
/// The slowest and fastest rates a scenario may give (bit/s): a packet's serialisation time
/// must stay a finite duration, and a packet time of zero would stall the clock.
const RATE_RANGE: std::ops::RangeInclusive<f64> = 1.0..=1e13;

fn rate_in_range(v: f64, shown: &str) -> Result<f64, String> {
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{shown}`: a rate must be positive"));
    }
    if !RATE_RANGE.contains(&v) {
        return Err(format!(
            "`{shown}`: out of range: allowed 1 bit/s to 10 Tbit/s"
        ));
    }
    Ok(v)
}

pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("ps"))
        .unwrap_or(t);
    let (num, unit) = split_unit(t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a rate; use e.g. `30Mbit`, `1.5 Gbit/s`, `800kbit`"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}`: a rate must be positive"));
    }
    let mult = match unit {
        "bit" | "b" => 1.0,
        "kbit" | "Kbit" | "kb" => 1e3,
        "Mbit" | "mbit" | "Mb" => 1e6,
        "Gbit" | "gbit" | "Gb" => 1e9,
        _ => {
            return Err(format!(
                "`{s}`: unknown rate unit `{unit}`; allowed: bit, kbit, Mbit, Gbit (optionally /s)"
            ));
        }
    };
    rate_in_range(v * mult, s)
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = split_unit(t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size; use e.g. `1400B`, `64KiB`, `4MB`"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: a size must be zero or positive"));
    }
    let mult = match unit {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "`{s}`: unknown size unit `{unit}`; allowed: B, kB, MB, GB, KiB, MiB, GiB"
            ));
        }
    };
    Ok((v * mult).round() as u64)
}

fn split_unit(t: &str) -> (&str, &str) {
    let idx = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(t.len());
    // An exponent `e` directly followed by a unit letter would be ambiguous; units never start
    // with `e`, so split at the first alphabetic character that is not an exponent marker.
    let (num, unit) = t.split_at(idx);
    (num.trim(), unit.trim())
}

macro_rules! string_or_number {
    ($ty:ident, $parse:ident, $expect:literal, $from_num:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<$ty, E> {
                        $parse(s).map(Into::into).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        self.visit_f64(v as f64)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_f64(v as f64)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        let f: fn(f64) -> Result<$ty, String> = $from_num;
                        f(v).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

impl From<Duration> for Dur {
    fn from(d: Duration) -> Self {
        Dur(d)
    }
}
impl From<Option<Duration>> for DurOrOff {
    fn from(d: Option<Duration>) -> Self {
        DurOrOff(d)
    }
}
impl From<f64> for Rate {
    fn from(v: f64) -> Self {
        Rate(v)
    }
}
impl From<u64> for Size {
    fn from(v: u64) -> Self {
        Size(v)
    }
}

string_or_number!(
    Dur,
    parse_duration,
    "a duration such as \"30ms\" or \"1.5s\" (a bare number means seconds)",
    |v| if !(v >= 0.0 && v.is_finite()) {
        Err(format!("{v}: a duration must be zero or positive"))
    } else if v > MAX_SECS {
        Err(format!("{v}: duration too large"))
    } else {
        Ok(Dur(Duration::from_secs_f64(v)))
    }
);
string_or_number!(
    DurOrOff,
    parse_duration_or_off,
    "a duration such as \"1s\" (a bare number means seconds), or \"off\"",
    |v| if !(v >= 0.0 && v.is_finite()) {
        Err(format!("{v}: a duration must be zero or positive"))
    } else if v > MAX_SECS {
        Err(format!("{v}: duration too large"))
    } else {
        Ok(DurOrOff(Some(Duration::from_secs_f64(v))))
    }
);
string_or_number!(
    Rate,
    parse_rate,
    "a rate such as \"30Mbit\" (a bare number means bit/s)",
    |v| rate_in_range(v, &v.to_string()).map(Rate)
);
string_or_number!(
    Size,
    parse_size,
    "a size such as \"4MB\" or \"64KiB\" (a bare number means bytes)",
    |v| if v >= 0.0 && v.is_finite() && v.fract() == 0.0 {
        Ok(Size(v as u64))
    } else {
        Err(format!("{v}: a size must be a whole number of bytes"))
    }
);

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", self.0.as_secs_f64() * 1e3))
    }
}
impl Serialize for DurOrOff {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(d) => Dur(d).serialize(s),
            None => s.serialize_str("off"),
        }
    }
}
impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}Mbit", self.0 / 1e6))
    }
}
impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("30ms").unwrap(), Duration::from_millis(30));
        assert_eq!(
            parse_duration("1.5 s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_rate("30Mbit").unwrap(), 30e6);
        assert_eq!(parse_rate("1.5 Gbit/s").unwrap(), 1.5e9);
        assert_eq!(parse_rate("800kbps").unwrap(), 800e3);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("4MB").unwrap(), 4_000_000);
    }

    #[test]
    fn rejects_with_a_reason() {
        assert!(parse_rate("-5Mbit").unwrap_err().contains("positive"));
        assert!(parse_rate("0Mbit").unwrap_err().contains("positive"));
        assert!(parse_rate("5 furlongs").unwrap_err().contains("allowed"));
        assert!(parse_duration("-1s").unwrap_err().contains("positive"));
        assert!(
            parse_duration("fast")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_size("3 apples").unwrap_err().contains("allowed"));
    }

    /// Values that parse as numbers but no clock or link can hold.
    #[test]
    fn out_of_range_numbers_are_errors() {
        for bad in ["1e-300bit", "1e20Mbit", "20Tbit"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_rate("1bit").is_ok() && parse_rate("10Gbit").is_ok());
        let huge: Result<Dur, _> = toml::from_str::<toml::Table>("d = 1e300")
            .unwrap()
            .remove("d")
            .unwrap()
            .try_into();
        assert!(huge.unwrap_err().to_string().contains("too large"));
        let tiny: Result<Rate, _> = toml::from_str::<toml::Table>("r = 1e-300")
            .unwrap()
            .remove("r")
            .unwrap()
            .try_into();
        assert!(tiny.unwrap_err().to_string().contains("out of range"));
    }

    proptest::proptest! {
        /// Any text: a value in range or a one-line error.
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,24}", num in proptest::prelude::any::<f64>(), unit in "(us|ms|s|min|h|bit|kbit|Mbit|Gbit|B|KiB|MB|GB|)") {
            let text = format!("{num}{unit}");
            for t in [s.as_str(), text.as_str()] {
                if let Ok(d) = parse_duration(t) {
                    proptest::prop_assert!(d.as_secs_f64() <= MAX_SECS);
                }
                if let Ok(r) = parse_rate(t) {
                    proptest::prop_assert!(RATE_RANGE.contains(&r));
                }
                for e in [parse_duration(t).err(), parse_rate(t).err(), parse_size(t).err()].into_iter().flatten() {
                    proptest::prop_assert!(!e.contains('\n'));
                }
            }
        }
    }
}
