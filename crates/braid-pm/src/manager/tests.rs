use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::*;
use crate::config::HmmConfig;

const C: ConnId = ConnId(7);
const WLAN: IfaceId = IfaceId(1);
const LTE: IfaceId = IfaceId(2);

fn ep(id: u8, ip: [u8; 4]) -> Endpoint {
    Endpoint {
        id: AddrId(id),
        addr: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), 0)),
    }
}

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// A manager with a Wi-Fi (threshold −82 dBm) and an LTE interface, an established connection,
/// and the LTE subflow (the initial one) established.
fn setup(mode: Mode, tweak: impl FnOnce(&mut Config)) -> Manager {
    let mut m = created(mode, tweak);
    m.handle_event(
        ms(1),
        &Event::ConnectionEstablished {
            conn: C,
            subflow: Some(SubflowId(100)),
            local: ep(2, [10, 0, 2, 2]),
            remote: ep(0, [192, 0, 2, 1]),
            iface: Some(LTE),
        },
    );
    m
}

/// As [`setup`], the connection created (its initial path opened from LTE) and not
/// established yet.
fn created(mode: Mode, tweak: impl FnOnce(&mut Config)) -> Manager {
    let mut wlan = IfaceConfig::new("wlan0");
    wlan.threshold_dbm = Some(-82.0);
    wlan.alpha = 1.0;
    let mut lte = IfaceConfig::new("lte0");
    lte.backup = matches!(mode.base(), Mode::CrossLayerBackup | Mode::Backup);
    let mut cfg = Config {
        mode,
        ifaces: vec![wlan, lte],
        ..Config::default()
    };
    if mode == Mode::Backup {
        cfg.ifaces[1].backup = true;
    }
    tweak(&mut cfg);
    let mut m = Manager::new(cfg).unwrap();
    for (iface, name, id, ip) in [
        (WLAN, "wlan0", 1, [10, 0, 1, 2]),
        (LTE, "lte0", 2, [10, 0, 2, 2]),
    ] {
        m.handle_event(
            ms(0),
            &Event::IfaceNew {
                iface,
                name: name.into(),
                up: true,
            },
        );
        m.handle_event(
            ms(0),
            &Event::LocalAddrNew {
                iface,
                id: AddrId(id),
                addr: Some(IpAddr::V4(Ipv4Addr::from(ip))),
            },
        );
    }
    let remote = ep(0, [192, 0, 2, 1]);
    m.handle_event(
        ms(0),
        &Event::ConnectionCreated {
            conn: C,
            local: ep(2, [10, 0, 2, 2]),
            remote,
            iface: Some(LTE),
            initiator: true,
        },
    );
    m
}

fn drain(m: &mut Manager) -> Vec<Command> {
    std::iter::from_fn(|| m.poll_command()).collect()
}

fn sig(m: &mut Manager, t: u64, iface: IfaceId, rssi: f64) -> Vec<Command> {
    m.handle_event(
        ms(t),
        &Event::Signal {
            iface,
            rssi_dbm: rssi,
        },
    );
    drain(m)
}

fn established(m: &mut Manager, t: u64, iface: IfaceId, id: u64, local: Endpoint) {
    m.handle_event(
        ms(t),
        &Event::SubflowEstablished {
            conn: C,
            subflow: SubflowId(id),
            iface: Some(iface),
            local,
            remote: ep(0, [192, 0, 2, 1]),
            backup: false,
        },
    );
}

/// The `ConnectionEstablished` a `ConnAdapter` reports: no subflow id, the first path's
/// interface (LTE) whichever path established the connection.
fn adapter_established(m: &mut Manager, t: u64) {
    m.handle_event(
        ms(t),
        &Event::ConnectionEstablished {
            conn: C,
            subflow: None,
            local: ep(2, [10, 0, 2, 2]),
            remote: ep(0, [192, 0, 2, 1]),
            iface: Some(LTE),
        },
    );
}

fn creates(cmds: &[Command], iface: IfaceId) -> bool {
    cmds.iter()
        .any(|c| matches!(c, Command::CreateSubflow { iface: i, .. } if *i == iface))
}

#[test]
fn full_mesh_creates_every_subflow_at_once_and_removes_on_interface_loss() {
    let mut m = setup(Mode::FullMesh, |_| {});
    let cmds = drain(&mut m);
    assert!(creates(&cmds, WLAN), "{cmds:?}");
    assert!(!creates(&cmds, LTE), "the initial subflow already exists");
    established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
    assert!(drain(&mut m).is_empty());
    // Signal means nothing to full mesh.
    assert!(sig(&mut m, 20, WLAN, -95.0).is_empty());
    m.handle_event(
        ms(30),
        &Event::IfaceUpdated {
            iface: WLAN,
            up: false,
        },
    );
    assert_eq!(
        drain(&mut m),
        vec![Command::RemoveSubflow {
            conn: C,
            subflow: SubflowId(101)
        }]
    );
}

#[test]
fn backup_mode_flags_the_configured_interface() {
    let mut m = setup(Mode::Backup, |_| {});
    let cmds = drain(&mut m);
    assert!(cmds.iter().any(
        |c| matches!(c, Command::CreateSubflow { iface, backup: false, .. } if *iface == WLAN)
    ));
    // The connection's first subflow is on the backup interface (LTE), opened by the
    // application without the flag: the manager flags it, once.
    let flags = |cmds: &[Command]| {
        cmds.iter()
            .filter(|c| {
                **c == Command::SetBackup {
                    conn: C,
                    subflow: SubflowId(100),
                    backup: true,
                }
            })
            .count()
    };
    assert_eq!(flags(&cmds), 1, "{cmds:?}");
    established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
    assert_eq!(flags(&drain(&mut m)), 0);
}

#[test]
fn cross_layer_follows_algorithm_1() {
    let mut m = setup(Mode::CrossLayer, |_| {});
    // No subflow on an interface without a good signal (seed 000: none at connection start).
    assert!(!creates(&drain(&mut m), WLAN));
    // RSSI > T: establish the subflow.
    let cmds = sig(&mut m, 100, WLAN, -70.0);
    assert!(creates(&cmds, WLAN), "{cmds:?}");
    established(&mut m, 120, WLAN, 101, ep(1, [10, 0, 1, 2]));
    assert!(drain(&mut m).is_empty());
    // RSSI ≤ T with an active subflow: backup.
    let cmds = sig(&mut m, 200, WLAN, -85.0);
    assert_eq!(
        cmds,
        vec![Command::SetBackup {
            conn: C,
            subflow: SubflowId(101),
            backup: true
        }]
    );
    // Still bad: nothing more.
    assert!(sig(&mut m, 300, WLAN, -88.0).is_empty());
    // RSSI > T again: backup cleared.
    assert_eq!(
        sig(&mut m, 400, WLAN, -75.0),
        vec![Command::SetBackup {
            conn: C,
            subflow: SubflowId(101),
            backup: false
        }]
    );
    // Interface unavailable: remove S.
    m.handle_event(
        ms(500),
        &Event::LocalAddrRemoved {
            iface: WLAN,
            id: AddrId(1),
        },
    );
    assert_eq!(
        drain(&mut m),
        vec![Command::RemoveSubflow {
            conn: C,
            subflow: SubflowId(101)
        }]
    );
    assert_eq!(m.stats().backup_set, 1);
    assert_eq!(m.stats().backup_cleared, 1);
}

