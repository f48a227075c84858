//! Signal-strength input for the daemons, in the format of [`braid_pm::signal`]: JSON lines on
//! a Unix datagram socket (`{"iface":"wlan0","rssi_dbm":-71.5}`, one or more lines per
//! datagram), or a replay of a CSV / driving-dataset file in real time. Bad lines are logged
//! (at most a few per second), counted and skipped; they never stop the input.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use braid_pm::signal::{self, Sample};
use tokio::net::UnixDatagram;
use tokio::sync::mpsc;

/// Counters of a signal input, shared with the status report.
#[derive(Debug, Default)]
pub struct SignalStats {
    pub accepted: AtomicU64,
    pub bad_lines: AtomicU64,
    /// Samples for an interface the daemon does not know (counted by the daemon).
    pub unknown_iface: AtomicU64,
    /// Samples dropped because the daemon was not keeping up.
    pub overflow: AtomicU64,
}

impl SignalStats {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "accepted": self.accepted.load(Ordering::Relaxed),
            "bad_lines": self.bad_lines.load(Ordering::Relaxed),
            "unknown_iface": self.unknown_iface.load(Ordering::Relaxed),
            "overflow": self.overflow.load(Ordering::Relaxed),
        })
    }
}

/// Where samples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// JSON lines on a Unix datagram socket at this path.
    Socket(PathBuf),
    /// A CSV file (`time_s,iface,rssi_dbm`) replayed in real time.
    Csv(PathBuf),
    /// A driving-dataset file (`../shared/traces/signal/`), its `column` (e.g. RSRP) given to
    /// interface `iface`, replayed in real time.
    Driving {
        file: PathBuf,
        iface: String,
        column: String,
    },
}

/// Errors that stop an input before it starts (a bad path, an unreadable replay).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("signal socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("signal socket {0} exists and is not a socket: refusing to replace it")]
    NotASocket(PathBuf),
    #[error("signal replay {path}: {msg}")]
    Replay { path: PathBuf, msg: String },
}

/// Binds the datagram socket (replacing a stale socket file) and forwards every valid sample.
/// Returns once bound; the receiving task runs until `tx` is closed.
pub fn spawn_socket(
    path: &Path,
    tx: mpsc::Sender<Sample>,
    stats: Arc<SignalStats>,
) -> Result<tokio::task::JoinHandle<()>, InputError> {
    let sock = bind(path)?;
    Ok(tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut limiter = LogLimiter::default();
        loop {
            let n = tokio::select! {
                r = sock.recv(&mut buf) => match r {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!("signal socket: {e}");
                        continue;
                    }
                },
                () = tx.closed() => return,
            };
            let text = String::from_utf8_lossy(&buf[..n]);
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match signal::parse_json_line(line) {
                    Ok(s) => forward(&tx, s, &stats),
                    Err(e) => {
                        stats.bad_lines.fetch_add(1, Ordering::Relaxed);
                        if limiter.allow() {
                            tracing::warn!("signal input: skipped a bad line: {e}");
                        }
                    }
                }
            }
        }
    }))
}

/// Loads a replay and plays it in real time from now (sample times relative to the first).
pub fn spawn_replay(
    source: &Source,
    tx: mpsc::Sender<Sample>,
    stats: Arc<SignalStats>,
) -> Result<tokio::task::JoinHandle<()>, InputError> {
    let replay = load_replay(source)?;
    if replay.skipped > 0 {
        tracing::info!(
            "signal replay: skipped {} rows with impossible values",
            replay.skipped
        );
    }
    Ok(tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        for (t, iface, rssi) in replay.samples {
            tokio::select! {
                () = tokio::time::sleep_until(start + t) => {}
                () = tx.closed() => return,
            }
            let s = Sample {
                iface,
                rssi_dbm: rssi,
                t: Some(t.as_secs_f64()),
            };
            forward(&tx, s, &stats);
        }
        tracing::info!("signal replay finished");
    }))
}

/// Reads and parses a replay file.
pub fn load_replay(source: &Source) -> Result<signal::Replay, InputError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|e| InputError::Replay {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })
    };
    let (path, parsed) = match source {
        Source::Csv(p) => (p, signal::parse_csv(&read(p)?)),
        Source::Driving {
            file,
            iface,
            column,
        } => (file, signal::parse_driving(&read(file)?, iface, column)),
        Source::Socket(p) => {
            return Err(InputError::Replay {
                path: p.clone(),
                msg: "a socket is not a replay".into(),
            });
        }
    };
    parsed.map_err(|msg| InputError::Replay {
        path: path.to_path_buf(),
        msg,
    })
}

