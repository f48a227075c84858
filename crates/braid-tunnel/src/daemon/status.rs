//! What the daemons report: a JSON status document (the control socket's answer to `status`),
//! its table form for `braid status`, and the same numbers in the Prometheus text format on a
//! tiny HTTP responder.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use braid_core::{Connection, PathId};
use serde_json::{Value, json};

/// The latest status document, shared with the control socket and the metrics endpoint.
pub type Shared = Arc<Mutex<Value>>;

/// The status of one connection as JSON; `addr_of` names a path's current peer address.
pub fn connection_json(conn: &Connection, addr_of: impl Fn(PathId) -> Option<String>) -> Value {
    let s = conn.stats();
    let paths: Vec<Value> = conn
        .paths()
        .map(|p| {
            json!({
                "id": p.id.0,
                "local": p.local.0,
                "remote": p.remote.0,
                "peer_addr": addr_of(p.id),
                "established": p.established,
                "usable": p.usable,
                "backup": p.backup,
                "duplicate": p.duplicate,
                "srtt_ms": p.srtt.as_secs_f64() * 1e3,
                "rttvar_ms": p.rttvar.as_secs_f64() * 1e3,
                "rto_ms": p.rto.as_secs_f64() * 1e3,
                "min_rtt_ms": p.min_rtt.as_secs_f64() * 1e3,
                "delivery_rate_mbit": p.delivery_rate.map(|r| r as f64 * 8e-6),
                "cwnd": p.cwnd,
                "ssthresh": p.ssthresh,
                "in_flight": p.in_flight,
                "congestion": p.congestion,
                "bytes_sent": p.stats.bytes_sent,
                "bytes_received": p.stats.bytes_received,
                "data_bytes_sent": p.stats.data_bytes_sent,
                "data_bytes_received": p.stats.data_bytes_received,
                "packets_sent": p.stats.packets_sent,
                "packets_received": p.stats.packets_received,
                "retransmissions": p.stats.retransmissions,
                "lost_packets": p.stats.lost_packets,
                "rto_count": p.stats.rto_count,
                "reinjected_from": p.stats.reinjected_from,
                "reinjected_to": p.stats.reinjected_to,
            })
        })
        .collect();
    let d = &s.dropped;
    json!({
        "established": conn.is_established(),
        "closed": conn.is_closed(),
        "paths": paths,
        "addrs": addrs_json(conn.addr_stats()),
        "peer_addrs": addrs_json(conn.peer_addr_stats()),
        "bytes_sent": s.bytes_sent,
        "bytes_received": s.bytes_received,
        "datagrams_sent": s.datagrams_sent,
        "datagrams_received": s.datagrams_received,
        "delivered_bytes": s.delivered_bytes,
        "data_packets_sent": s.data_packets_sent,
        "reinjected_packets": s.reinjected_packets,
        "reinjected_bytes": s.reinjected_bytes,
        "duplicated_bytes": s.duplicated_bytes,
        "duplicate_bytes_received": s.duplicate_bytes_received,
        "ofo_peak_bytes": s.ofo_peak_bytes,
        "paths_opened": s.paths_opened,
        "paths_closed": s.paths_closed,
        "usable_paths": conn.paths().filter(|p| p.usable).count(),
        "stale_removals": s.stale_removals,
        "send_buffered": conn.send_buffered(),
        "drops": {
            "malformed": d.malformed, "unknown_path": d.unknown_path,
            "closed_path": d.closed_path, "too_many_paths": d.too_many_paths,
            "too_many_holes": d.too_many_holes, "protocol": d.protocol, "closed": d.closed,
        },
    })
}

/// Stream counts per address over the connection's life (closed paths included): each of the
/// client's links is one address, numbered as the links, on both ends.
fn addrs_json<'a>(
    stats: impl Iterator<Item = (braid_core::AddrId, &'a braid_core::AddrStats)>,
) -> Vec<Value> {
    stats
        .map(|(a, st)| {
            json!({
                "addr": a.0,
                "data_bytes_sent": st.data_bytes_sent,
                "data_bytes_received": st.data_bytes_received,
                "datagrams_sent": st.datagrams_sent,
                "datagrams_received": st.datagrams_received,
            })
        })
        .collect()
}