#[test]
fn a_requested_subflow_is_cancelled_if_the_signal_drops_first() {
    let mut m = setup(Mode::CrossLayer, |_| {});
    drain(&mut m);
    assert!(creates(&sig(&mut m, 100, WLAN, -70.0), WLAN));
    // Not established yet, signal gone: the request is dropped, nothing to send.
    assert!(sig(&mut m, 110, WLAN, -90.0).is_empty());
    assert_eq!(m.subflows().filter(|s| s.2 == WLAN).count(), 0);
    // The late establishment is then brought in line: flagged backup at once.
    established(&mut m, 120, WLAN, 101, ep(1, [10, 0, 1, 2]));
    assert_eq!(
        drain(&mut m),
        vec![Command::SetBackup {
            conn: C,
            subflow: SubflowId(101),
            backup: true
        }]
    );
}

#[test]
fn smoothing_is_the_ewma_of_algorithm_1() {
    let mut m = setup(Mode::CrossLayer, |c| c.ifaces[0].alpha = 0.25);
    drain(&mut m);
    sig(&mut m, 0, WLAN, -60.0);
    sig(&mut m, 100, WLAN, -100.0);
    // (1 − 0.25)·(−60) + 0.25·(−100) = −70
    let rssi = m
        .ifaces()
        .find(|i| i.iface == WLAN)
        .unwrap()
        .rssi_dbm
        .unwrap();
    assert!((rssi + 70.0).abs() < 1e-9, "{rssi}");
}

#[test]
fn backup_mode_variant_activates_the_backup_before_demoting_the_primary() {
    let mut m = setup(Mode::CrossLayerBackup, |_| {});
    // At start the primary has no signal: LTE is the only usable interface; no command.
    drain(&mut m);
    let cmds = sig(&mut m, 100, WLAN, -70.0);
    assert!(creates(&cmds, WLAN), "{cmds:?}");
    established(&mut m, 120, WLAN, 101, ep(1, [10, 0, 1, 2]));
    let cmds = drain(&mut m);
    // The primary works: LTE steps back to backup.
    assert_eq!(
        cmds,
        vec![Command::SetBackup {
            conn: C,
            subflow: SubflowId(100),
            backup: true
        }]
    );
    // The primary weakens: first LTE active, then the primary backup.
    let cmds = sig(&mut m, 200, WLAN, -84.0);
    assert_eq!(
        cmds,
        vec![
            Command::SetBackup {
                conn: C,
                subflow: SubflowId(100),
                backup: false
            },
            Command::SetBackup {
                conn: C,
                subflow: SubflowId(101),
                backup: true
            },
        ]
    );
    // Recovery: the reverse.
    let cmds = sig(&mut m, 300, WLAN, -70.0);
    assert_eq!(
        cmds,
        vec![
            Command::SetBackup {
                conn: C,
                subflow: SubflowId(101),
                backup: false
            },
            Command::SetBackup {
                conn: C,
                subflow: SubflowId(100),
                backup: true
            },
        ]
    );
}

#[test]
fn backup_mode_variant_can_remove_the_weak_primary() {
    let mut m = setup(Mode::CrossLayerBackup, |c| c.remove_weak = true);
    drain(&mut m);
    sig(&mut m, 100, WLAN, -70.0);
    established(&mut m, 120, WLAN, 101, ep(1, [10, 0, 1, 2]));
    drain(&mut m);
    let cmds = sig(&mut m, 200, WLAN, -90.0);
    assert!(cmds.contains(&Command::RemoveSubflow {
        conn: C,
        subflow: SubflowId(101)
    }));
    // On recovery the primary's subflow is created again.
    assert!(creates(&sig(&mut m, 300, WLAN, -70.0), WLAN));
}

#[test]
fn hysteresis_reduces_flips_on_a_noisy_signal() {
    let noisy: Vec<f64> = (0..200)
        .map(|i| -82.0 + if i % 2 == 0 { 1.5 } else { -1.5 })
        .collect();
    let flips = |h: f64| {
        let mut m = setup(Mode::CrossLayer, |c| c.ifaces[0].hysteresis_db = h);
        drain(&mut m);
        sig(&mut m, 0, WLAN, -60.0);
        established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
        drain(&mut m);
        for (k, v) in noisy.iter().enumerate() {
            sig(&mut m, 100 + k as u64 * 100, WLAN, *v);
        }
        m.ifaces().find(|i| i.iface == WLAN).unwrap().flips
    };
    let none = flips(0.0);
    let some = flips(3.0);
    assert!(none >= 150, "{none}");
    assert_eq!(some, 1, "once demoted it stays demoted below T + 3 dB");
}

#[test]
fn hmm_demotes_a_fading_link_before_it_crosses_the_threshold() {
    let mut m = setup(Mode::CrossLayer, |c| {
        c.hmm = Some(HmmConfig {
            interval: Duration::from_millis(1000),
            window: 4,
            ..HmmConfig::default()
        })
    });
    drain(&mut m);
    sig(&mut m, 0, WLAN, -60.0);
    established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
    drain(&mut m);
    let mut demoted_at = None;
    // −2 dB per second from −70 dBm: T = −82 is crossed at t = 6 s.
    for s in 1..10u64 {
        let cmds = sig(&mut m, s * 1000 - 1, WLAN, -70.0 - 2.0 * s as f64);
        m.handle_timeout(ms(s * 1000));
        let cmds: Vec<_> = cmds.into_iter().chain(drain(&mut m)).collect();
        if demoted_at.is_none()
            && cmds
                .iter()
                .any(|c| matches!(c, Command::SetBackup { backup: true, .. }))
        {
            demoted_at = Some(s);
        }
    }
    let at = demoted_at.expect("demoted");
    let status = m.ifaces().find(|i| i.iface == WLAN).unwrap();
    assert_eq!(status.predicted, Some(State::Disconnect));
    assert!(
        at < 6,
        "the prediction acts at {at} s, before the threshold at 6 s"
    );
    assert!(m.decisions().iter().any(|d| d.reason == Reason::Prediction));
}

