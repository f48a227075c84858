use super::*;

const BASE: &str = r#"
name = "t"
duration = "5s"
[[link]]
name = "a"
rate = "10Mbit"
delay = "10ms"
[[link]]
name = "b"
rate = "20Mbit"
delay = "20ms"
[app]
kind = "bulk"
"#;

fn load(text: &str, overrides: &[&str]) -> Result<Plan, ScenarioError> {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load_str(text, "test.toml", Path::new("."), &o)
}

fn err(text: &str, overrides: &[&str]) -> String {
    load(text, overrides).unwrap_err().to_string()
}

#[test]
fn base_loads_with_defaults() {
    let p = load(BASE, &[]).unwrap();
    assert_eq!(p.variants.len(), 1);
    let v = &p.variants[0];
    assert_eq!(v.name, "stock");
    assert_eq!(v.links.len(), 2);
    assert_eq!(v.scenario.repetitions, 1);
    assert_eq!(v.config.rto_min, Duration::from_millis(200));
}

#[test]
fn every_rto_formula_loads_and_an_unknown_one_names_the_key() {
    use braid_core::rtt::RtoFormula;
    for (name, f) in [
        ("linux", RtoFormula::Linux),
        ("rfc6298", RtoFormula::Rfc6298),
        ("rfc793", RtoFormula::Rfc793),
    ] {
        let p = load(BASE, &[&format!("connection.rto_formula={name}")]).unwrap();
        assert_eq!(p.variants[0].config.rto_formula, f);
    }
    let e = err(BASE, &["connection.rto_formula=karn"]);
    assert!(
        e.contains("connection.rto_formula") && e.contains("allowed: linux, rfc6298, rfc793"),
        "{e}"
    );
}

#[test]
fn unknown_keys_name_the_file_and_the_key() {
    let e = err(
        &BASE.replace("delay = \"10ms\"", "delay = \"10ms\"\nrat = 3"),
        &[],
    );
    assert!(e.starts_with("test.toml: key `link[0]"), "{e}");
    assert!(e.contains("unknown field `rat`"), "{e}");
    let e = err(BASE, &["connection.rto_mn=1s"]);
    assert!(e.contains("connection") && e.contains("rto_mn"), "{e}");
}

#[test]
fn wrong_types_and_impossible_values_are_explained() {
    let e = err(&BASE.replace("rate = \"10Mbit\"", "rate = \"-5Mbit\""), &[]);
    assert!(
        e.contains("key `link[0].rate`") && e.contains("positive"),
        "{e}"
    );
    let e = err(&BASE.replace("rate = \"10Mbit\"", "rate = true"), &[]);
    assert!(
        e.contains("key `link[0].rate`") && e.contains("a rate such as"),
        "{e}"
    );
    let e = err(BASE, &["link.0.loss=1.5"]);
    assert!(
        e.contains("link[0].loss") && e.contains("0 ≤ loss < 1"),
        "{e}"
    );
    for (set, key) in [
        ("link.0.threshold_dbm=-80", "link[0].threshold_dbm"),
        ("link.0.hysteresis_db=3", "link[0].hysteresis_db"),
    ] {
        let e = err(BASE, &[set]);
        assert!(e.contains(key) && e.contains("no signal"), "{e}");
    }
    let e = err(BASE, &["link.0.retries=1000"]);
    assert!(
        e.contains("link[0].retries") && e.contains("allowed 0 to 31"),
        "{e}"
    );
    let e = err(BASE, &["duration=0s"]);
    assert!(e.contains("key `duration`"), "{e}");
    // A warmup as long as the run measured nothing and said so only by zeros.
    let e = err(BASE, &["metrics.warmup=5s"]);
    assert!(
        e.contains("key `metrics.warmup`") && e.contains("nothing to measure"),
        "{e}"
    );
    let e = err(BASE, &["duration=\"1e9s\""]);
    assert!(
        e.contains("key `duration`") && e.contains("ten days"),
        "{e}"
    );
    let e = err(BASE, &["pm.mode=\"cross-cap\"", "pm.capacity.headroom=-1"]);
    assert!(
        e.contains("key `pm.capacity`") && e.contains("headroom"),
        "{e}"
    );
    let e = err(BASE, &["pm.capacity.hedroom=1"]);
    assert!(e.contains("hedroom"), "{e}");
    // The first path's race: a duration of at least 10 ms, or "off".
    let e = err(BASE, &["pm.race=\"5ms\""]);
    assert!(
        e.contains("key `pm.race`") && e.contains("at least 10ms") && !e.contains('\n'),
        "{e}"
    );
    let e = err(BASE, &["pm.race=\"never\""]);
    assert!(e.contains("pm.race") && e.contains("off"), "{e}");
    let e = err(BASE, &["app.kind=\"cbr\""]);
    assert!(e.contains("app.rate"), "{e}");
    // A bit rate in `rate` (messages a second) names the key it belongs in.
    let e = err(BASE, &["app.kind=\"cbr\"", "app.rate=\"1Mbit\""]);
    assert!(
        e.contains("key `app.rate`") && e.contains("`bitrate`") && !e.contains('\n'),
        "{e}"
    );
    let e = err(BASE, &["app.kind=\"cbr\"", "app.rate=true"]);
    assert!(e.contains("key `app.rate`"), "{e}");
    // A bitrate whose messages would come closer than the clock's tick (it once spun at one
    // instant).
    for bitrate in ["\"20Gbit\"", "1099511627776"] {
        let e = err(
            BASE,
            &["app.kind=\"cbr\"", &format!("app.bitrate={bitrate}")],
        );
        assert!(
            e.contains("key `app.bitrate`") && e.contains("messages/s") && !e.contains('\n'),
            "{bitrate}: {e}"
        );
    }
    // A buffer is held in memory (100 GB once took the machine's).
    for key in ["send_buffer", "receive_buffer"] {
        let e = err(BASE, &[&format!("connection.{key}=\"100GB\"")]);
        assert!(
            e.contains(&format!("key `connection.{key}`")) && e.contains("1 GiB"),
            "{e}"
        );
    }
    // A jitter below the clock's microsecond is none (it once drew from an empty range).
    let p = load(BASE, &["link.0.jitter=\"0.5us\""]).unwrap();
    let r = crate::runner::run_one(&p, 0, 0, crate::runner::Records::None);
    assert!(r.metrics["throughput_mbps"][0] > 0.0);
}

