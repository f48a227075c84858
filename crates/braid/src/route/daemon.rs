//! The `braid route` event loop: babeld's lines, rtnetlink and a sampling timer in; routes
//! and rules out over rtnetlink.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use braid_core::Instant;
use braid_io::babel::{Client, ClientError};
use braid_mptcp::NetMonitor;
use braid_mptcp::route::RouteClient;
use serde_json::{Value, json};

use super::config::{PROTOCOL, RouteSettings};
use super::driver::{Driver, Op};

/// Kernel requests that failed, kept for `status`.
const ERRORS_KEPT: usize = 20;
/// Reconnection attempts to babeld: first after this, doubling up to [`RECONNECT_MAX`].
const RECONNECT_MIN: Duration = Duration::from_millis(250);
const RECONNECT_MAX: Duration = Duration::from_secs(4);
/// errno values that say a deletion found nothing: the object is gone anyway.
const ESRCH: i32 = 3;
const ENOENT: i32 = 2;

pub async fn run(settings: RouteSettings) -> anyhow::Result<()> {
    let start = std::time::Instant::now();
    let now = move || Instant::from_micros(start.elapsed().as_micros() as u64);
    let endpoint = settings.babeld.clone();
    // Refuse at once, in one line, when babeld cannot be reached.
    let (client, header) = Client::connect(&endpoint).await?;
    let mut client = Some(client);
    let mut driver = Driver::new(settings.clone());
    driver
        .babeld_connected(&header)
        .map_err(anyhow::Error::msg)?;

    let shared = Arc::new(Mutex::new(Value::Null));
    let s = shared.clone();
    let control = braid_io::control::serve(
        &settings.control,
        Arc::new(move |req| match req {
            "status" | "" => s.lock().map(|v| v.clone()).unwrap_or(Value::Null),
            other => json!({ "error": format!("unknown request `{other}`: allowed status") }),
        }),
    )
    .await?;
    let metrics = match settings.metrics {
        Some(addr) => {
            let s = shared.clone();
            Some(
                braid_io::metrics::serve(
                    addr,
                    Arc::new(move || {
                        super::prometheus(&s.lock().map(|v| v.clone()).unwrap_or(Value::Null))
                    }),
                )
                .await?,
            )
        }
        None => None,
    };

    let (mut netmon, snapshot) = NetMonitor::connect().await.context("rtnetlink")?;
    for e in &snapshot {
        driver.on_net(e);
    }
    for l in &driver.lanes {
        if l.ifindex.is_none() {
            tracing::warn!("interface {} does not exist (yet)", l.name);
        }
    }
    let mut kernel = RouteClient::connect().context("rtnetlink routes")?;
    let mut errors = VecDeque::new();
    let stale = clean(&mut kernel, &driver).await?;
    if stale > 0 {
        tracing::info!(stale, "removed the routes and rules of an earlier run");
    }
    if let Some(c) = client.as_mut() {
        c.send("monitor").await?;
    }
    tracing::info!(
        policy = settings.policy.name(),
        babeld = %endpoint,
        control = %settings.control.display(),
        "braid route running"
    );

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut tick = tokio::time::interval(settings.sample);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut retry = RECONNECT_MIN;
    let mut reconnect_at: Option<tokio::time::Instant> = None;
    let mut last_malformed_log = None;
    loop {
        let mut changed = false;
        tokio::select! {
            r = next_line(&mut client) => match r {
                Ok(Some(line)) => {
                    if let Err(e) = driver.on_line(&line) {
                        // One warning per second at most; every line is counted.
                        let t = now();
                        if last_malformed_log.is_none_or(|l: Instant| t.saturating_since(l) >= Duration::from_secs(1)) {
                            tracing::warn!("babeld sent a line that is not its protocol, skipped: {e}");
                            last_malformed_log = Some(t);
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    match r {
                        Err(e) => tracing::warn!("babeld connection lost: {e}; routes are kept"),
                        _ => tracing::warn!("babeld closed its local interface; routes are kept"),
                    }
                    client = None;
                    driver.babeld_lost();
                    retry = RECONNECT_MIN;
                    reconnect_at = Some(tokio::time::Instant::now() + retry);
                    changed = true;
                }
            },
            () = sleep_until(reconnect_at) => {
                match reconnect(&endpoint, &mut driver).await {
                    Ok(c) => {
                        tracing::info!("babeld is back: resynchronising");
                        client = Some(c);
                        reconnect_at = None;
                    }
                    Err(e) => {
                        tracing::debug!("babeld still away: {e}");
                        retry = (retry * 2).min(RECONNECT_MAX);
                        reconnect_at = Some(tokio::time::Instant::now() + retry);
                    }
                }
                changed = true;
            }
            r = netmon.next() => {
                let e = r.context("rtnetlink monitor")?;
                driver.on_net(&e);
            }
            _ = tick.tick() => {
                driver.tick(now());
                changed = true;
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
        if changed {
            execute(&mut kernel, &mut driver, &mut errors).await;
            let v = super::status_json(&driver, &errors, now());
            if let Ok(mut s) = shared.lock() {
                *s = v;
            }
        }
    }
    tracing::info!("braid route stopping: its routes and rules are removed");
    let removed = remove_all(&mut kernel, &mut driver).await;
    if let Err(e) = removed {
        tracing::warn!("removing routes and rules: {e}");
    }
    control.abort();
    if let Some(m) = metrics {
        m.abort();
    }
    let _ = std::fs::remove_file(&settings.control);
    Ok(())
}

async fn next_line(c: &mut Option<Client>) -> Result<Option<String>, ClientError> {
    match c {
        Some(c) => c.next_line().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

async fn reconnect(endpoint: &braid_io::babel::Endpoint, d: &mut Driver) -> anyhow::Result<Client> {
    let (mut c, header) = Client::connect(endpoint).await?;
    d.babeld_connected(&header).map_err(anyhow::Error::msg)?;
    c.send("monitor").await?;
    Ok(c)
}

/// Executes the driver's plan, reporting each outcome back to it.
async fn execute(k: &mut RouteClient, d: &mut Driver, errors: &mut VecDeque<String>) {
    for op in d.plan() {
        let r = match &op {
            Op::Replace(r) => k.replace(r).await,
            Op::Delete { table, dest } => k.delete(*table, *dest).await,
            Op::AddRule(r) => k.add_rule(r).await,
            Op::DeleteRule(r) => k.delete_rule(r).await,
        };
        let gone = matches!(&r, Err(e) if matches!(e.errno(), Some(ESRCH | ENOENT)));
        // A rule the kernel already has is ours from before (the same request succeeded
        // without an answer): take it as done.
        let exists = matches!((&op, &r), (Op::AddRule(_), Err(e)) if e.errno() == Some(17));
        match &r {
            Ok(()) => tracing::debug!(?op, "kernel request done"),
            Err(_) if gone || exists => {}
            Err(e) => {
                let msg = format!("{}: {e}", op.name());
                tracing::warn!("{msg}");
                if errors.len() == ERRORS_KEPT {
                    errors.pop_front();
                }
                errors.push_back(msg);
            }
        }
        d.applied(&op, r.is_ok() || exists, gone);
    }
}

/// Removes what an earlier run may have left: rules with this daemon's protocol, and the
/// lanes' tables. Returns how many objects went.
async fn clean(k: &mut RouteClient, d: &Driver) -> anyhow::Result<usize> {
    let mut n = 0;
    for r in k.rules().await.context("listing policy rules")? {
        if r.protocol == PROTOCOL {
            k.delete_rule(&r).await.context("removing a stale rule")?;
            n += 1;
        }
    }
    for t in d.tables() {
        n += k.flush(t).await.context("flushing a lane table")?;
    }
    Ok(n)
}

/// At exit: the rules and the lanes' tables go, so traffic falls back to babeld's routes.
async fn remove_all(k: &mut RouteClient, d: &mut Driver) -> anyhow::Result<()> {
    let rules: Vec<_> = d.installed().1.cloned().collect();
    for r in &rules {
        if let Err(e) = k.delete_rule(r).await
            && !matches!(e.errno(), Some(ESRCH | ENOENT))
        {
            return Err(e.into());
        }
    }
    for t in d.tables().collect::<Vec<_>>() {
        k.flush(t).await?;
    }
    Ok(())
}