#[test]
fn the_decision_log_keeps_the_most_recent_and_says_which_are_new() {
    let mut m = wlan_up(Mode::CrossLayer);
    let seen = m.decisions_total();
    assert!(seen > 0);
    assert_eq!(m.decisions_since(seen).count(), 0);
    // WLAN fades and recovers 600 times: two decisions each, more than the log keeps.
    for k in 0..600u64 {
        sig(&mut m, 100 + 20 * k, WLAN, -84.0);
        sig(&mut m, 110 + 20 * k, WLAN, -70.0);
    }
    assert_eq!(m.decisions_total(), seen + 1200);
    assert_eq!(m.decisions().len(), 1024);
    // The newest is the last recovery, and "since" gives exactly the ones after a count.
    let last = m.decisions().back().unwrap();
    assert_eq!(last.at, ms(110 + 20 * 599));
    assert!(matches!(
        last.command,
        Command::SetBackup { backup: false, .. }
    ));
    let new: Vec<_> = m.decisions_since(m.decisions_total() - 3).collect();
    assert_eq!(new.len(), 3);
    assert_eq!(new[2].at, last.at);
    // More new decisions than the log keeps: all it has.
    assert_eq!(m.decisions_since(seen).count(), 1024);
}

#[test]
fn same_subnet_pairing_picks_the_matching_remote() {
    let mut m = setup(Mode::FullMesh, |c| c.same_subnet = true);
    // Only the LTE subnet matches the primary remote? No: 10.0.1.0/24 has no remote yet.
    let cmds = drain(&mut m);
    assert!(!creates(&cmds, WLAN), "{cmds:?}");
    m.handle_event(
        ms(5),
        &Event::AddrAnnounced {
            conn: C,
            remote: ep(3, [10, 0, 1, 1]),
        },
    );
    m.handle_event(
        ms(6),
        &Event::LocalAddrNew {
            iface: WLAN,
            id: AddrId(1),
            addr: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2))),
        },
    );
    let cmds = drain(&mut m);
    let Some(Command::CreateSubflow { remote, .. }) = cmds
        .iter()
        .find(|c| matches!(c, Command::CreateSubflow { .. }))
    else {
        panic!("{cmds:?}");
    };
    assert_eq!(remote.id, AddrId(3));
}

#[test]
fn bad_samples_and_unknown_interfaces_are_counted() {
    let mut m = setup(Mode::CrossLayer, |_| {});
    drain(&mut m);
    assert!(sig(&mut m, 1, WLAN, f64::NAN).is_empty());
    assert!(sig(&mut m, 2, WLAN, 999.0).is_empty());
    assert!(sig(&mut m, 3, IfaceId(99), -60.0).is_empty());
    assert_eq!(m.stats().bad_samples, 2);
    assert_eq!(m.stats().unknown_iface_samples, 1);
}

#[test]
fn configuration_errors_say_what_is_allowed() {
    let bad = |f: &dyn Fn(&mut Config)| {
        let mut c = Config {
            mode: Mode::CrossLayer,
            ifaces: vec![IfaceConfig {
                threshold_dbm: Some(-82.0),
                ..IfaceConfig::new("wlan0")
            }],
            ..Config::default()
        };
        f(&mut c);
        Manager::new(c).unwrap_err()
    };
    assert!(bad(&|c| c.ifaces[0].alpha = 0.0).contains("0 < alpha ≤ 1"));
    assert!(bad(&|c| c.ifaces[0].threshold_dbm = None).contains("threshold"));
    assert!(bad(&|c| c.mode = Mode::CrossLayerBackup).contains("backup = true"));
    // The capacity settings are checked in modes that do not read them too.
    assert!(
        bad(&|c| {
            c.mode = Mode::FullMesh;
            c.capacity.main_share = 2.0;
        })
        .contains("main_share")
    );
}

fn closed(m: &mut Manager, t: u64, subflow: Option<u64>, iface: Option<IfaceId>) {
    m.handle_event(
        ms(t),
        &Event::SubflowClosed {
            conn: C,
            subflow: subflow.map(SubflowId),
            iface,
        },
    );
}

/// Runs the manager's timers up to `t` and returns the commands they produced.
fn until(m: &mut Manager, t: u64) -> Vec<Command> {
    while let Some(d) = m.poll_timeout().filter(|d| *d <= ms(t)) {
        m.handle_timeout(d);
    }
    drain(m)
}

#[test]
fn a_broken_subflow_is_opened_again_while_its_interface_is_usable() {
    let mut m = setup(Mode::FullMesh, |_| {});
    let _ = drain(&mut m);
    established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
    // Both subflows break (no REMOVE from the manager itself): nothing at once, both after
    // the first backoff.
    closed(&mut m, 1000, Some(101), None);
    closed(&mut m, 1000, Some(100), None);
    assert!(drain(&mut m).is_empty());
    assert!(until(&mut m, 1000 + REOPEN_MIN.as_millis() as u64 - 1).is_empty());
    let cmds = until(&mut m, 1000 + REOPEN_MIN.as_millis() as u64);
    assert!(creates(&cmds, WLAN) && creates(&cmds, LTE), "{cmds:?}");
    assert_eq!(m.stats().reopen_checks, 2);
}

#[test]
fn a_request_that_fails_is_forgotten_and_asked_again_with_backoff() {
    let mut m = setup(Mode::FullMesh, |_| {});
    let cmds = drain(&mut m);
    assert!(creates(&cmds, WLAN));
    // The backend refuses the request (no id yet): one retry after each backoff, growing.
    let mut t = 100;
    let mut waits = Vec::new();
    for _ in 0..6 {
        closed(&mut m, t, None, Some(WLAN));
        let at = m.poll_timeout().expect("a retry is scheduled");
        waits.push(at.saturating_since(ms(t)));
        let cmds = until(&mut m, at.micros() / 1000);
        assert!(creates(&cmds, WLAN), "{cmds:?}");
        t = at.micros() / 1000;
    }
    assert_eq!(waits[0], REOPEN_MIN);
    assert!(waits.windows(2).all(|w| w[1] >= w[0]), "{waits:?}");
    assert_eq!(*waits.last().unwrap(), REOPEN_MAX);
    // Established: the backoff starts over.
    established(&mut m, t + 10, WLAN, 102, ep(1, [10, 0, 1, 2]));
    closed(&mut m, t + 20, Some(102), None);
    assert_eq!(m.poll_timeout(), Some(ms(t + 20) + REOPEN_MIN));
}