/// A period under a millisecond would keep the clock at one instant (a routing period of
/// 0.4 µs ran for hours): refused, naming the key.
#[test]
fn periods_under_a_millisecond_are_refused() {
    let e = err(BASE, &["connection.liveness_probe=\"0s\""]);
    assert!(
        e.contains("key `connection.liveness_probe`") && e.contains("1 ms"),
        "{e}"
    );
    let e = err(
        BASE,
        &["pm.mode=\"cross-cap\"", "pm.capacity.sample=\"0.5ms\""],
    );
    assert!(
        e.contains("key `pm.capacity`") && e.contains("at least 1 ms"),
        "{e}"
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    for (file, set, want) in [
        (
            "e13-manet-homogeneous.toml",
            "routing.period=\"0.4us\"",
            "key `routing.period`",
        ),
        (
            "e13-manet-homogeneous.toml",
            "routing.hello=\"0.9ms\"",
            "key `routing.hello`",
        ),
        (
            "e10-grid.toml",
            "link.0.radio.beacon=\"0.5ms\"",
            "key `link[0].radio`",
        ),
    ] {
        let e = super::load(&dir.join(file), &[set.to_string()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(want) && e.contains("1 ms") && !e.contains('\n'),
            "{e}"
        );
    }
}

#[test]
fn reinjection_k_below_one_is_refused() {
    let e = err(BASE, &["connection.reinjection=rej0"]);
    assert!(
        e.contains("connection.reinjection") && e.contains("K ≥ 1"),
        "{e}"
    );
    let e = err(BASE, &["connection.scheduler=fastest"]);
    assert!(
        e.contains("allowed: minrtt, arrival, roundrobin, redundant"),
        "{e}"
    );
}

#[test]
fn missing_trace_file_is_reported() {
    let t = BASE.replace("rate = \"10Mbit\"", "trace = \"no/such.trace\"");
    let e = err(&t, &[]);
    assert!(e.contains("link[0]") && e.contains("no/such.trace"), "{e}");
}

#[test]
fn syntax_errors_give_the_line() {
    let e = err("name = \"x\"\nduration = \n", &[]);
    assert!(e.starts_with("test.toml: line 2"), "{e}");
}

#[test]
fn overrides_by_index_name_and_quoted_key() {
    let p = load(
        BASE,
        &["link.b.delay=35ms", "link.0.rate=50Mbit", "repetitions=3"],
    )
    .unwrap();
    let v = &p.variants[0];
    assert_eq!(v.scenario.links[1].delay.0, Duration::from_millis(35));
    assert_eq!(v.scenario.links[0].rate.unwrap().0, 50e6);
    assert_eq!(v.scenario.repetitions, 3);
    let t = format!("{BASE}\n[sweep]\n\"connection.reinjection\" = [\"stock\", \"rej2\"]\n");
    let p = load(&t, &["sweep.\"connection.reinjection\"=[\"rej4\"]"]).unwrap();
    assert_eq!(p.variants.len(), 1);
    assert_eq!(p.variants[0].name, "rej4");
    let e = err(BASE, &["link.c.delay=1ms"]);
    assert!(e.contains("no `link` entry named `c`"), "{e}");
    let e = err(BASE, &["link.2.delay=1ms"]);
    assert!(e.contains("index 2 out of range (2 entries)"), "{e}");
    let e = err(BASE, &["schedule.0.count=2"]);
    assert!(
        e.contains("key `schedule.0.count`: index 0 out of range (no `schedule` entries)"),
        "{e}"
    );
    let e = err(BASE, &["nonsense"]);
    assert!(e.contains("expected key=value"), "{e}");
}

#[test]
fn an_override_need_only_apply_to_the_variants_selected() {
    // `single` replaces the links with one: `link.1` exists in `both` only.
    let t = format!(
        "{BASE}\n[[variant]]\nname = \"both\"\n[[variant]]\nname = \"single\"\nset = {{ link = [{{ name = \"a\", rate = \"10Mbit\", delay = \"10ms\" }}] }}\n"
    );
    let only = |names: &[&str], sets: &[&str]| {
        let n: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load_str_variants(&t, "test.toml", Path::new("."), &o, &n)
    };
    let p = only(&["both"], &["link.1.delay=150ms"]).unwrap();
    assert_eq!(p.variants.len(), 1);
    assert_eq!(p.variants[0].name, "both");
    assert_eq!(
        p.variants[0].scenario.links[1].delay.0,
        Duration::from_millis(150)
    );
    // Every variant: the one it does not apply to is named.
    let e = only(&[], &["link.1.delay=150ms"]).unwrap_err().to_string();
    assert!(
        e.contains("index 1 out of range (1 entries) in variant `single`"),
        "{e}"
    );
    let e = only(&["both", "nope"], &[]).unwrap_err().to_string();
    assert!(
        e.contains("no variant named `nope` (the file's variants: both, single)"),
        "{e}"
    );
    // A file with one unnamed variant: selected by the name it gets once built.
    let n = vec!["stock".to_string()];
    let p = load_str_variants(BASE, "test.toml", Path::new("."), &[], &n).unwrap();
    assert_eq!(p.variants[0].name, "stock");
    let n = vec!["rej1".to_string()];
    let e = load_str_variants(BASE, "test.toml", Path::new("."), &[], &n).unwrap_err();
    assert!(e.to_string().contains("no variant named `rej1`"), "{e}");
}

#[test]
fn sweeps_and_variants_are_named_after_their_values() {
    let t = format!(
        "{BASE}\n[sweep]\n\"connection.reinjection\" = [\"stock\", \"pto\", \"rej1\"]\n\
         [[variant]]\nname = \"minrtt\"\nset = {{ \"connection.scheduler\" = \"minrtt\" }}\n\
         [[variant]]\nname = \"backup\"\nset = {{ \"link.b.backup\" = true }}\n"
    );
    let p = load(&t, &[]).unwrap();
    let names: Vec<_> = p.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "minrtt-stock",
            "minrtt-pto",
            "minrtt-rej1",
            "backup-stock",
            "backup-pto",
            "backup-rej1"
        ]
    );
    assert!(p.variants[3].scenario.links[1].backup);
    assert_eq!(p.variants[2].settings["connection.reinjection"], "rej1");
    let dup = format!("{BASE}\n[[variant]]\nname = \"x\"\n[[variant]]\nname = \"x\"\n");
    assert!(err(&dup, &[]).contains("two variants are named `x`"));
}

