//! Signal strength of real Wi-Fi interfaces: nl80211 station information (the signal of the
//! access point a station is associated with), polled at a fixed interval and fed to the same
//! channel as the socket and replay inputs.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use braid_io::signal::SignalStats;
use braid_pm::signal::Sample;
use tokio::sync::mpsc;

/// Wireless interfaces by sysfs: (ifindex, name).
fn wireless_ifaces() -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let p = e.path();
        if !(p.join("wireless").is_dir() || p.join("phy80211").exists()) {
            continue;
        }
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if let Some(idx) = std::fs::read_to_string(p.join("ifindex"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            out.push((idx, name));
        }
    }
    out.sort();
    out
}

/// Starts polling; an error says why there is nothing to poll.
pub async fn spawn(
    every: Duration,
    tx: mpsc::Sender<Sample>,
    stats: Arc<SignalStats>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let ifaces = wireless_ifaces();
    if ifaces.is_empty() {
        return Err(
            "no Wi-Fi interface on this machine (no /sys/class/net/*/wireless)".to_string(),
        );
    }
    let mut nl = braid_mptcp::nl80211::Nl80211::connect()
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(
        ifaces = ?ifaces.iter().map(|i| &i.1).collect::<Vec<_>>(),
        "polling nl80211 station signal every {every:?}"
    );
    Ok(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            for (idx, name) in &ifaces {
                match nl.station_signal(*idx).await {
                    Ok(Some(dbm)) => {
                        let s = Sample {
                            iface: name.clone(),
                            rssi_dbm: f64::from(dbm),
                            t: None,
                        };
                        if tx.try_send(s).is_ok() {
                            stats.accepted.fetch_add(1, Ordering::Relaxed);
                        } else if tx.is_closed() {
                            return;
                        } else {
                            stats.overflow.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Not associated: no signal to report.
                    Ok(None) => {}
                    Err(e) => {
                        stats.bad_lines.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("nl80211 {name}: {e}");
                    }
                }
            }
        }
    }))
}