/// The initial path goes before the connection is established (its address removed during
/// the handshake): a new initial path goes out after the backoff, from another usable
/// interface, to the peer's primary address; a refused one is asked again with a longer
/// backoff; once a path establishes the connection, the policy takes over as usual.
#[test]
fn a_connection_whose_initial_path_goes_before_it_is_established_gets_a_new_one() {
    let mut m = created(Mode::FullMesh, |_| {});
    assert!(
        drain(&mut m).is_empty(),
        "nothing before the connection is established"
    );
    // While the handshake is under way nothing else is opened, whatever happens.
    m.handle_event(
        ms(50),
        &Event::IfaceUpdated {
            iface: WLAN,
            up: true,
        },
    );
    assert!(until(&mut m, 3000).is_empty());
    m.handle_event(
        ms(3000),
        &Event::LocalAddrRemoved {
            iface: LTE,
            id: AddrId(2),
        },
    );
    closed(&mut m, 3000, Some(0), Some(LTE));
    assert!(drain(&mut m).is_empty());
    let cmds = until(&mut m, 3000 + REOPEN_MIN.as_millis() as u64);
    let [
        Command::CreateSubflow {
            iface,
            local,
            remote,
            ..
        },
    ] = cmds.as_slice()
    else {
        panic!("one new initial path: {cmds:?}");
    };
    assert_eq!((*iface, local.id), (WLAN, AddrId(1)));
    assert_eq!(*remote, ep(0, [192, 0, 2, 1]));
    assert_eq!(m.stats().initial_reopened, 1);
    // Refused (the runtime cannot send yet): asked again, after a longer wait.
    let t = 3000 + REOPEN_MIN.as_millis() as u64;
    closed(&mut m, t, None, Some(WLAN));
    assert_eq!(m.poll_timeout(), Some(ms(t) + REOPEN_MIN * 2));
    let cmds = until(&mut m, t + 2 * REOPEN_MIN.as_millis() as u64);
    assert!(creates(&cmds, WLAN) && !creates(&cmds, LTE), "{cmds:?}");
    // It establishes the connection (the core reports the path first): no other path is
    // assumed, and the full mesh opens LTE once its address is back.
    let t = t + 2 * REOPEN_MIN.as_millis() as u64 + 30;
    established(&mut m, t, WLAN, 2, ep(1, [10, 0, 1, 2]));
    adapter_established(&mut m, t);
    assert!(drain(&mut m).is_empty(), "LTE has no address");
    m.handle_event(
        ms(t + 10),
        &Event::LocalAddrNew {
            iface: LTE,
            id: AddrId(2),
            addr: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 2))),
        },
    );
    assert!(creates(&drain(&mut m), LTE));
    assert_eq!(m.stats().initial_reopened, 2);
}

/// Happy Eyeballs for the first path: with `race` set, a connection whose first path (LTE)
/// has not answered after the delay opens one over the other interface too, once; the
/// connection established over it, the first path still opening is not asked for again and
/// takes its place when it answers.
#[test]
fn a_first_path_unanswered_for_the_race_delay_is_raced_over_another_interface() {
    let race = Duration::from_millis(1000);
    let mut m = created(Mode::FullMesh, |c| c.race = Some(race));
    assert!(until(&mut m, 999).is_empty(), "nothing before the delay");
    let cmds = until(&mut m, 1000);
    let [
        Command::CreateSubflow {
            iface,
            local,
            remote,
            backup,
            ..
        },
    ] = cmds.as_slice()
    else {
        panic!("one raced first path: {cmds:?}");
    };
    assert_eq!((*iface, local.id, *backup), (WLAN, AddrId(1), false));
    assert_eq!(*remote, ep(0, [192, 0, 2, 1]));
    assert_eq!(m.stats().initial_raced, 1);
    let last = m.decisions().back().expect("logged");
    assert_eq!(last.reason, Reason::Race);
    // Every interface has a path opening: nothing more, however long it takes.
    assert!(until(&mut m, 10_000).is_empty());
    // The raced path establishes the connection (the adapter names the first path's
    // interface in `ConnectionEstablished`): no second path asked for on LTE.
    established(&mut m, 10_010, WLAN, 1, ep(1, [10, 0, 1, 2]));
    adapter_established(&mut m, 10_010);
    assert!(drain(&mut m).is_empty());
    assert!(until(&mut m, 20_000).is_empty(), "no race once established");
    // The first path answers late and becomes LTE's subflow; when it breaks, LTE is opened
    // again after the backoff, as any subflow would be.
    established(&mut m, 20_000, LTE, 0, ep(2, [10, 0, 2, 2]));
    assert!(drain(&mut m).is_empty());
    closed(&mut m, 21_000, Some(0), Some(LTE));
    let cmds = until(&mut m, 21_000 + REOPEN_MIN.as_millis() as u64);
    assert!(creates(&cmds, LTE) && !creates(&cmds, WLAN), "{cmds:?}");
    assert_eq!(m.stats().initial_raced, 1);
}

/// The first path still opening when the connection was established over the raced one
/// fails instead (declared broken): its interface is opened again after the backoff. A
/// first path that answers within the delay is never raced.
#[test]
fn a_first_path_that_fails_after_the_race_is_reopened_and_one_in_time_is_not_raced() {
    let mut m = created(Mode::FullMesh, |c| c.race = Some(Duration::from_secs(1)));
    assert!(creates(&until(&mut m, 1000), WLAN));
    established(&mut m, 1030, WLAN, 1, ep(1, [10, 0, 1, 2]));
    adapter_established(&mut m, 1030);
    assert!(drain(&mut m).is_empty());
    closed(&mut m, 4000, Some(0), Some(LTE));
    assert!(drain(&mut m).is_empty());
    let cmds = until(&mut m, 4000 + REOPEN_MIN.as_millis() as u64);
    assert!(creates(&cmds, LTE), "{cmds:?}");

    // In time: established at 999 ms, the full mesh opens WLAN as usual and no race follows.
    let mut m = created(Mode::FullMesh, |c| c.race = Some(Duration::from_secs(1)));
    established(&mut m, 999, LTE, 0, ep(2, [10, 0, 2, 2]));
    adapter_established(&mut m, 999);
    assert!(creates(&drain(&mut m), WLAN));
    assert!(until(&mut m, 10_000).is_empty());
    assert_eq!(m.stats().initial_raced, 0);
}