#[test]
fn schedules_expand_to_a_timeline() {
    let t = format!(
        "{BASE}\n[[schedule]]\nlink = \"a\"\nkind = \"addr\"\nfirst = \"1s\"\ndown = \"0.5s\"\nup = \"0.5s\"\ncount = 3\n"
    );
    let p = load(&t, &[]).unwrap();
    let tl: Vec<_> = p.variants[0]
        .timeline
        .iter()
        .map(|(t, _, a)| (t.as_millis(), *a))
        .collect();
    assert_eq!(
        tl,
        [
            (1000, Action::AddrLost),
            (1500, Action::AddrBack),
            (2000, Action::AddrLost),
            (2500, Action::AddrBack),
            (3000, Action::AddrLost),
            (3500, Action::AddrBack),
        ]
    );
    let e = err(&t.replace("count = 3", "count = 30"), &[]);
    assert!(
        e.contains("schedule[0].count") && e.contains("after the run"),
        "{e}"
    );
    let e = err(&t.replace("link = \"a\"\nkind", "link = \"z\"\nkind"), &[]);
    assert!(e.contains("no link `z`; links are a, b"), "{e}");
    // Counts that were written out before they were checked (2^31 cycles took 24 GB), and
    // cycles of no length that never reach the end of the run.
    let e = err(&t.replace("count = 3", "count = 2147483648"), &[]);
    assert!(
        e.contains("key `schedule[0].count`") && e.contains("1..=1000000"),
        "{e}"
    );
    let e = err(
        &t.replace(
            "down = \"0.5s\"\nup = \"0.5s\"\ncount = 3",
            "down = \"0s\"\nup = \"0s\"\ncount = 1000000",
        ),
        &[],
    );
    assert!(
        e.contains("key `schedule[0].down`") && e.contains("longer than zero"),
        "{e}"
    );
}