fn forward(tx: &mpsc::Sender<Sample>, s: Sample, stats: &SignalStats) {
    match tx.try_send(s) {
        Ok(()) => {
            stats.accepted.fetch_add(1, Ordering::Relaxed);
        }
        Err(mpsc::error::TrySendError::Full(_)) => {
            stats.overflow.fetch_add(1, Ordering::Relaxed);
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {}
    }
}

fn bind(path: &Path) -> Result<UnixDatagram, InputError> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(InputError::NotASocket(path.to_path_buf()));
        }
        // A socket file left by an earlier run: datagram sockets cannot be "in use" by a
        // reader we could detect, and binding needs the name free.
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| InputError::Socket {
            path: path.to_path_buf(),
            source,
        })?;
    }
    UnixDatagram::bind(path).map_err(|source| InputError::Socket {
        path: path.to_path_buf(),
        source,
    })
}

/// At most a few log lines per second for a flood of bad input.
#[derive(Debug, Default)]
struct LogLimiter {
    window: Option<std::time::Instant>,
    count: u32,
}

impl LogLimiter {
    const PER_SECOND: u32 = 5;

    fn allow(&mut self) -> bool {
        let now = std::time::Instant::now();
        match self.window {
            Some(w) if now.duration_since(w) < Duration::from_secs(1) => {
                self.count += 1;
                self.count <= Self::PER_SECOND
            }
            _ => {
                self.window = Some(now);
                self.count = 1;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("braid-io-{}-{name}", std::process::id()))
    }

    #[tokio::test]
    async fn socket_forwards_good_lines_and_counts_bad_ones() {
        let path = tmp("sig.sock");
        let (tx, mut rx) = mpsc::channel(16);
        let stats = Arc::new(SignalStats::default());
        let task = spawn_socket(&path, tx, stats.clone()).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        client
            .send_to(
                b"{\"iface\":\"wlan0\",\"rssi_dbm\":-71.5}\nnot json\n{\"iface\":\"wlan0\",\"rssi_dbm\":12}\n",
                &path,
            )
            .await
            .unwrap();
        client
            .send_to(b"{\"iface\":\"lte0\",\"rssi_dbm\":-90,\"t\":3.5}", &path)
            .await
            .unwrap();
        let a = rx.recv().await.unwrap();
        assert_eq!((a.iface.as_str(), a.rssi_dbm), ("wlan0", -71.5));
        let b = rx.recv().await.unwrap();
        assert_eq!(
            (b.iface.as_str(), b.rssi_dbm, b.t),
            ("lte0", -90.0, Some(3.5))
        );
        assert_eq!(stats.accepted.load(Ordering::Relaxed), 2);
        assert_eq!(stats.bad_lines.load(Ordering::Relaxed), 2);
        drop(rx);
        task.await.unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn a_regular_file_is_not_replaced() {
        let path = tmp("not-a-socket");
        std::fs::write(&path, "data").unwrap();
        let (tx, _rx) = mpsc::channel(1);
        let e = spawn_socket(&path, tx, Arc::default()).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn csv_replay_plays_in_time() {
        let path = tmp("replay.csv");
        std::fs::write(
            &path,
            "time_s,iface,rssi_dbm\n0,wlan0,-60\n2.5,wlan0,-80\n3,wlan0,-999\n",
        )
        .unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let start = tokio::time::Instant::now();
        let task = spawn_replay(&Source::Csv(path.clone()), tx, Arc::default()).unwrap();
        assert_eq!(rx.recv().await.unwrap().rssi_dbm, -60.0);
        let b = rx.recv().await.unwrap();
        assert_eq!(b.rssi_dbm, -80.0);
        assert_eq!(start.elapsed(), Duration::from_millis(2500));
        // The impossible row was skipped: the replay ends.
        assert!(rx.recv().await.is_none());
        task.await.unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_missing_replay_names_the_file() {
        let e = load_replay(&Source::Csv("/nonexistent/signal.csv".into())).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/signal.csv"), "{e}");
    }
}