/// Backup mode: the race takes an interface that is not a backup before a backup (whatever
/// the interfaces' order), and flags a raced path on a backup as one. With the race off (the
/// default) nothing is opened before the connection is established.
#[test]
fn the_race_prefers_interfaces_that_are_not_backups_and_is_off_by_default() {
    const SAT: IfaceId = IfaceId(0);
    // The first path on LTE (a backup); a second backup, sat0, comes first in order.
    let mut m = created(Mode::Backup, |c| {
        c.race = Some(Duration::from_millis(500));
        let mut sat = IfaceConfig::new("sat0");
        sat.backup = true;
        c.ifaces.push(sat);
    });
    m.handle_event(
        ms(0),
        &Event::IfaceNew {
            iface: SAT,
            name: "sat0".into(),
            up: true,
        },
    );
    m.handle_event(
        ms(0),
        &Event::LocalAddrNew {
            iface: SAT,
            id: AddrId(3),
            addr: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 3, 2))),
        },
    );
    let cmds = until(&mut m, 500);
    let [Command::CreateSubflow { iface, backup, .. }] = cmds.as_slice() else {
        panic!("one raced path: {cmds:?}");
    };
    assert_eq!((*iface, *backup), (WLAN, false));
    let cmds = until(&mut m, 1000);
    let [Command::CreateSubflow { iface, backup, .. }] = cmds.as_slice() else {
        panic!("one more raced path: {cmds:?}");
    };
    assert_eq!((*iface, *backup), (SAT, true));
    assert!(until(&mut m, 5000).is_empty());
    assert_eq!(m.stats().initial_raced, 2);
    // Off (the default): nothing before the connection is established.
    let mut m = created(Mode::FullMesh, |_| {});
    assert!(until(&mut m, 60_000).is_empty());
    assert_eq!(m.stats().initial_raced, 0);
    // A delay under 10 ms is refused.
    let cfg = Config {
        race: Some(Duration::from_millis(5)),
        ..Config::default()
    };
    assert!(cfg.validate().unwrap_err().contains("race"));
}

#[test]
fn a_closed_subflow_on_a_gone_interface_is_not_reopened() {
    let mut m = setup(Mode::FullMesh, |_| {});
    let _ = drain(&mut m);
    established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
    m.handle_event(
        ms(20),
        &Event::LocalAddrRemoved {
            iface: WLAN,
            id: AddrId(1),
        },
    );
    let _ = drain(&mut m);
    closed(&mut m, 21, Some(101), Some(WLAN));
    let cmds = until(&mut m, 10_000);
    assert!(!creates(&cmds, WLAN), "{cmds:?}");
    // The address returns: the subflow is opened at once.
    m.handle_event(
        ms(10_000),
        &Event::LocalAddrNew {
            iface: WLAN,
            id: AddrId(1),
            addr: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2))),
        },
    );
    assert!(creates(&drain(&mut m), WLAN));
}

#[test]
fn the_close_of_a_removed_subflow_keeps_a_new_request_on_its_interface() {
    let mut m = setup(Mode::FullMesh, |_| {});
    let _ = drain(&mut m);
    established(&mut m, 10, WLAN, 101, ep(1, [10, 0, 1, 2]));
    // The interface goes and comes back before the backend confirms the removal.
    m.handle_event(
        ms(20),
        &Event::IfaceUpdated {
            iface: WLAN,
            up: false,
        },
    );
    assert!(drain(&mut m).iter().any(
        |c| matches!(c, Command::RemoveSubflow { subflow, .. } if *subflow == SubflowId(101))
    ));
    m.handle_event(
        ms(30),
        &Event::IfaceUpdated {
            iface: WLAN,
            up: true,
        },
    );
    assert!(creates(&drain(&mut m), WLAN));
    // The removed subflow's close arrives late: the request for its successor stays.
    closed(&mut m, 40, Some(101), Some(WLAN));
    assert!(
        m.subflows()
            .any(|(_, id, iface, _)| iface == WLAN && id.is_none())
    );
    established(&mut m, 50, WLAN, 102, ep(1, [10, 0, 1, 2]));
    assert!(
        m.subflows()
            .any(|(_, id, iface, _)| iface == WLAN && id == Some(SubflowId(102)))
    );
    assert_eq!(m.subflows().filter(|s| s.2 == WLAN).count(), 1);
    assert!(until(&mut m, 10_000).is_empty());
}

/// Capacity-aware modes: `secs` seconds of traffic samples every 250 ms from `t0` (ms), at
/// `wlan` and `lte` bit/s; returns the time of the last sample and every command it caused.
fn carry(
    m: &mut Manager,
    bytes: &mut [u64; 2],
    t0: u64,
    secs: u64,
    wlan: f64,
    lte: f64,
) -> (u64, Vec<Command>) {
    let mut t = t0;
    let mut cmds = Vec::new();
    while t < t0 + secs * 1000 {
        t += 250;
        m.handle_timeout(ms(t));
        assert!(m.wants_traffic(), "a sample is due every 250 ms");
        bytes[0] += (wlan / 32.0) as u64;
        bytes[1] += (lte / 32.0) as u64;
        m.handle_event(
            ms(t),
            &Event::Traffic {
                bytes: vec![(WLAN, bytes[0]), (LTE, bytes[1])],
            },
        );
        assert!(!m.wants_traffic());
        cmds.extend(drain(m));
    }
    (t, cmds)
}

fn backup_of(cmds: &[Command], id: u64) -> Option<bool> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SetBackup {
            subflow, backup, ..
        } if subflow.0 == id => Some(*backup),
        _ => None,
    })
}

/// A capacity-aware manager with WLAN's subflow (101) established, after LTE carried the
/// 4 Mbit/s stream alone at `lte_rate` for 20 s and WLAN then carried it for 20 s.
/// A manager in `mode` with WLAN's subflow 101 established and its signal good.
fn wlan_up(mode: Mode) -> Manager {
    let mut m = setup(mode, |_| {});
    sig(&mut m, 10, WLAN, -70.0);
    established(&mut m, 20, WLAN, 101, ep(1, [10, 0, 1, 2]));
    drain(&mut m);
    m
}

fn capacity_setup(mode: Mode, lte_rate: f64) -> (Manager, [u64; 2], u64) {
    let mut m = wlan_up(mode);
    let mut b = [0, 0];
    let (t, _) = carry(&mut m, &mut b, 100, 20, 0.0, lte_rate);
    let (t, cmds) = carry(&mut m, &mut b, t, 20, 4e6, 0.0);
    // Nothing fades yet (WLAN may be watched for a stall: see the watch's own test). In the
    // backup modes LTE, active since the connection began on it, stands by once WLAN carried
    // the demand.
    assert!(
        cmds.iter().all(|c| matches!(
            c,
            Command::SetWatch { .. }
                | Command::SetBackup {
                    subflow: SubflowId(100),
                    backup: true,
                    ..
                }
        )),
        "{cmds:?}"
    );
    if mode.base() == Mode::CrossLayerBackup {
        assert_eq!(backup_of(&cmds, 100), Some(true), "{cmds:?}");
    }
    (m, b, t)
}

