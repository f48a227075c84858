//! braid pm's signal inputs on arbitrary bytes: the socket's JSON lines, a replay CSV and a
//! driving-dataset CSV. Never a panic; an error is one line; an accepted sample is in range,
//! and a replay is in time order.
#![no_main]

use braid_pm::signal::{RSS_RANGE, parse_csv, parse_driving, parse_json_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.split('\n') {
        match parse_json_line(line) {
            Ok(s) => assert!(RSS_RANGE.contains(&s.rssi_dbm), "{s:?}"),
            Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
        }
    }
    let column = text.split([',', '\n']).nth(1).unwrap_or("RSRP").to_string();
    for replay in [parse_csv(&text), parse_driving(&text, "its", &column)] {
        match replay {
            Ok(r) => {
                assert!(r.samples.windows(2).all(|w| w[0].0 <= w[1].0));
                assert!(r.samples.iter().all(|(_, _, v)| RSS_RANGE.contains(v)));
            }
            Err(e) => assert!(!e.contains('\n'), "{e}"),
        }
    }
});