#[test]
fn shipped_scenarios_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "toml") {
            match super::load(&p, &[]) {
                Ok(plan) => assert!(!plan.variants.is_empty()),
                // A scenario on a real trace needs ../shared/traces beside the checkout.
                Err(e) if e.message.contains("cannot read trace") => {
                    eprintln!("skipped {}: {e}", p.display());
                }
                Err(e) => panic!("{e}"),
            }
            n += 1;
        }
    }
    assert!(n >= 6, "expected the E1–E5 scenarios, found {n}");
}

const TOPO: &str = r#"
name = "t"
duration = "5s"
[[node]]
name = "A"
iface = [{ name = "e0", addr = "10.1.0.1/24" }, { name = "e1", addr = "10.1.1.1/24" }]
[[node]]
name = "B"
[[node]]
name = "C"
[[link]]
name = "ab"
a = "A.e0"
b = "B.e0"
rate = "10Mbit"
delay = "5ms"
[[link]]
name = "bc"
a = "B.e0"
b = "C.e0"
rate = "10Mbit"
delay = "5ms"
[app]
kind = "bulk"
client = "C"
server = "A"
"#;

#[test]
fn topologies_resolve_nodes_links_and_applications() {
    let p = load(TOPO, &[]).unwrap();
    let t = &p.variants[0].topology;
    assert_eq!(t.nodes.len(), 3);
    assert_eq!(t.nodes[1].ifaces[0].addr.to_string(), "10.2.0.1");
    assert_eq!(t.links[1].ends[0].node, 1);
    assert_eq!((t.apps[0].client, t.apps[0].server), (2, 0));
    assert!(t.nodes[2].pm.is_some() && t.nodes[0].pm.is_none());
    assert_eq!(
        t.routing.as_ref().unwrap().policy,
        topology::RoutingPolicyKind::Static
    );
    // The two-node form is a topology too: client and server, a link per interface.
    let p = load(BASE, &[]).unwrap();
    let t = &p.variants[0].topology;
    assert!(t.routing.is_none());
    assert_eq!(t.nodes[0].ifaces[1].addr.to_string(), "10.0.1.2");
    assert_eq!(t.nodes[1].ifaces[0].addr.to_string(), "10.0.0.1");
}