/// The last `SetWatch` for subflow `id` among `cmds`.
fn watch_of(cmds: &[Command], id: u64) -> Option<bool> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SetWatch { subflow, on, .. } if subflow.0 == id => Some(*on),
        _ => None,
    })
}

#[test]
fn capacity_aware_modes_watch_an_active_radio_link_once_the_others_carried_the_demand() {
    let mut m = wlan_up(Mode::CrossLayerCapacity);
    let mut b = [0, 0];
    // WLAN carries the stream; LTE has not shown it can: no watch (no evidence is a no).
    let (t, cmds) = carry(&mut m, &mut b, 100, 20, 4e6, 0.0);
    assert_eq!(watch_of(&cmds, 101), None, "{cmds:?}");
    // LTE carries it for a while (WLAN still active): WLAN is watched from then on.
    let (t, cmds) = carry(&mut m, &mut b, t, 20, 0.0, 4e6);
    assert_eq!(watch_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(m.stats().watches, 1);
    let (t, cmds) = carry(&mut m, &mut b, t, 5, 4e6, 0.0);
    assert_eq!(watch_of(&cmds, 101), None, "set once: {cmds:?}");
    // Demoted (signal below T): a backup is not watched.
    let cmds = sig(&mut m, t + 10, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(watch_of(&cmds, 101), Some(false), "{cmds:?}");
    assert!(
        Command::SetWatch {
            conn: C,
            subflow: SubflowId(101),
            on: true
        }
        .describe()
        .contains("watch subflow 101")
    );
    // Not once LTE has carried less than the stream (2 Mbit/s: while the stream was that
    // slow it carried all of it, and WLAN was watched; not after the stream rose to 4 Mbit/s),
    // nor in Algorithm 1 (`cross`).
    let (_, cmds) = {
        let mut m = wlan_up(Mode::CrossLayerCapacity);
        let mut b = [0, 0];
        let (t, mut all) = carry(&mut m, &mut b, 100, 20, 0.0, 2e6);
        let (t, more) = carry(&mut m, &mut b, t, 20, 4e6, 0.0);
        all.extend(more);
        (t, all)
    };
    assert_eq!(watch_of(&cmds, 101), Some(false), "{cmds:?}");
    let mut m = wlan_up(Mode::CrossLayer);
    let cmds = sig(&mut m, 100, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(watch_of(&cmds, 101), None, "{cmds:?}");
    assert_eq!(m.stats().watches, 0);
}

#[test]
fn capacity_aware_cross_demotes_onto_a_link_that_carried_the_demand() {
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerCapacity, 4e6);
    let demand = m.demand_bps().unwrap();
    assert!((demand - 4e6).abs() < 0.05e6, "{demand}");
    let lte = m.ifaces().find(|i| i.iface == LTE).unwrap();
    assert!(lte.carried_bps.unwrap() > 3.9e6, "{lte:?}");
    // Below T: LTE has carried the stream, so WLAN is demoted at once (Algorithm 1).
    let cmds = sig(&mut m, t + 10, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(m.stats().demotions_withheld, 0);
}

fn reinjects(cmds: &[Command], id: u64) -> usize {
    cmds.iter()
        .filter(|c| matches!(c, Command::Reinject { subflow, .. } if subflow.0 == id))
        .count()
}

#[test]
fn capacity_aware_demotion_onto_a_link_that_carries_resends_what_was_in_flight() {
    // Demoted onto LTE, which carried the stream: WLAN's data in flight goes over LTE at once,
    // right after the backup flag.
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerCapacity, 4e6);
    let cmds = sig(&mut m, t + 10, WLAN, -84.0);
    assert_eq!(reinjects(&cmds, 101), 1, "{cmds:?}");
    let at = |f: &dyn Fn(&Command) -> bool| cmds.iter().position(f).unwrap();
    assert!(
        at(&|c| matches!(c, Command::SetBackup { backup: true, .. }))
            < at(&|c| matches!(c, Command::Reinject { .. })),
        "{cmds:?}"
    );
    assert_eq!(m.stats().reinjections, 1);
    // Algorithm 1 (`cross`) leaves it to the transport's timers.
    let mut m = wlan_up(Mode::CrossLayer);
    let cmds = sig(&mut m, 100, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(reinjects(&cmds, 101), 0, "{cmds:?}");
    // Nor when the link that takes the stream has not been seen carrying it (demoted anyway
    // below the floor): the copies would add to its backlog.
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerCapacity, 2e6);
    let cmds = sig(&mut m, t + 10, WLAN, -84.1);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(reinjects(&cmds, 101), 0, "{cmds:?}");
}

#[test]
fn capacity_aware_cross_keeps_a_fading_link_the_others_cannot_replace() {
    let (mut m, mut b, t) = capacity_setup(Mode::CrossLayerCapacity, 2e6);
    // LTE delivered 2 Mbit/s while it carried a 4 Mbit/s stream: WLAN stays active below T ...
    let cmds = sig(&mut m, t + 10, WLAN, -83.0);
    assert_eq!(backup_of(&cmds, 101), None, "{cmds:?}");
    assert!(m.stats().demotions_withheld > 0);
    // ... while it carries the stream ...
    let (t, cmds) = carry(&mut m, &mut b, t + 10, 3, 4e6, 0.0);
    assert_eq!(backup_of(&cmds, 101), None, "{cmds:?}");
    // ... until its signal falls `floor_db` (2 dB) below T: then it is demoted anyway, before
    // it fails.
    assert_eq!(backup_of(&sig(&mut m, t + 10, WLAN, -83.9), 101), None);
    assert_eq!(
        backup_of(&sig(&mut m, t + 20, WLAN, -84.1), 101),
        Some(true)
    );
}

#[test]
fn capacity_aware_cross_takes_a_demotion_back_when_the_other_link_falls_short() {
    let (mut m, mut b, t) = capacity_setup(Mode::CrossLayerCapacity, 4e6);
    assert_eq!(
        backup_of(&sig(&mut m, t + 10, WLAN, -83.0), 101),
        Some(true)
    );
    m.handle_event(
        ms(t + 11),
        &Event::SubflowPriority {
            conn: C,
            subflow: SubflowId(101),
            backup: true,
        },
    );
    // LTE now carries the stream alone at 2 Mbit/s: within a few seconds WLAN, still above
    // the floor, carries again.
    let (t, cmds) = carry(&mut m, &mut b, t + 10, 10, 0.0, 2e6);
    assert_eq!(backup_of(&cmds, 101), Some(false), "{cmds:?}");
    let why = m
        .decisions()
        .iter()
        .rev()
        .find(|d| matches!(d.command, Command::SetBackup { backup: false, .. }))
        .unwrap();
    assert_eq!(why.reason, Reason::Capacity);
    assert!(why.at < ms(t), "{why:?}");
}

#[test]
fn capacity_aware_cross_without_traffic_samples_is_algorithm_1() {
    let mut m = wlan_up(Mode::CrossLayerCapacity);
    // A runtime that never answers `wants_traffic`: the manager keeps going.
    for t in (100..2000).step_by(250) {
        m.handle_timeout(ms(t));
    }
    assert!(m.poll_timeout().is_some_and(|t| t > ms(1750)));
    assert_eq!(backup_of(&sig(&mut m, 2000, WLAN, -84.0), 101), Some(true));
}

#[test]
fn capacity_aware_backup_mode_adds_the_backup_before_it_drops_the_primary() {
    let (mut m, mut b, t) = capacity_setup(Mode::CrossLayerBackupCapacity, 2e6);
    // WLAN fades: LTE (id 100, flagged backup while WLAN was good) is activated, WLAN stays.
    let cmds = sig(&mut m, t + 10, WLAN, -83.0);
    assert_eq!(backup_of(&cmds, 100), Some(false), "{cmds:?}");
    assert_eq!(backup_of(&cmds, 101), None, "{cmds:?}");
    let (t, cmds) = carry(&mut m, &mut b, t + 10, 2, 3e6, 1e6);
    assert_eq!(backup_of(&cmds, 101), None, "{cmds:?}");
    assert_eq!(backup_of(&sig(&mut m, t + 5, WLAN, -83.5), 101), None);
    // Below the floor the primary is demoted.
    assert_eq!(
        backup_of(&sig(&mut m, t + 10, WLAN, -86.0), 101),
        Some(true)
    );
    // With an LTE that carried the demand it is a plain handover.
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerBackupCapacity, 4e6);
    let cmds = sig(&mut m, t + 10, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 100), Some(false), "{cmds:?}");
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
}

