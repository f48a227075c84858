use super::*;

/// Lines as babeld 1.12.1 writes them (from a dump on a three-node namespace topology).
const DUMP: &str = "\
BABEL 1.0
version babeld-1.12.1
host m1
my-id 02:00:00:00:00:00:00:01
ok
add interface e0 up true ipv6 fe80::ff:fe00:1 ipv4 10.0.0.1
add interface e1 up true ipv6 fe80::ff:fe00:101 ipv4 10.1.0.1
add interface e2 up false
add neighbour 562515518d40 address fe80::ff:fe00:102 if e1 reach ffc0 ureach 0000 rxcost 256 txcost 258 cost 258
add neighbour 562515518600 address fe80::ff:fe00:2 if e0 reach ffe0 ureach 0000 rxcost 256 txcost 258 rtt 1.250 rttcost 0 cost 258
add xroute 10.0.0.1/32-0.0.0.0/0 prefix 10.0.0.1/32 from 0.0.0.0/0 metric 0
add route 562515518f60 prefix 10.0.0.2/32 from 0.0.0.0/0 installed yes id 02:00:00:00:00:00:00:02 metric 258 refmetric 0 via fe80::ff:fe00:2 if e0
add route 56251551a0b0 prefix 10.0.0.3/32 from 0.0.0.0/0 installed no id 02:00:00:00:00:00:00:03 metric 518 refmetric 260 via fe80::ff:fe00:102 if e1
ok
";

fn id(n: u64) -> RouterId {
    RouterId(0x0200_0000_0000_0000 | n)
}

#[test]
fn every_line_of_a_real_dump() {
    let lines: Vec<Line> = DUMP.lines().map(|l| parse(l).unwrap()).collect();
    assert_eq!(lines[0], Line::Banner("1.0".into()));
    assert_eq!(lines[3], Line::MyId(id(1)));
    assert_eq!(lines[4], Line::Ok);
    assert_eq!(
        lines[5],
        Line::Interface(
            Kind::Add,
            Interface {
                name: "e0".into(),
                up: true,
                ipv6: Some("fe80::ff:fe00:1".parse().unwrap()),
                ipv4: Some("10.0.0.1".parse().unwrap()),
            }
        )
    );
    assert!(matches!(&lines[7], Line::Interface(_, i) if !i.up && i.ipv4.is_none()));
    let Line::Neighbour(Kind::Add, n) = &lines[9] else {
        panic!("{:?}", lines[9])
    };
    assert_eq!(n.address, "fe80::ff:fe00:2".parse::<IpAddr>().unwrap());
    assert_eq!(
        (
            n.ifname.as_str(),
            n.reach,
            n.ureach,
            n.rxcost,
            n.txcost,
            n.cost
        ),
        ("e0", 0xffe0, 0, 256, 258, 258)
    );
    assert_eq!((n.rtt_ms, n.rttcost), (Some(1.25), Some(0)));
    assert!(matches!(&lines[8], Line::Neighbour(_, n) if n.rtt_ms.is_none()));
    assert_eq!(
        lines[10],
        Line::Xroute(
            Kind::Add,
            Xroute {
                prefix: "10.0.0.1/32".parse().unwrap(),
                from: "0.0.0.0/0".parse().unwrap(),
                metric: 0
            }
        )
    );
    let Line::Route(Kind::Add, r) = &lines[12] else {
        panic!()
    };
    assert_eq!(r.prefix.to_string(), "10.0.0.3/32");
    assert!(r.from.is_default() && !r.installed);
    assert_eq!((r.router_id, r.metric, r.refmetric), (id(3), 518, 260));
    assert_eq!(r.ifname, "e1");
    assert_eq!(r.router_id.to_string(), "02:00:00:00:00:00:00:03");
}

#[test]
fn the_table_follows_add_change_and_flush() {
    let mut t = Table::default();
    for l in DUMP.lines() {
        t.apply(&parse(l).unwrap());
    }
    assert_eq!(t.my_id, Some(id(1)));
    assert_eq!(t.version.as_deref(), Some("babeld-1.12.1"));
    assert_eq!(
        (
            t.interfaces.len(),
            t.neighbours.len(),
            t.xroutes.len(),
            t.routes.len()
        ),
        (3, 2, 1, 2)
    );
    let change = "change neighbour 562515518600 address fe80::ff:fe00:2 if e0 reach 7fe0 ureach 0000 rxcost 300 txcost 258 cost 320";
    t.apply(&parse(change).unwrap());
    assert_eq!(t.neighbours["562515518600"].reach, 0x7fe0);
    assert_eq!(t.neighbours["562515518600"].cost, 320);
    let flush = "flush neighbour 562515518600 address fe80::ff:fe00:2 if e0 reach 0000 ureach 0000 rxcost 65535 txcost 65535 cost 65535";
    t.apply(&parse(flush).unwrap());
    assert_eq!(t.neighbours.len(), 1);
    t.apply(&parse("flush route 56251551a0b0 prefix 10.0.0.3/32 from 0.0.0.0/0 installed no id 02:00:00:00:00:00:00:03 metric 65535 refmetric 260 via fe80::ff:fe00:102 if e1").unwrap());
    assert_eq!(t.routes.len(), 1);
    t.apply(&parse("flush interface e2 up false").unwrap());
    assert!(!t.interfaces.contains_key("e2"));
    t.clear();
    assert_eq!(t, Table::default());
}