/// The status document as a table (`braid status`).
pub fn status_table(v: &Value) -> String {
    let mut out = String::new();
    let role = v["role"].as_str().unwrap_or("?");
    let _ = writeln!(
        out,
        "braid tunnel {role}   up {:.0} s   tun {}",
        v["uptime_s"].as_f64().unwrap_or(0.0),
        v["tun"]["name"].as_str().unwrap_or("?")
    );
    if let Some(drops) = v["drops"].as_object() {
        let nonzero: Vec<String> = drops
            .iter()
            .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let _ = writeln!(
            out,
            "{}: {}",
            if v["transport"] == "mptcp" {
                "drops"
            } else {
                "dropped datagrams"
            },
            if nonzero.is_empty() {
                "none".to_string()
            } else {
                nonzero.join(" ")
            }
        );
    }
    if v["transport"] == "mptcp" {
        stream_table(&mut out, v);
        return out;
    }
    let empty = Vec::new();
    for c in v["connections"].as_array().unwrap_or(&empty) {
        let _ = writeln!(
            out,
            "\n{} (connection {})  sent {}  received {}  reinjected {} pkts  {}",
            c["peer"].as_str().unwrap_or("gateway"),
            c["conn_id"],
            bytes(&c["bytes_sent"]),
            bytes(&c["bytes_received"]),
            c["reinjected_packets"],
            if c["established"].as_bool() == Some(true) {
                "established"
            } else {
                "connecting"
            }
        );
        let _ = writeln!(
            out,
            "  {:>4} {:>5} {:<24} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>7} {:>7}",
            "path",
            "iface",
            "peer",
            "srtt ms",
            "rto ms",
            "cwnd",
            "inflight",
            "sent",
            "recv",
            "reinj",
            "flags"
        );
        if let Some(secs) = c["pathless_s"].as_f64().filter(|s| *s > 0.0) {
            let _ = writeln!(
                out,
                "  NO USABLE PATH for {secs:.1} s ({} queued)",
                bytes(&c["send_buffered"])
            );
        }
        for p in c["paths"].as_array().unwrap_or(&empty) {
            let mut flags = String::new();
            if p["backup"].as_bool() == Some(true) {
                flags.push('B');
            }
            if p["duplicate"].as_bool() == Some(true) {
                flags.push('D');
            }
            if p["usable"].as_bool() != Some(true) {
                flags.push('!');
            }
            if p["established"].as_bool() != Some(true) {
                flags.push('?');
            }
            let _ = writeln!(
                out,
                "  {:>4} {:>5} {:<24} {:>8.1} {:>8.0} {:>9} {:>9} {:>10} {:>10} {:>7} {:>7}",
                p["id"],
                p["local"],
                p["peer_addr"].as_str().unwrap_or("-"),
                p["srtt_ms"].as_f64().unwrap_or(0.0),
                p["rto_ms"].as_f64().unwrap_or(0.0),
                p["cwnd"],
                p["in_flight"],
                bytes(&p["bytes_sent"]),
                bytes(&p["bytes_received"]),
                p["reinjected_to"],
                if flags.is_empty() { "-".into() } else { flags }
            );
        }
        datagram_table(&mut out, &c["datagram"]);
        if let Some(d) = c["drops"].as_object() {
            let nonzero: Vec<String> = d
                .iter()
                .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            if !nonzero.is_empty() {
                let _ = writeln!(out, "  core drops: {}", nonzero.join(" "));
            }
        }
    }
    out
}

