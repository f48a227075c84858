//! braid-sim: a deterministic discrete-event simulator that drives the same `braid-core`
//! connection the daemon ships, in virtual time.
//!
//! [`scenario`] loads TOML scenario files into variants; [`world`] runs one variant with one
//! seed and fills a [`record::RunRecord`]; [`metrics`] turns the record into the seed papers'
//! metrics; [`runner`] runs variants × repetitions in parallel; [`report`] prints tables, JSON
//! and CSV; [`series`] gives a run's time series as columns (CSV and the Python package);
//! [`sweep`] turns `--sweep key=a,b,c` into the scenario's `[sweep]` table; [`pcap`] writes
//! packet captures of runs. Dependencies go one
//! way: `scenario` → `metrics` → `record`; `world` → `scenario`, `record`.

#![deny(unsafe_code)]

pub mod bench;
pub mod chaos;
pub mod link;
pub mod metrics;
pub mod mobility;
pub mod pcap;
pub mod plot;
pub mod radio;
pub mod record;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod series;
pub mod sweep;
pub mod trace;
pub mod units;
pub mod world;