#[test]
fn newer_fields_are_ignored_and_answers_are_read() {
    // A later babeld may add keys; the ones we need are still there.
    let l = "add neighbour 1 address fe80::1 if e0 reach ffff ureach 0000 rxcost 96 txcost 96 cost 96 extra 7";
    assert!(matches!(parse(l), Ok(Line::Neighbour(_, n)) if n.cost == 96));
    let l = "add route 1 prefix ::/0 from ::/0 installed yes id 02:00:00:00:00:00:00:09 metric 96 price 3 refmetric 0 via fe80::1 if e0";
    assert!(matches!(parse(l), Ok(Line::Route(_, r)) if r.refmetric == 0));
    assert_eq!(parse("no"), Ok(Line::No(None)));
    assert_eq!(
        parse("no unknown command"),
        Ok(Line::No(Some("unknown command".into())))
    );
    assert_eq!(parse("bad"), Ok(Line::Bad));
    assert_eq!(parse("ok\r"), Ok(Line::Ok));
}

#[test]
fn malformed_lines_are_one_line_errors() {
    let cases: &[(&str, &str)] = &[
        ("", "empty line"),
        ("   ", "empty line"),
        ("hello world", "unknown line `hello world`"),
        ("add gateway 1", "unknown line `add gateway 1`"),
        ("add", "unknown line `add`"),
        ("ok ok", "unknown line `ok ok`"),
        (
            "add neighbour 1 address fe80::1 if e0 reach fffff ureach 0 rxcost 1 txcost 1 cost 1",
            "neighbour: bad value `fffff` for `reach`",
        ),
        (
            "add neighbour 1 address fe80::1 if e0 reach ffff rxcost 1 txcost 1",
            "neighbour: missing `cost`",
        ),
        (
            "add neighbour 1 address 10.0.0.300 if e0 reach ffff rxcost 1 txcost 1 cost 1",
            "neighbour: bad value `10.0.0.300` for `address`",
        ),
        (
            "add neighbour 1 address fe80::1 if",
            "neighbour: missing `value of the last key`",
        ),
        (
            "add route 1 prefix 10.0.0.0/33 from 0.0.0.0/0 installed yes id 02:00:00:00:00:00:00:09 metric 1 refmetric 0 via fe80::1 if e0",
            "route: bad value `10.0.0.0/33` for `prefix`",
        ),
        (
            "add route 1 prefix 10.0.0.0/8 from 0.0.0.0/0 installed maybe id 02:00:00:00:00:00:00:09 metric 1 refmetric 0 via fe80::1 if e0",
            "route: bad value `maybe` for `installed`",
        ),
        (
            "add route 1 prefix 10.0.0.0/8 from 0.0.0.0/0 installed yes id 02:00:00:00:00:09 metric 1 refmetric 0 via fe80::1 if e0",
            "route: bad value `02:00:00:00:00:09` for `id`",
        ),
        (
            "add route 1 prefix 10.0.0.0/8 from 0.0.0.0/0 installed yes id 02:00:00:00:00:00:00:09 metric -1 refmetric 0 via fe80::1 if e0",
            "route: bad value `-1` for `metric`",
        ),
        (
            "add interface e0 up perhaps",
            "interface: bad value `perhaps` for `up`",
        ),
        ("add interface", "interface: missing `name`"),
        ("my-id 1:2", "my-id: bad value `1:2` for `id`"),
        ("BABEL", "BABEL: missing `value`"),
    ];
    for (line, want) in cases {
        let e = parse(line).unwrap_err();
        assert_eq!(&e.to_string(), want, "{line}");
    }
    let long = "add ".to_string() + &"x".repeat(MAX_LINE);
    assert_eq!(parse(&long), Err(LineError::TooLong));
    // Control characters and long junk stay one short line.
    let e = parse("\u{1b}[2J\nadd\tnothing ".repeat(10).as_str())
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n') && e.len() < 120, "{e}");
}