#[test]
fn capacity_aware_backup_mode_keeps_the_backup_beside_a_returning_primary_until_it_carries() {
    let (mut m, mut b, t) = capacity_setup(Mode::CrossLayerBackupCapacity, 4e6);
    let cmds = sig(&mut m, t + 10, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 100), Some(false), "{cmds:?}");
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    let (t, _) = carry(&mut m, &mut b, t + 10, 5, 0.0, 4e6);
    // WLAN comes back: it carries again at once, and LTE stays active beside it ...
    let held = m.stats().backups_held;
    let cmds = sig(&mut m, t + 10, WLAN, -70.0);
    assert_eq!(backup_of(&cmds, 101), Some(false), "{cmds:?}");
    assert_eq!(backup_of(&cmds, 100), None, "{cmds:?}");
    assert_eq!(m.stats().backups_held, held + 1);
    // ... while WLAN's window grows (a sample that began before the return does not count) ...
    let (t, cmds) = carry(&mut m, &mut b, t + 10, 1, 1e6, 3e6);
    assert_eq!(backup_of(&cmds, 100), None, "{cmds:?}");
    // ... and stands by again once WLAN carried the demand over a whole sample.
    let (_, cmds) = carry(&mut m, &mut b, t, 1, 4.5e6, 0.2e6);
    assert_eq!(backup_of(&cmds, 100), Some(true), "{cmds:?}");
    assert_eq!(m.stats().backups_held, held + 1);
    // Algorithm 1's backup mode hands back at once.
    let mut m = wlan_up(Mode::CrossLayerBackup);
    established(&mut m, 30, LTE, 100, ep(2, [10, 0, 0, 2]));
    sig(&mut m, 40, WLAN, -84.0);
    let cmds = sig(&mut m, 50, WLAN, -70.0);
    assert_eq!(backup_of(&cmds, 100), Some(true), "{cmds:?}");
}

#[test]
fn a_primary_back_from_an_interface_loss_holds_the_backup_as_one_back_from_a_fade() {
    let (mut m, mut b, t) = capacity_setup(Mode::CrossLayerBackupCapacity, 4e6);
    // WLAN's interface goes down with its signal still good (a silent drop): LTE carries.
    let iface = |m: &mut Manager, t: u64, up: bool| {
        m.handle_event(ms(t), &Event::IfaceUpdated { iface: WLAN, up });
        drain(m)
    };
    let cmds = iface(&mut m, t + 10, false);
    assert_eq!(backup_of(&cmds, 100), Some(false), "{cmds:?}");
    // It comes back within the same traffic sample (no new signal sample needed), so the last
    // sample still shows WLAN carrying the demand: LTE stays active beside it all the same ...
    let held = m.stats().backups_held;
    let mut cmds = iface(&mut m, t + 100, true);
    if creates(&cmds, WLAN) {
        established(&mut m, t + 110, WLAN, 102, ep(1, [10, 0, 1, 2]));
        cmds.extend(drain(&mut m));
    }
    assert_eq!(backup_of(&cmds, 100), None, "{cmds:?}");
    assert_eq!(m.stats().backups_held, held + 1);
    // ... the samples WLAN carried before its loss do not count ...
    let (t, cmds) = carry(&mut m, &mut b, t, 1, 1e6, 3e6);
    assert_eq!(backup_of(&cmds, 100), None, "{cmds:?}");
    // ... and it stands by once WLAN carried the demand over a whole sample after its return.
    let (_, cmds) = carry(&mut m, &mut b, t, 1, 4.5e6, 0.2e6);
    assert_eq!(backup_of(&cmds, 100), Some(true), "{cmds:?}");
}

#[test]
fn a_held_backup_is_released_whatever_the_other_connections_hold() {
    let (mut m, mut b, t) = capacity_setup(Mode::CrossLayerBackupCapacity, 4e6);
    // A second connection, on WLAN only (no active backup subflow to hold).
    let c2 = ConnId(9);
    let wlan = ep(1, [10, 0, 1, 2]);
    m.handle_event(
        ms(t),
        &Event::ConnectionCreated {
            conn: c2,
            local: wlan,
            remote: ep(0, [192, 0, 2, 1]),
            iface: Some(WLAN),
            initiator: true,
        },
    );
    m.handle_event(
        ms(t),
        &Event::ConnectionEstablished {
            conn: c2,
            subflow: Some(SubflowId(200)),
            local: wlan,
            remote: ep(0, [192, 0, 2, 1]),
            iface: Some(WLAN),
        },
    );
    drain(&mut m);
    sig(&mut m, t + 10, WLAN, -84.0);
    let (t, _) = carry(&mut m, &mut b, t + 10, 5, 0.0, 4e6);
    // WLAN comes back: the first connection's LTE subflow is held ...
    let cmds = sig(&mut m, t + 10, WLAN, -70.0);
    assert_eq!(backup_of(&cmds, 100), None, "{cmds:?}");
    // ... and released once WLAN carried the demand, though the second connection had
    // nothing to hold.
    let (t, _) = carry(&mut m, &mut b, t + 10, 1, 1e6, 3e6);
    let (_, cmds) = carry(&mut m, &mut b, t, 1, 4.5e6, 0.2e6);
    assert_eq!(backup_of(&cmds, 100), Some(true), "{cmds:?}");
}