/// A connection's per-packet carrier, when it has one: what went and came per path, the
/// reorder buffer's gaps given up and the time packets waited in it.
fn datagram_table(out: &mut String, d: &Value) {
    if !d.is_object() {
        return;
    }
    let sent: Vec<String> = d["paths_sent"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "path {} {} pkts (lost {}, weight {:.3}{})",
                p["path"],
                p["packets"],
                p["lost"],
                p["weight"].as_f64().unwrap_or(0.0),
                if p["stalled"] == true {
                    ", STALLED"
                } else {
                    ""
                }
            )
        })
        .collect();
    let h = &d["hold_us"];
    let _ = writeln!(
        out,
        "  per packet: sent {} pkts{}{}\n  per packet: received {} pkts, released {}, gaps given up {}, held p50 {} µs p99 {} µs max {} µs",
        d["sent_packets"],
        if sent.is_empty() { "" } else { ": " },
        sent.join(", "),
        d["received_packets"],
        d["released_packets"],
        d["skipped"],
        h["p50"],
        h["p99"],
        h["max"],
    );
}

/// The MPTCP transport's part: the stream and, on a gateway, its clients.
fn stream_table(out: &mut String, v: &Value) {
    let st = &v["stream"];
    let _ = writeln!(
        out,
        "transport mptcp   sent {} in {} records   received {} in {} records",
        bytes(&st["bytes_sent"]),
        st["records_sent"],
        bytes(&st["bytes_received"]),
        st["records_received"],
    );
    if v["role"] == "client" {
        let _ = writeln!(
            out,
            "{}  gateway {}  local {}  (connections started: {}; subflows: braid pm status)",
            if v["connected"] == true {
                "connected"
            } else {
                "connecting"
            },
            v["gateway"].as_str().unwrap_or("-"),
            v["local"].as_str().unwrap_or("-"),
            v["connections_started"],
        );
    }
    for c in v["clients"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "client {:<16} {:<11} from {:<24} connections {}",
            c["name"].as_str().unwrap_or("?"),
            if c["connected"] == true {
                "connected"
            } else {
                "-"
            },
            c["remote"].as_str().unwrap_or("-"),
            c["connections"],
        );
    }
}