#[test]
fn endpoints_from_text() {
    assert_eq!(
        "33123".parse::<Endpoint>().unwrap(),
        Endpoint::Tcp("[::1]:33123".parse().unwrap())
    );
    assert_eq!(
        "127.0.0.1:33123".parse::<Endpoint>().unwrap(),
        Endpoint::Tcp("127.0.0.1:33123".parse().unwrap())
    );
    assert_eq!(
        "/run/babeld.sock".parse::<Endpoint>().unwrap(),
        Endpoint::Unix("/run/babeld.sock".into())
    );
    assert!("babeld".parse::<Endpoint>().is_err());
}

proptest::proptest! {
    #[test]
    fn arbitrary_lines_never_panic(s in "\\PC{0,200}") {
        let _ = parse(&s);
    }

    #[test]
    fn mutated_real_lines_never_panic(k in 0usize..13, cut in 0usize..200, junk in "[ -~]{0,12}") {
        let line = DUMP.lines().nth(k).unwrap();
        let mut s: String = line.chars().take(cut).collect();
        s.push_str(&junk);
        if let Ok(l) = parse(&s) {
            Table::default().apply(&l);
        }
    }
}

/// A fake babeld: sends `script`, records what the client sent.
async fn fake(script: &'static str) -> (Endpoint, tokio::task::JoinHandle<String>) {
    let dir = std::env::temp_dir().join(format!(
        "braid-babel-{}-{}",
        std::process::id(),
        script.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("babeld.sock");
    let l = tokio::net::UnixListener::bind(&path).unwrap();
    let t = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let (mut s, _) = l.accept().await.unwrap();
        // Connected: the path has served. Removed now, not at the end, which a test that
        // drops this task before it ends never reaches.
        let _ = std::fs::remove_dir_all(&dir);
        s.write_all(script.as_bytes()).await.unwrap();
        let mut got = vec![0u8; 64];
        let n = tokio::time::timeout(Duration::from_millis(500), s.read(&mut got))
            .await
            .map_or(0, |r| r.unwrap_or(0));
        String::from_utf8_lossy(&got[..n]).into_owned()
    });
    (Endpoint::Unix(path), t)
}

#[tokio::test]
async fn client_reads_the_header_then_lines() {
    let (ep, server) = fake("BABEL 1.0\nversion babeld-1.12.1\nhost m1\nmy-id 02:00:00:00:00:00:00:01\nok\nadd interface e0 up false\nlast without newline").await;
    let (mut c, h) = Client::connect(&ep).await.unwrap();
    assert_eq!(h.my_id, Some(id(1)));
    assert_eq!(h.version.as_deref(), Some("babeld-1.12.1"));
    c.send("monitor").await.unwrap();
    assert_eq!(
        c.next_line().await.unwrap().as_deref(),
        Some("add interface e0 up false")
    );
    assert_eq!(
        c.next_line().await.unwrap().as_deref(),
        Some("last without newline")
    );
    assert_eq!(server.await.unwrap(), "monitor\n");
    assert_eq!(c.next_line().await.unwrap(), None);
}

#[tokio::test]
async fn client_refuses_what_is_not_babeld() {
    let (ep, _s) = fake("SSH-2.0-OpenSSH\n").await;
    let e = Client::connect(&ep).await.unwrap_err().to_string();
    assert!(e.contains("not babeld's local interface"), "{e}");
    let (ep, _s) = fake("BABEL 2.0\nok\n").await;
    let e = Client::connect(&ep).await.unwrap_err().to_string();
    assert!(e.contains("only version 1.x"), "{e}");
    let e = Client::connect(&Endpoint::Unix("/nonexistent/babeld.sock".into()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot reach babeld's local interface at /nonexistent/babeld.sock")
            && !e.contains('\n'),
        "{e}"
    );
}

#[tokio::test]
async fn long_lines_are_cut_and_fail_to_parse() {
    let (ep, _s) = fake(Box::leak(
        format!("BABEL 1.0\nok\n{}\nok\n", "x".repeat(5000)).into_boxed_str(),
    ))
    .await;
    let (mut c, _) = Client::connect(&ep).await.unwrap();
    let l = c.next_line().await.unwrap().unwrap();
    assert_eq!(l.len(), MAX_LINE + 1);
    assert_eq!(parse(&l), Err(LineError::TooLong));
    assert_eq!(c.next_line().await.unwrap().as_deref(), Some("ok"));
}