#[test]
fn bad_topologies_give_one_line_errors_naming_the_key() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["link.ab.a=\"Z.e0\""],
            "key `link[0].a`",
            "no node `Z`; nodes are A, B, C",
        ),
        (
            &["link.0.b=\"B.e7\""],
            "key `link[0].b`",
            "node `B` has no interface `e7`",
        ),
        (&["app.priority=7"], "key `app.priority`", "7 out of range"),
        (&["app.priority=0"], "key `app.priority`", "allowed 1"),
        (&["app.server=\"Q\""], "key `app.server`", "no node `Q`"),
        (
            &["app.interfaces=[\"e5\"]"],
            "key `app.interfaces`",
            "no interface `e5`",
        ),
        (
            &["routing.policy=\"ospf\""],
            "key `routing.policy`",
            "allowed: static, shortest",
        ),
        (
            &["link.0.backup=true"],
            "key `link[0].backup`",
            "two-node form",
        ),
        (
            &["node.0.iface.1.addr=\"10.1\""],
            "key `node[0].iface[1].addr`",
            "not an IPv4",
        ),
    ];
    for (set, key, msg) in cases {
        let e = err(TOPO, set);
        assert!(e.contains(key) && e.contains(msg), "{set:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // Link `bc` removed from routing: C cannot reach A.
    let e = err(
        &TOPO.replace("name = \"bc\"\na = \"B.e0\"", "name = \"bc\"\na = \"B.e1\""),
        &[],
    );
    assert!(
        e.contains("link[1].a") && e.contains("no interface `e1`"),
        "{e}"
    );
    let e = err(
        &format!("{TOPO}[[node]]\nname = \"D\"\n"),
        &["app.server=\"D\""],
    );
    assert!(
        e.contains("key `app.server`") && e.contains("no route from `C` to `D`"),
        "{e}"
    );
    // Keys of the other form.
    let e = err(BASE, &["link.0.a=\"A.e0\""]);
    assert!(e.contains("link[0].a") && e.contains("[[node]]"), "{e}");
    let e = err(BASE, &["app.client=\"A\""]);
    assert!(e.contains("app.client") && e.contains("topology"), "{e}");
    let e = err(
        &format!("{TOPO}[[event]]\nat = \"1s\"\nlink = \"ab\"\naction = \"addr-lost\"\n"),
        &[],
    );
    assert!(e.contains("event[0].action"), "{e}");
}

#[test]
fn flows_need_distinct_names() {
    let flow = "[[flow]]\nname = \"f\"\nkind = \"file\"\nbytes = \"1MB\"\nclient = \"C\"\nserver = \"A\"\n";
    let p = load(
        &format!("{TOPO}{flow}"),
        &["metrics.show=[\"flow.f.completion_s\"]"],
    )
    .unwrap();
    assert_eq!(p.variants[0].topology.apps[1].name, "f");
    let e = err(&format!("{TOPO}{flow}{flow}"), &[]);
    assert!(e.contains("flow[1].name") && e.contains("duplicate"), "{e}");
    let e = err(
        &format!("{TOPO}{flow}"),
        &["metrics.show=[\"flow.g.completion_s\"]"],
    );
    assert!(e.contains("metrics.show"), "{e}");
}

/// A topology reports its per-link figures per interface of the client (`link.e0.mb`), and
/// `metrics.show` takes those names, not the scenario's links (`link.bc.mb` was taken and
/// `link.e0.mb` refused).
#[test]
fn a_topology_shows_its_link_figures_by_the_clients_interfaces() {
    let p = load(
        TOPO,
        &["metrics.show=[\"link.e0.mb\", \"link.e0.throughput_mbps\"]"],
    )
    .unwrap();
    assert_eq!(p.variants[0].link_names(), ["e0"]);
    let e = err(TOPO, &["metrics.show=[\"link.bc.mb\"]"]);
    assert!(
        e.contains("metrics.show") && e.contains("link.e0.throughput_mbps"),
        "{e}"
    );
    let p = load(BASE, &[]).unwrap();
    let names: Vec<_> = p.variants[0]
        .scenario
        .links
        .iter()
        .map(|l| &l.name)
        .collect();
    assert_eq!(p.variants[0].link_names().iter().collect::<Vec<_>>(), names);
}

#[test]
fn star_links_join_every_shared_interface_on_its_own_medium() {
    let text = TOPO.replace(
        "name = \"ab\"\na = \"A.e0\"\nb = \"B.e0\"",
        "name = \"ab\"\na = \"A.*\"\nb = \"B.*\"\nmedium = \"air\"",
    ) + "[[node]]\nname = \"D\"\niface = [{ name = \"e0\" }, { name = \"e1\", rate = \"2Mbit\" }]\n";
    let text = text.replace(
        "[[node]]\nname = \"B\"\n",
        "[[node]]\nname = \"B\"\niface = [{ name = \"e0\" }, { name = \"e1\" }]\n",
    );
    let p = load(&text, &[]).unwrap();
    let v = &p.variants[0];
    let t = &v.topology;
    let names: Vec<&str> = t.links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ab.e0", "ab.e1", "bc"]);
    assert_eq!(t.media, ["air.e0", "air.e1"]);
    assert_eq!(t.links[1].medium, Some(1));
    assert_eq!(t.links[2].medium, None);
    // Errors name the file's entry, not the expanded one.
    let e = err(&text, &["link.bc.b=\"C.e4\""]);
    assert!(e.contains("key `link[1].b`"), "{e}");
    let e = err(&text, &["link.ab.b=\"B.e0\""]);
    assert!(
        e.contains("key `link[0].b`") && e.contains("both ends"),
        "{e}"
    );
    // An interface's rate caps its links.
    let text = text.replace(
        "name = \"bc\"\na = \"B.e0\"\nb = \"C.e0\"",
        "name = \"bd\"\na = \"B.e1\"\nb = \"D.e1\"",
    );
    let p = load(&text, &["app.client=\"D\""]).unwrap();
    let (ab, ba) = &p.variants[0].links[2];
    assert_eq!(ab.capacity, crate::link::Capacity::Rate(10e6));
    assert_eq!(ba.capacity, crate::link::Capacity::Rate(2e6));
}

#[test]
fn tunnel_settings_are_checked_with_one_line_errors_naming_the_key() {
    let with = format!("{BASE}\n[tunnel]\ntransport = \"datagram\"\n");
    let p = load(&with, &["tunnel.ratio=\"2:1\""]).unwrap();
    let t = p.variants[0].tunnel.as_ref().expect("a tunnel");
    assert_eq!(
        t.inner.max_datagram_size,
        t.tunnel.ptos.max_packet_len - super::INNER_HEADERS
    );
    // `none` is no tunnel.
    let p = load(&with, &["tunnel.transport=\"none\""]).unwrap();
    assert!(p.variants[0].tunnel.is_none());
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["tunnel.transport=\"udp\""],
            "key `tunnel.transport`",
            "allowed: braid, datagram, none",
        ),
        (
            &["tunnel.ratio=\"0:1\""],
            "key `tunnel.ratio`",
            "a weight of 0",
        ),
        (
            &["tunnel.ratio=\"x\""],
            "key `tunnel.ratio`",
            "is not a ratio",
        ),
        (
            &["tunnel.ratio=\"1:1:1\""],
            "key `tunnel.ratio`",
            "3 weights for 2 links",
        ),
        (
            &["tunnel.congestion=\"lia\""],
            "key `tunnel.congestion`",
            "allowed: cubic, newreno",
        ),
        (
            &["tunnel.ofo_timeout=\"11s\""],
            "key `tunnel.ofo_timeout`",
            "out of range",
        ),
        (
            &["tunnel.inseq_timeout=\"2s\""],
            "key `tunnel.inseq_timeout`",
            "out of range",
        ),
        (&["tunnel.mode=1"], "key `tunnel.mode`", "unknown field"),
    ];
    for (set, key, msg) in cases {
        let e = err(&with, set);
        assert!(e.contains(key) && e.contains(msg), "{set:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn variants_are_chosen_by_name_and_an_unknown_one_is_named() {
    let text =
        format!("{BASE}\n[sweep]\n\"connection.reinjection\" = [\"stock\", \"rej1\", \"rej2\"]\n");
    let mut p = load(&text, &[]).unwrap();
    let names: Vec<String> = p.variants.iter().map(|v| v.name.clone()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    p.retain_variants(&[]).unwrap();
    assert_eq!(p.variants.len(), 3);
    p.retain_variants(&[names[2].clone(), names[0].clone()])
        .unwrap();
    let kept: Vec<&str> = p.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        kept,
        [names[0].as_str(), names[2].as_str()],
        "the file's order"
    );
    let e = p.retain_variants(&["rej9".into()]).unwrap_err().to_string();
    assert!(e.starts_with("test.toml: no variant named `rej9`"), "{e}");
    assert!(e.contains(&names[0]) && e.contains(&names[2]), "{e}");
}