fn bytes(v: &Value) -> String {
    let b = v.as_f64().unwrap_or(0.0);
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// The status document in the Prometheus text format.
pub fn prometheus(v: &Value) -> String {
    let mut out = String::new();
    let role = v["role"].as_str().unwrap_or("?");
    let _ = writeln!(out, "# TYPE braid_tunnel_up gauge");
    let _ = writeln!(out, "braid_tunnel_up{{role=\"{role}\"}} 1");
    let _ = writeln!(out, "# TYPE braid_tunnel_dropped_datagrams_total counter");
    if let Some(d) = v["drops"].as_object() {
        for (k, n) in d {
            let _ = writeln!(
                out,
                "braid_tunnel_dropped_datagrams_total{{reason=\"{k}\"}} {}",
                n.as_u64().unwrap_or(0)
            );
        }
    }
    // The UDP I/O counters (braid transport) and the stream's (MPTCP transport).
    for group in ["udp", "stream"] {
        for (k, n) in v[group].as_object().into_iter().flatten() {
            let Some(n) = n.as_f64() else { continue };
            let kind = if k.ends_with("_max") || k.ends_with("_segments") {
                "gauge"
            } else {
                "counter"
            };
            let _ = writeln!(out, "# TYPE braid_tunnel_{group}_{k} {kind}");
            let _ = writeln!(out, "braid_tunnel_{group}_{k} {n}");
        }
    }
    if let Some(up) = v["connected"].as_bool() {
        let _ = writeln!(out, "# TYPE braid_tunnel_connected gauge");
        let _ = writeln!(out, "braid_tunnel_connected {}", u8::from(up));
    }
    let empty = Vec::new();
    let conns = v["connections"].as_array().unwrap_or(&empty);
    // Connections without a usable path (all links away, or every path broken): how many,
    // and for how long each has been so.
    let pathless = conns
        .iter()
        .filter(|c| c["pathless_s"].as_f64().is_some_and(|s| s > 0.0))
        .count();
    let _ = writeln!(out, "# TYPE braid_tunnel_connections_without_path gauge");
    let _ = writeln!(out, "braid_tunnel_connections_without_path {pathless}");
    let conn_metrics = [
        ("usable_paths", "gauge"),
        ("pathless_s", "gauge"),
        ("send_buffered", "gauge"),
        ("bytes_sent", "counter"),
        ("bytes_received", "counter"),
        ("delivered_bytes", "counter"),
        ("reinjected_packets", "counter"),
        ("duplicate_bytes_received", "counter"),
    ];
    for (m, kind) in conn_metrics {
        let _ = writeln!(out, "# TYPE braid_tunnel_connection_{m} {kind}");
        for c in conns {
            let _ = writeln!(
                out,
                "braid_tunnel_connection_{m}{{peer=\"{}\"}} {}",
                label(&c["peer"]),
                c[m].as_f64().unwrap_or(0.0)
            );
        }
    }
    let datagram_metrics = [
        ("sent_packets", "counter"),
        ("received_packets", "counter"),
        ("released_packets", "counter"),
        ("skipped", "counter"),
        ("ofo_timeouts", "counter"),
        ("probes", "counter"),
        ("oversize_on_stream", "counter"),
    ];
    for (m, kind) in datagram_metrics {
        let _ = writeln!(out, "# TYPE braid_tunnel_datagram_{m} {kind}");
        for c in conns.iter().filter(|c| c["datagram"].is_object()) {
            let _ = writeln!(
                out,
                "braid_tunnel_datagram_{m}{{peer=\"{}\"}} {}",
                label(&c["peer"]),
                c["datagram"][m].as_f64().unwrap_or(0.0)
            );
        }
    }
    let _ = writeln!(out, "# TYPE braid_tunnel_datagram_hold_us gauge");
    for c in conns.iter().filter(|c| c["datagram"].is_object()) {
        for q in ["p50", "p99", "max"] {
            let _ = writeln!(
                out,
                "braid_tunnel_datagram_hold_us{{peer=\"{}\",quantile=\"{q}\"}} {}",
                label(&c["peer"]),
                c["datagram"]["hold_us"][q].as_f64().unwrap_or(0.0)
            );
        }
    }
    let path_metrics = [
        ("srtt_ms", "gauge"),
        ("rto_ms", "gauge"),
        ("cwnd", "gauge"),
        ("in_flight", "gauge"),
        ("backup", "gauge"),
        ("usable", "gauge"),
        ("bytes_sent", "counter"),
        ("bytes_received", "counter"),
        ("retransmissions", "counter"),
        ("reinjected_to", "counter"),
        ("reinjected_from", "counter"),
    ];
    for (m, kind) in path_metrics {
        let _ = writeln!(out, "# TYPE braid_tunnel_path_{m} {kind}");
        for c in conns {
            for p in c["paths"].as_array().unwrap_or(&empty) {
                let x = match &p[m] {
                    Value::Bool(b) => f64::from(u8::from(*b)),
                    x => x.as_f64().unwrap_or(0.0),
                };
                let _ = writeln!(
                    out,
                    "braid_tunnel_path_{m}{{peer=\"{}\",path=\"{}\",iface=\"{}\"}} {x}",
                    label(&c["peer"]),
                    p["id"],
                    p["local"],
                );
            }
        }
    }
    out
}

fn label(v: &Value) -> String {
    v.as_str()
        .unwrap_or("gateway")
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// Serves `GET /metrics` (any path, in fact) with [`prometheus`] of the latest status
/// (`braid_io::metrics::serve`: bounded clients and timeouts).
pub async fn serve_metrics(
    addr: SocketAddr,
    shared: Shared,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    braid_io::metrics::serve(
        addr,
        Arc::new(move || {
            let v = shared.lock().map(|v| v.clone()).unwrap_or(Value::Null);
            prometheus(&v)
        }),
    )
    .await
}

/// Starts the control socket (answering `status` with the latest document) and the metrics
/// endpoint, if configured.
pub async fn serve_ops(
    ops: &super::config::OpsConfig,
    shared: &Shared,
) -> Result<Vec<tokio::task::JoinHandle<()>>, super::DaemonError> {
    let mut tasks = Vec::new();
    if let Some(path) = &ops.control {
        let s = shared.clone();
        let h: braid_io::control::Handler = Arc::new(move |req| match req {
            "status" | "" => s.lock().map(|v| v.clone()).unwrap_or(Value::Null),
            other => json!({ "error": format!("unknown request `{other}`: allowed status") }),
        });
        let t = braid_io::control::serve(path, h)
            .await
            .map_err(|e| super::DaemonError(e.to_string()))?;
        tasks.push(t);
    }
    if let Some(addr) = ops.metrics {
        let t = serve_metrics(addr, shared.clone())
            .await
            .map_err(|e| super::DaemonError(e.to_string()))?;
        tasks.push(t);
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mptcp_transport_status_as_table_and_metrics() {
        let v = json!({
            "role": "gateway", "transport": "mptcp", "uptime_s": 12.0,
            "tun": {"name": "braid0"},
            "stream": {"records_sent": 10, "records_received": 20,
                       "bytes_sent": 1000, "bytes_received": 2_000_000},
            "drops": {"handshake_failed": 1, "bad_record": 0},
            "clients": [{"name": "a", "connected": true, "remote": "10.0.1.1:4000",
                         "connections": 1}],
        });
        let t = status_table(&v);
        assert!(t.contains("transport mptcp"), "{t}");
        assert!(t.contains("received 2.0 MB in 20 records"), "{t}");
        assert!(t.contains("client a") && t.contains("10.0.1.1:4000"), "{t}");
        assert!(
            t.contains("handshake_failed=1") && !t.contains("bad_record"),
            "{t}"
        );
        let m = prometheus(&v);
        assert!(
            m.contains("braid_tunnel_stream_bytes_received 2000000\n"),
            "{m}"
        );
        assert!(
            m.contains("braid_tunnel_dropped_datagrams_total{reason=\"handshake_failed\"} 1"),
            "{m}"
        );
    }

    #[test]
    fn per_packet_counters_in_the_table_and_metrics() {
        let v = json!({
            "role": "gateway", "uptime_s": 3.0, "tun": {"name": "braid0"},
            "drops": {"datagram_truncated": 4, "datagram_replayed": 0},
            "connections": [{
                "peer": "a", "conn_id": "0000abcd", "established": true,
                "datagram": {
                    "sent_packets": 10, "received_packets": 900, "released_packets": 890,
                    "skipped": 10, "ofo_timeouts": 3,
                    "hold_us": {"p50": 100, "p99": 9800, "max": 10_100},
                    "paths_sent": [{"path": 1, "packets": 10, "lost": 0, "weight": 1.0,
                                    "stalled": true}],
                },
            }],
        });
        let t = status_table(&v);
        assert!(
            t.contains("datagram_truncated=4") && !t.contains("datagram_replayed"),
            "{t}"
        );
        assert!(
            t.contains("path 1 10 pkts (lost 0, weight 1.000, STALLED)"),
            "{t}"
        );
        assert!(
            t.contains("gaps given up 10, held p50 100 µs p99 9800 µs"),
            "{t}"
        );
        let m = prometheus(&v);
        assert!(
            m.contains("braid_tunnel_datagram_skipped{peer=\"a\"} 10\n"),
            "{m}"
        );
        assert!(
            m.contains("braid_tunnel_datagram_hold_us{peer=\"a\",quantile=\"p99\"} 9800\n"),
            "{m}"
        );
    }

    #[test]
    fn udp_counters_are_exported() {
        let v = json!({
            "role": "client", "connected": true,
            "udp": {"send_calls": 3, "datagrams_sent": 90, "gso_segments_max": 64},
        });
        let m = prometheus(&v);
        assert!(
            m.contains(
                "# TYPE braid_tunnel_udp_send_calls counter\nbraid_tunnel_udp_send_calls 3\n"
            ),
            "{m}"
        );
        assert!(
            m.contains("# TYPE braid_tunnel_udp_gso_segments_max gauge"),
            "{m}"
        );
        assert!(m.contains("braid_tunnel_connected 1\n"), "{m}");
    }
}