fn duplicate_of(cmds: &[Command], id: u64) -> Option<bool> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SetDuplicate { subflow, on, .. } if subflow.0 == id => Some(*on),
        _ => None,
    })
}

#[test]
fn duplicate_mode_keeps_the_demoted_fading_link_carrying_a_copy_until_it_recovers() {
    // cross-cap and Algorithm 1 demote WLAN and ask for nothing more.
    let no_copy = |cmds: &[Command]| {
        !cmds
            .iter()
            .any(|c| matches!(c, Command::SetDuplicate { .. }))
    };
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerCapacity, 4e6);
    let cmds = sig(&mut m, t + 10, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert!(no_copy(&cmds), "{cmds:?}");
    let mut m = wlan_up(Mode::CrossLayer);
    let cmds = sig(&mut m, 100, WLAN, -84.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert!(no_copy(&cmds), "{cmds:?}");
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerDuplicate, 4e6);
    // The same demotion, and WLAN keeps a copy of the stream; LTE never gets one.
    let cmds = sig(&mut m, t + 10, WLAN, -83.0);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 100), None, "{cmds:?}");
    // The demotion comes first: the stream has moved when the copy starts.
    let order: Vec<_> = cmds
        .iter()
        .filter(|c| matches!(c, Command::SetBackup { .. } | Command::SetDuplicate { .. }))
        .collect();
    assert!(matches!(order[0], Command::SetBackup { .. }), "{cmds:?}");
    // Fading further, above the cut-off (T − 2 dB): nothing new.
    assert!(sig(&mut m, t + 20, WLAN, -83.9).is_empty());
    assert_eq!(m.stats().duplicate_set, 1);
    // Back above T: WLAN carries the stream again, the copy stops.
    let cmds = sig(&mut m, t + 30, WLAN, -75.0);
    assert_eq!(backup_of(&cmds, 101), Some(false), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 101), Some(false), "{cmds:?}");
    assert_eq!(m.stats().duplicate_cleared, 1);
    // Fading again, then below the cut-off: the copy starts, then stops; WLAN stays demoted.
    assert_eq!(
        duplicate_of(&sig(&mut m, t + 40, WLAN, -83.0), 101),
        Some(true)
    );
    let cmds = sig(&mut m, t + 50, WLAN, -86.0);
    assert_eq!(duplicate_of(&cmds, 101), Some(false), "{cmds:?}");
    assert_eq!(backup_of(&cmds, 101), None, "{cmds:?}");
    assert!(sig(&mut m, t + 60, WLAN, -87.0).is_empty());
}

#[test]
fn duplicate_mode_makes_no_copy_while_the_demotion_is_withheld_nor_below_the_cut_off() {
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerDuplicate, 2e6);
    // LTE has not carried the demand: WLAN stays active (it carries the stream, no copy) ...
    let cmds = sig(&mut m, t + 10, WLAN, -83.0);
    assert_eq!(backup_of(&cmds, 101), None, "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 101), None, "{cmds:?}");
    // ... until the floor, which is also the copies' cut-off: demoted, no copy.
    let cmds = sig(&mut m, t + 20, WLAN, -84.1);
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 101), None, "{cmds:?}");
}

#[test]
fn duplicate_mode_drops_the_copy_with_the_link() {
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerDuplicate, 4e6);
    assert_eq!(
        duplicate_of(&sig(&mut m, t + 10, WLAN, -83.0), 101),
        Some(true)
    );
    // The link breaks: its subflow goes, and nothing asks for a copy any more.
    m.handle_event(
        ms(t + 20),
        &Event::IfaceUpdated {
            iface: WLAN,
            up: false,
        },
    );
    let cmds = drain(&mut m);
    assert!(
        cmds.iter().any(
            |c| matches!(c, Command::RemoveSubflow { subflow, .. } if *subflow == SubflowId(101))
        ),
        "{cmds:?}"
    );
    assert_eq!(duplicate_of(&cmds, 101), None, "{cmds:?}");
    assert!(m.subflows().all(|(_, _, iface, _)| iface != WLAN));
}

#[test]
fn backup_duplicate_mode_hands_over_and_keeps_the_primary_as_a_copy() {
    let (mut m, _, t) = capacity_setup(Mode::CrossLayerBackupDuplicate, 4e6);
    let cmds = sig(&mut m, t + 10, WLAN, -83.0);
    assert_eq!(backup_of(&cmds, 100), Some(false), "{cmds:?}");
    assert_eq!(backup_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 101), Some(true), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 100), None, "{cmds:?}");
    // The primary recovers: it takes the stream back, LTE stands by again, no copy.
    let cmds = sig(&mut m, t + 20, WLAN, -70.0);
    assert_eq!(backup_of(&cmds, 101), Some(false), "{cmds:?}");
    assert_eq!(duplicate_of(&cmds, 101), Some(false), "{cmds:?}");
}

#[test]
fn mode_names_round_trip() {
    for n in Mode::NAMES {
        assert_eq!(Mode::from_name(n).unwrap().name(), *n);
    }
    assert!(Mode::CrossLayerCapacity.uses_signal() && Mode::CrossLayerCapacity.capacity_aware());
    assert_eq!(
        Mode::CrossLayerBackupCapacity.base(),
        Mode::CrossLayerBackup
    );
    assert!(!Mode::CrossLayer.capacity_aware());
    for (dup, base) in [
        (Mode::CrossLayerDuplicate, Mode::CrossLayer),
        (Mode::CrossLayerBackupDuplicate, Mode::CrossLayerBackup),
    ] {
        assert_eq!(dup.base(), base);
        assert!(dup.uses_signal() && dup.capacity_aware() && dup.duplicates());
    }
    assert!(!Mode::CrossLayerCapacity.duplicates() && !Mode::CrossLayer.duplicates());
    assert_eq!(
        Mode::from_name("cross-dup"),
        Some(Mode::CrossLayerDuplicate)
    );
    assert_eq!(Mode::from_name("cross-dupe"), None);
}
